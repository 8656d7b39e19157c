"""Running the operator's alert hook with bounds: time, output, processes and concurrency.

The hook is someone's script, and scripts hang, flood stdout, and leave children behind
(``curl … &``).  None of that may reach the console: the hook runs in a session of its own
(its own process group), gets ``timeout_s`` in all, and when it is over, whether it exited,
timed out or the console quit, whatever is left of its group gets SIGTERM and, after a short
grace, SIGKILL.  Its stdout and stderr share one pipe that this side owns and reads in
chunks: the first ``HOOK_OUTPUT_LIMIT`` bytes are kept, the rest is read and thrown away, so
a flood costs neither memory nor a blocked hook, and no holder of the pipe (a grandchild) can
keep the run from ending.  ``HookGate`` caps how many hooks run at once and how many wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from probes.analysis.alerts import Alert

HOOK_OUTPUT_LIMIT = 64 * 1024
"""Bytes of the hook's output kept (the rest is read and discarded)."""
HOOK_NOTE_CHARS = 4096
"""Characters of the kept output shown in a notification or the result."""
KILL_GRACE_S = 1.0
"""Between SIGTERM to what is left of the hook's group and SIGKILL."""
READ_CHUNK = 64 * 1024
DISCARD_PAUSE_S = 0.005
"""Pause after each discarded chunk (caps the drain near 13 MB/s, a sliver of a core)."""
HOOKS_AT_ONCE = 4
HOOKS_WAITING = 16


