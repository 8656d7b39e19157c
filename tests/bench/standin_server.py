"""Stand-in fleet: one process serving N fake hosts over real asyncssh on a few loopback ports.

Each exec'd session is answered as rigwatch's bootstrap expects of a host: the exec
request is parsed as ``python -u -c '<read N bytes>' --stdin-eof-exit ARGS``, the N bytes of
agent source are drained from stdin, then the host speaks: the recorded template's lines
before its first sample at once (hello, logsource...), then one sample a second, each
re-stamped (``seq``, ``ts``).  The lines were recorded beforehand from the agent itself
(the shipped source with the simulator, ``--simulate SCENARIO --fast --count N``) with the
same agent ARGS the console sends, so the wire format is the one the console negotiates:
an option the console adds (say ``--wire 2``) is in the recording's argv too.  A session
whose ARGS differ from every recording made so far is recorded on the spot (logged).
Stdin is read until EOF, which ends the session, as the agent's ``--stdin-eof-exit`` does.

Authentication is by public key only (the bench's client key); the host key is the one
the bench wrote to known_hosts, so the console verifies it as it would a real host.

A v2 tick (a JSON array) gets its first two elements, seq and ts, re-stamped; a v1 line its
``seq`` and ``ts`` keys.

Control: one JSON line per line read on stdin (``stat``) with ``sessions`` (open exec
sessions), ``streamed_sessions`` (sessions that sent a sample, ever), ``sent`` (samples sent so far)
and ``late_recordings``.  Standard output carries only these answers and ``{"ready": true}``.

    python tests/bench/standin_server.py --ports P1,P2 --host-key K --client-pub K.pub
        --templates 16 --count 120 --args-json '["--wire", "2", "--interval", "1"]'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.transport.bootstrap import agent_source  # noqa: E402

SCENARIOS = ("healthy", "healthy", "healthy", "throttle:5", "healthy", "leak:3", "healthy",
             "link-downgrade:2")
"""Templates cycle through these: mostly healthy hosts, some with trouble to show."""
HOST_SPECIFIC = ("--simulate", "--seed", "--speed", "--hostname", "--kernel-after-cursor",
                 "--sim-history", "--count", "--once")
"""Agent options that name one host's run, not the wire format: left out of a recording's key
(the recording brings its own simulator options)."""
_READ_N = re.compile(r"read\((\d+)\)")
log = logging.getLogger("standin")


def format_args(agent_args: list[str]) -> tuple[str, ...]:
    """The options of ``agent_args`` that shape what the agent prints (the recording key)."""
    out: list[str] = []
    skip = False
    for a in agent_args:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in HOST_SPECIFIC:
            skip = "=" not in a and name not in ("--once",)
            continue
        out.append(a)
    return tuple(out)


@dataclass(frozen=True)
class Template:
    """One recorded host: lines sent at once, then samples (with what follows each)."""

    preamble: tuple[bytes, ...]
    samples: tuple[tuple[bytes, ...], ...]
    """Each entry: one sample line and the non-sample lines the agent printed after it."""


def _is_sample(line: bytes) -> bool:
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    # v1: an object with a seq; v2: a tick, the array ``[seq, ts, gpus, host, disks, ...]``.
    return (isinstance(msg, dict) and "seq" in msg) or isinstance(msg, list)


def record(args: tuple[str, ...], templates: int, count: int,
           python: str = sys.executable) -> list[Template]:
    """Run the agent's simulator ``templates`` times with ``args``; split into templates."""
    src = Path(f"/tmp/rigwatch-standin-agent-{abs(hash(args))}.py")
    src.write_bytes(agent_source(True))
    out: list[Template] = []
    try:
        for i in range(templates):
            argv = [python, str(src), *args, "--simulate", SCENARIOS[i % len(SCENARIOS)],
                    "--seed", str(i + 1), "--fast", "--count", str(count),
                    f"--hostname=standin-{i:02d}"]
            proc = subprocess.run(argv, capture_output=True, check=True, timeout=120)
            lines = [ln for ln in proc.stdout.split(b"\n") if ln.strip()]
            first = next(k for k, ln in enumerate(lines) if _is_sample(ln))
            samples: list[list[bytes]] = []
            for ln in lines[first:]:
                if _is_sample(ln) or not samples:
                    samples.append([ln])
                else:
                    samples[-1].append(ln)
            out.append(Template(tuple(lines[:first]), tuple(tuple(s) for s in samples)))
    finally:
        src.unlink(missing_ok=True)
    return out


def restamp(line: bytes, seq: int | None, ts: float) -> bytes:
    """``line`` with its ``seq`` (when it has one) and ``ts`` set to now."""
    msg: Any = orjson.loads(line)
    if isinstance(msg, list):  # a v2 tick
        msg[1] = ts
        if seq is not None:
            msg[0] = seq
        return orjson.dumps(msg) + b"\n"
    if not isinstance(msg, dict):
        return line + b"\n"
    if "ts" in msg:
        msg["ts"] = ts
    if seq is not None and "seq" in msg:
        msg["seq"] = seq
    return orjson.dumps(msg) + b"\n"