@dataclass(frozen=True)
class HookResult:
    """How one hook run ended."""

    alert: Alert
    returncode: int | None
    """None when it timed out, could not start or was dropped."""
    output: str
    error: str | None = None
    truncated: bool = False
    """The hook wrote more than ``HOOK_OUTPUT_LIMIT`` bytes; the rest was discarded."""

    @property
    def ok(self) -> bool:
        """The hook ran and exited 0."""
        return self.returncode == 0


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, from /proc.

    /proc rather than ``killpg(pgid, 0)``: a zombie nobody reaps (PID 1 in a container may
    not) still counts for kill(2) but holds nothing.
    """
    found: list[int] = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        with contextlib.suppress(OSError):
            os.killpg(pgid, 0)
            return [pgid]
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            found.append(int(entry.name))
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def end_group(pgid: int, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM every process left in the group, then SIGKILL what is still there."""
    if not group_members(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    until = loop.time() + grace_s
    while loop.time() < until:
        await asyncio.sleep(0.05)
        if not group_members(pgid):
            return
    _signal_group(pgid, signal.SIGKILL)


class _Output:
    """Keeps the first ``limit`` bytes read from the pipe and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    async def drain(self, reader: asyncio.StreamReader) -> None:
        """Read to EOF, keeping at most ``limit`` bytes.

        Past the limit each chunk is followed by a short pause: a hook that floods then
        blocks on the pipe instead of costing the console a core until its timeout.
        """
        while chunk := await reader.read(READ_CHUNK):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            else:
                await asyncio.sleep(DISCARD_PAUSE_S)

    def text(self) -> str:
        """What the hook said, for a note: decoded, stripped and short."""
        return self.kept.decode("utf-8", errors="replace").strip()[:HOOK_NOTE_CHARS]


async def _feed(stdin: asyncio.StreamWriter | None, payload: bytes) -> None:
    """The alert on the hook's stdin; a hook that does not read it is not an error."""
    if stdin is None:
        return
    with contextlib.suppress(ConnectionError, BrokenPipeError):
        stdin.write(payload)
        await stdin.drain()
    stdin.close()


async def run_hook(argv: Sequence[str], alert: Alert, timeout_s: float, *,
                   output_limit: int = HOOK_OUTPUT_LIMIT,
                   grace_s: float = KILL_GRACE_S) -> HookResult:
    """Run the hook for one alert: JSON on stdin, ``RIGWATCH_*`` in the environment.

    Returns within about ``timeout_s + 2 * grace_s`` whatever the hook does, and leaves no
    process of its group behind.  Never raises (except CancelledError, after cleaning up):
    a missing program, a timeout or a non-zero exit is reported in the result.
    """
    env = {**os.environ, **alert.environment()}
    payload = json.dumps(alert.to_json()).encode()
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=write_fd, stderr=write_fd, env=env,
            start_new_session=True)
    except OSError as exc:
        os.close(read_fd)
        return HookResult(alert, None, "", f"cannot run {argv[0]}: {exc.strerror or exc}")
    finally:
        os.close(write_fd)
    reader = asyncio.StreamReader(limit=READ_CHUNK)
    pipe_file = os.fdopen(read_fd, "rb", buffering=0)
    pipe: asyncio.BaseTransport | None = None
    output = _Output(output_limit)
    tasks: list[asyncio.Task[None]] = []
    timed_out = False
    try:  # from here on, however this ends, the group ends with it
        pipe, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe_file)
        reading = asyncio.create_task(output.drain(reader))
        tasks = [reading, asyncio.create_task(_feed(proc.stdin, payload))]
        deadline = loop.time() + timeout_s
        try:
            await asyncio.wait_for(_exited(proc), timeout_s)
            # the hook exited; its children may still be writing: they share the deadline
            await asyncio.wait({reading}, timeout=max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            timed_out = True
        await end_group(proc.pid, grace_s)
        await asyncio.wait({reading}, timeout=grace_s)
    finally:
        if proc.returncode is None or group_members(proc.pid):
            _signal_group(proc.pid, signal.SIGKILL)  # cancelled: no grace, no orphans
        for task in tasks:
            task.cancel()
        if proc.stdin is not None and not proc.stdin.transport.is_closing():
            proc.stdin.transport.abort()
        if pipe is not None:
            pipe.close()
        else:
            pipe_file.close()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(_exited(proc), grace_s)
    return _result(alert, argv[0], proc.returncode, output, timed_out, timeout_s)


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Until the hook's own process has exited (not until its pipes close, as wait() is)."""
    while proc.returncode is None:
        await asyncio.sleep(0.02)


def _result(alert: Alert, name: str, returncode: int | None, output: _Output,
            timed_out: bool, timeout_s: float) -> HookResult:
    text = output.text()
    truncated = output.total > output.limit
    if truncated:
        text += f"\n[{output.total - output.limit} more bytes of output discarded]"
    if timed_out:
        return HookResult(alert, None, text, f"{name} did not finish within {timeout_s:g} s "
                                             "and was killed (with its children)", truncated)
    if returncode != 0:
        return HookResult(alert, returncode, text, f"{name} exited with status {returncode}",
                          truncated)
    return HookResult(alert, 0, text, None, truncated)


class HookGate:
    """At most ``at_once`` hooks run; up to ``waiting`` more queue; the rest are dropped.

    A burst of alerts (a switch reboots and fifty hosts lose their link) must not fork
    fifty scripts: ``admit`` says no, and the caller shows that a hook run was dropped.
    """

    def __init__(self, at_once: int = HOOKS_AT_ONCE, waiting: int = HOOKS_WAITING) -> None:
        self.at_once = max(1, at_once)
        self.waiting = max(0, waiting)
        self._slots = asyncio.Semaphore(self.at_once)
        self.admitted = 0
        """Runs admitted and not yet finished (running plus queued)."""
        self.running = 0
        self.dropped = 0
        """Runs refused since the console started."""

    def admit(self) -> bool:
        """Reserve a place for one run, or count it dropped when all are taken."""
        if self.admitted >= self.at_once + self.waiting:
            self.dropped += 1
            return False
        self.admitted += 1
        return True

    async def run(self, argv: Sequence[str], alert: Alert, timeout_s: float) -> HookResult:
        """Run an admitted hook when a slot is free."""
        try:
            async with self._slots:
                self.running += 1
                try:
                    return await run_hook(argv, alert, timeout_s)
                finally:
                    self.running -= 1
        finally:
            self.admitted -= 1