@dataclass
class Fleet:
    """The recordings and the counters the bench reads."""

    templates: int
    count: int
    recordings: dict[tuple[str, ...], list[Template]] = field(default_factory=dict)
    sessions: int = 0
    streaming: int = 0
    sent: int = 0
    late_recordings: int = 0
    next_index: int = 0
    spread: bool = False
    """Sessions tick at evenly spread points of the second (``--spread``), not at their start."""

    def recording(self, key: tuple[str, ...]) -> list[Template]:
        """The templates for these agent options; empty when the agent refused them."""
        got = self.recordings.get(key)
        if got is None:
            log.warning("standin: recording on demand for agent options %s", key)
            self.late_recordings += 1
            try:
                got = record(key, self.templates, self.count)
            except (subprocess.CalledProcessError, StopIteration) as exc:
                log.error("standin: the agent could not record with %s: %s", key, exc)
                got = []
            self.recordings[key] = got
        return got


class HostSession(asyncssh.SSHServerSession[bytes]):
    """One fake host's agent session."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.chan: asyncssh.SSHServerChannel[bytes] | None = None
        self.need = 0
        self.task: asyncio.Task[None] | None = None
        self.key: tuple[str, ...] = ()
        self.started = asyncio.Event()

    def connection_made(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        self.chan = chan

    def shell_requested(self) -> bool:
        return False

    def exec_requested(self, command: str) -> bool:
        words = shlex.split(command)
        m = _READ_N.search(command)
        if m is None or "--stdin-eof-exit" not in words:
            log.warning("standin: refusing exec %r", command[:120])
            return False
        self.need = int(m.group(1))
        self.key = format_args(words[words.index("--stdin-eof-exit") + 1:])
        return True

    def session_started(self) -> None:
        self.fleet.sessions += 1
        self.task = asyncio.get_running_loop().create_task(self.stream())

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if self.need > 0:
            self.need -= len(data)
            if self.need <= 0:
                self.started.set()

    def eof_received(self) -> bool:
        self.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None
            self.fleet.sessions -= 1
        if self.chan is not None:
            self.chan.close()
            self.chan = None

    async def stream(self) -> None:
        fleet = self.fleet
        await self.started.wait()
        recs = fleet.recording(self.key)
        if not recs:
            self.close()
            return
        index = fleet.next_index
        fleet.next_index += 1
        t = recs[index % len(recs)]
        chan = self.chan
        assert chan is not None
        now = time.time()
        chan.write(b"".join(restamp(ln, None, now) for ln in t.preamble))
        loop = asyncio.get_running_loop()
        start = loop.time()
        if fleet.spread:  # each session's ticks at its own point of the second, spread evenly
            start = start - start % 1.0 + 1.0 + (index * 0.6180339887) % 1.0
        seq = 0
        offset = index % len(t.samples)
        counted = False
        while True:
            group = t.samples[(offset + seq) % len(t.samples)]
            now = time.time()
            chan.write(restamp(group[0], seq, now)
                       + b"".join(restamp(ln, None, now) for ln in group[1:]))
            fleet.sent += 1
            if not counted:
                fleet.streaming += 1
                counted = True
            seq += 1
            await asyncio.sleep(max(0.0, start + seq - loop.time()))


class Server(asyncssh.SSHServer):
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def session_requested(self) -> HostSession:
        return HostSession(self.fleet)


def control(fleet: Fleet) -> None:
    """Answer each line on stdin with the counters (a thread: reads of ints are safe)."""
    for _ in sys.stdin:
        print(json.dumps({"sessions": fleet.sessions, "streamed_sessions": fleet.streaming,
                          "sent": fleet.sent, "late_recordings": fleet.late_recordings}),
              flush=True)


async def serve(args: argparse.Namespace) -> None:
    fleet = Fleet(args.templates, args.count, spread=args.spread)
    key = format_args(json.loads(args.args_json))
    fleet.recordings[key] = record(key, args.templates, args.count)
    servers = [await asyncssh.listen(
        "127.0.0.1", port, server_factory=lambda: Server(fleet), server_host_keys=[args.host_key],
        authorized_client_keys=args.client_pub, encoding=None, backlog=4096,
        allow_scp=False, agent_forwarding=False, x11_forwarding=False)
        for port in args.ports]
    threading.Thread(target=control, args=(fleet,), daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        for s in servers:
            s.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ports", type=lambda s: [int(x) for x in s.split(",")], required=True)
    p.add_argument("--host-key", required=True)
    p.add_argument("--client-pub", required=True)
    p.add_argument("--templates", type=int, default=16)
    p.add_argument("--count", type=int, default=120)
    p.add_argument("--args-json", default='["--interval", "1"]',
                   help="the agent options the console will send (a JSON list)")
    p.add_argument("--spread", action="store_true",
                   help="each session's samples at its own point of the second (the golden "
                        "ratio's multiples of its index), not at its start: every client of "
                        "many hosts gets them spread the same way")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
