"""``--collectors N``: the fleet's sessions in N worker processes, the console in its own.

One interpreter holds one core.  At 1000 hosts the SSH side alone (handshakes, the
cipher, channel bookkeeping, the session's decode) is most of a core, and the UI shares it.
Here each collector process runs the sessions of one shard of the hosts (every Nth host,
so connect storms spread evenly) and sends the console, once per ``flush_s``, the bytes
its agents sent plus the few items the sessions make themselves; a v2 tick the collector
already decoded travels as its row (``collector_wire.RelayedTick``), a hello as the
``Hello`` it decoded (``RelayedHello``).  The console decodes
each host's bytes with its own reader, builds each relayed tick's sample against that
reader's static facts, and folds the items as if its own sessions had made them:
everything after the backend (state, history, findings, recording) is unchanged.

A batch is folded in slices of ``FOLD_SLICE_S`` of the loop's time, with a turn of the loop
between two (``FoldSlices``): at a thousand hosts one frame can hold hundreds of samples
(more when the console fell behind and the relay kept each host's newest), and folded in
one callback they kept a key press waiting for all of them.  The order of the items and
what the relay counted as skipped are unchanged; only when the loop gets a turn is.

A collector's faults are the console's, not its hosts': the console watches each one (a
heartbeat frame every ``HEARTBEAT_S`` when there is nothing else to send).  One silent for
``STALLED_AFTER_S`` is ``collector-stalled`` (frozen, stopped, starved), and is killed and
started again after ``HUNG_AFTER_S``; one that exits, or sends a frame that cannot be read,
is ``collector-died`` and is started again after ``RESTART_S``.  Either way its hosts read
"unknown" (``SourceHealth``), one finding names the collector, and the other collectors
never notice.  A collector exits when the console does (``collector_worker``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from probes.config.fleet import HostSpec
from probes.errors import WatcherFault
from probes.sources.agents import emit_reads
from probes.sources.base import BackendBase
from probes.sources.collector_start import AdoptedProcess, EarlyCollector, collector_argv
from probes.transport.collector_wire import (
    RETRY,
    Batch,
    CollectorJob,
    RelayedHello,
    check_batch,
    frame,
    frame_length,
    relayed_sample,
    unframe,
)
from probes.transport.host_clock import clocked
from probes.transport.sessions import MAX_CONCURRENT_CONNECTS, cancel_once
from probes.wire.events import Connected, Disconnected, Emit, SourceHealth
from probes.wire.protocol import MessageReader

log = logging.getLogger(__name__)

FLUSH_S = 0.05
"""How long a collector gathers entries before it sends them: 20 frames a second."""
RESTART_S = 5.0
"""A collector that died starts again after this long."""
STOP_S = 12.0
"""How long a collector has to stop its agents once told to; then it is killed."""
HOSTS_PER_COLLECTOR = 256
"""Below this many hosts one process keeps up easily; the automatic count adds a
collector per this many hosts."""
MAX_AUTO = 8
STDERR_LINES = 20
"""The collector's last stderr lines kept for a crash's reason."""
STALLED_AFTER_S = 3.0
"""No frame (a heartbeat comes every ``collector_wire.HEARTBEAT_S``) for this long: stalled.
Below the hosts' own stale limit (5 s at least), so they read unknown, never stale."""
HUNG_AFTER_S = 60.0
"""A collector silent this long is killed and started again."""
CHECK_S = 0.5
LATE_S = 1.0
"""A check this late means the console itself did not run (frozen, starved): that time is
not counted as the collector's silence."""
FOLD_SLICE_S = 0.004
"""The most of the loop's time one slice of a batch's fold takes before the loop gets a turn
(a key, a redraw, another collector): a key then waits a few slices, not a whole batch."""

KEY_WAIT_S = 0.02
"""The longest one turn of the fold waits for a key on its way: a held key (auto-repeat)
still leaves the fold about a sixth of the loop, more than it needs at 1024 hosts."""
KEY_POLL_S = 0.001


def _nothing_pending() -> bool:
    return False


INPUT_PENDING: ContextVar[Callable[[], bool]] = ContextVar("INPUT_PENDING",
                                                           default=_nothing_pending)
"""Whether the operator's input is on its way through the console: set by the console
around its backend's run (a context variable, so the tasks the backend starts inherit it
and no source needs to know there is a UI); nothing is ever pending for a CLI read."""


class FoldSlices:
    """Where a long fold lets the loop run: ``due`` after each item, ``turn`` when it is.

    The time is the loop's, measured with ``clock`` (a test counts its calls instead): the
    fold gives the loop a turn once a slice has taken ``budget_s``, however many items that
    was.  ``turns`` counts the turns given (tests and benches read it).
    """

    def __init__(self, budget_s: float = FOLD_SLICE_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.budget_s = budget_s
        self.clock = clock
        self.turns = 0
        self._end = clock() + budget_s

    def due(self) -> bool:
        """This slice has had its time."""
        return self.clock() >= self._end

    async def turn(self) -> None:
        """Give the loop one turn, then start a new slice; while the operator's key is on
        its way (``INPUT_PENDING``), keep giving turns, up to ``KEY_WAIT_S``.

        One turn lets a key take one hop (the app, the screen, the table, the repaint), and
        the next hop then waited behind the next slice: 10-40 ms a key at 1024 hosts.
        """
        await asyncio.sleep(0)
        pending = INPUT_PENDING.get()
        if pending():
            until = self.clock() + KEY_WAIT_S
            while pending() and self.clock() < until:
                await asyncio.sleep(KEY_POLL_S)
        self.turns += 1
        self._end = self.clock() + self.budget_s


def auto_collectors(hosts: int, cpus: int | None = None) -> int:
    """How many collectors ``--collectors`` chooses by itself: none (sessions in the
    console's process) for a small fleet or a one-core machine, else one per
    ``HOSTS_PER_COLLECTOR`` hosts, leaving a core to the console."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if hosts < HOSTS_PER_COLLECTOR or cpus < 2:
        return 0
    return max(1, min(cpus - 1, math.ceil(hosts / HOSTS_PER_COLLECTOR), MAX_AUTO))


Proc = asyncio.subprocess.Process | AdoptedProcess
"""A collector process: started on the loop, or before it and adopted."""


@dataclass
class _Shard:
    """One collector process and what the console keeps of its hosts."""

    number: int
    """1-based: the operator reads ``collector 2``."""
    job: CollectorJob
    readers: dict[int, MessageReader] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    """Hosts whose last item was a Disconnected: a retry can help them."""
    proc: Proc | None = None
    early: EarlyCollector | None = None
    """Started before the loop ran (``prestart``), adopted by the first run."""
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    heard: float = 0.0
    """Loop time of the newest frame (heartbeats included)."""
    fault: WatcherFault | None = None
    ended: str | None = None
    """Why the console ended this collector (killed for silence, a bad frame), if it did."""

    @property
    def name(self) -> str:
        return f"collector {self.number}"


class CollectorBackend(BackendBase):
    """Run the fleet's sessions in ``collectors`` worker processes (see the module)."""

    def __init__(self, specs: list[HostSpec], collectors: int,
                 max_connecting: int = MAX_CONCURRENT_CONNECTS,
                 flush_s: float = FLUSH_S, restart_s: float = RESTART_S,
                 stalled_after_s: float = STALLED_AFTER_S,
                 hung_after_s: float = HUNG_AFTER_S,
                 slices: Callable[[], FoldSlices] = FoldSlices) -> None:
        if collectors < 1:
            raise ValueError("a collector backend needs at least one collector")
        self.specs = specs
        self.restart_s = restart_s
        self.stalled_after_s = stalled_after_s
        self.hung_after_s = hung_after_s
        self.slices = slices
        """Makes each collector's ``FoldSlices`` (a test gives its own clock or budget)."""
        n = min(collectors, max(1, len(specs)))
        per = max(1, math.ceil(max_connecting / n))
        self._shards = [_Shard(k + 1, CollectorJob(tuple(specs[k::n]), per, flush_s,
                                                   f"collector {k + 1}"))
                        for k in range(n)]
        self._where = {spec.name: (shard, i) for shard in self._shards
                       for i, spec in enumerate(shard.job.specs)}

    @property
    def collectors(self) -> int:
        """How many worker processes run the sessions."""
        return len(self._shards)

    def pids(self) -> list[int]:
        """The running collectors' process ids (a test checks they are gone after a stop)."""
        return [s.proc.pid for s in self._shards if s.proc is not None]

    def retry_now(self, host: str) -> bool:
        """Tell the host's collector to cut its backoff; False unless it is down now."""
        where = self._where.get(host)
        if where is None:
            return False
        shard, i = where
        proc = shard.proc
        if i not in shard.down or proc is None or proc.stdin is None:
            return False
        proc.stdin.write(f"{RETRY} {i}\n".encode())
        return True

    def prestart(self) -> None:
        """Start every collector process now, before the loop runs (the console calls this
        before importing its UI): their start overlaps the UI's (``collector_start``)."""
        for shard in self._shards:
            if shard.proc is None and shard.early is None:
                shard.early = EarlyCollector.spawn(shard.job)

    async def run_once(self, emit: Emit) -> None:
        """One read is one ``--once`` answer per host: no collector is worth starting."""
        await emit_reads(self.specs, emit)

    async def run(self, emit: Emit) -> None:
        """Keep every collector running until cancelled; then stop them all."""
        emit = clocked(emit)  # each host's times on the console's clock, before any fold
        tasks = [asyncio.create_task(self._keep(shard, emit), name=f"collector {k}")
                 for k, shard in enumerate(self._shards)]
        try:
            await asyncio.gather(*tasks)
        finally:
            cancel_once(tasks)
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _keep(self, shard: _Shard, emit: Emit) -> None:
        while True:
            reason = await self._run_once(shard, emit)
            for i in range(len(shard.job.specs)):
                shard.readers.pop(i, None)
                shard.down.add(i)
            log.warning("%s: %s", shard.name, reason)
            self._health(shard, emit, WatcherFault.COLLECTOR_DIED,
                         f"{reason}; restarting in {self.restart_s:g} s")
            await asyncio.sleep(self.restart_s)

    @staticmethod
    def _health(shard: _Shard, emit: Emit, fault: WatcherFault | None, reason: str = "") -> None:
        """Tell each of the shard's hosts whether it is seen through its collector."""
        shard.fault = fault
        now = time.time()
        for spec in shard.job.specs:
            emit(spec.name, SourceHealth(now, shard.name, fault, reason))

    async def _run_once(self, shard: _Shard, emit: Emit) -> str:
        """One collector process from start to exit; returns why it ended."""
        early, shard.early = shard.early, None
        proc: Proc
        if early is not None:  # started before the loop ran: its job is (being) written
            proc = await early.adopt()
        else:
            proc = await asyncio.create_subprocess_exec(
                *collector_argv(), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True)
        shard.proc, shard.ended = proc, None
        shard.heard = asyncio.get_running_loop().time()
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        drain = asyncio.create_task(self._drain_stderr(shard, proc.stderr))
        watch = asyncio.create_task(self._watch(shard, proc, emit))
        try:
            if early is None:
                proc.stdin.write(frame(shard.job))
            bad = await self._read(shard, proc.stdout, emit)
            if bad is not None:  # never trust the rest of that pipe: start afresh
                shard.ended = f"sent a frame that cannot be read ({bad})"
                _kill(proc)
            rc = await proc.wait()
        finally:
            watch.cancel()
            with contextlib.suppress(Exception):
                await asyncio.shield(self._stop(proc))
            shard.proc = None
            drain.cancel()
        if shard.ended is not None:
            return f"{shard.name} (pid {proc.pid}) {shard.ended}"
        last = shard.stderr[-1] if shard.stderr else "no message"
        return f"{shard.name} (pid {proc.pid}) exited (status {rc}): {last}"

    async def _watch(self, shard: _Shard, proc: Proc,
                     emit: Emit) -> None:
        """The collector's heartbeat: stalled after ``stalled_after_s`` of silence, killed
        (and so restarted) after ``hung_after_s``."""
        loop = asyncio.get_running_loop()
        due = loop.time() + CHECK_S
        while True:
            await asyncio.sleep(CHECK_S)
            now = loop.time()
            if now - due > LATE_S:  # this process did not run: not the collector's silence
                shard.heard += now - due
            due = now + CHECK_S
            silent = now - shard.heard
            if silent >= self.hung_after_s:
                shard.ended = f"sent no heartbeat for {silent:.0f} s and was killed"
                _kill(proc)
                return
            if silent >= self.stalled_after_s and shard.fault is None:
                self._health(shard, emit, WatcherFault.COLLECTOR_STALLED,
                             f"no heartbeat for {silent:.0f} s (pid {proc.pid}; killed and "
                             f"restarted after {self.hung_after_s:g} s)")

    async def _read(self, shard: _Shard, stdout: asyncio.StreamReader,
                    emit: Emit) -> str | None:
        """Fold every frame the collector sends until its stdout ends (None), or until a
        frame cannot be read: what was wrong with it."""
        loop = asyncio.get_running_loop()
        slices = self.slices()
        while True:
            try:
                length = frame_length(await stdout.readexactly(4))
                body = await stdout.readexactly(length)
            except asyncio.IncompleteReadError as exc:
                return f"a frame cut after {len(exc.partial)} bytes" if exc.partial else None
            except ValueError as exc:
                return str(exc)
            shard.heard = loop.time()
            if shard.fault is not None:
                self._health(shard, emit, None)
            try:
                batch = check_batch(unframe(body), len(shard.job.specs))
            except Exception as exc:  # one collector's garbage is that collector's fault
                return f"{type(exc).__name__}: {str(exc)[:200]}"
            await self._fold(shard, batch, emit, slices)

    @staticmethod
    async def _fold(shard: _Shard, batch: Batch, emit: Emit, slices: FoldSlices) -> None:
        """Fold the batch's entries in order, giving the loop a turn whenever a slice has
        had its time (between entries: one host's bytes are decoded and folded whole)."""
        specs = shard.job.specs
        readers = shard.readers
        due = slices.due
        for i, entry in batch:
            if due():
                await slices.turn()
            if isinstance(entry, tuple):  # a v2 tick as its row (nearly every entry): built,
                reader = readers.get(i)  # not parsed again
                if reader is not None:
                    sample = relayed_sample(reader, entry)
                    if sample is not None:
                        emit(specs[i].name, sample)
                continue
            host = specs[i].name
            if isinstance(entry, RelayedHello):  # decoded there: taken, not parsed again
                reader = readers.get(i)
                if reader is not None:
                    emit(host, reader.relayed_hello(entry.hello, entry.columns))
            elif isinstance(entry, bytes):
                reader = readers.get(i)
                if reader is not None:
                    for msg in reader.feed(entry):
                        emit(host, msg)
            elif entry is None:
                reader = readers.get(i)
                if reader is not None:
                    for msg in reader.close():
                        emit(host, msg)
            else:
                if isinstance(entry, Connected):
                    readers[i] = MessageReader()
                    shard.down.discard(i)
                elif isinstance(entry, Disconnected):
                    shard.down.add(i)
                emit(host, entry)

    @staticmethod
    async def _drain_stderr(shard: _Shard, stderr: asyncio.StreamReader) -> None:
        while line := await stderr.readline():
            text = line.decode(errors="replace").rstrip()
            shard.stderr.append(text)
            log.info("%s", text)

    @staticmethod
    async def _stop(proc: Proc) -> None:
        """Close its stdin (the collector stops its agents and exits); kill it if it has
        not within ``STOP_S``."""
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), STOP_S)
        except asyncio.TimeoutError:
            _kill(proc)
            await proc.wait()


def _kill(proc: Proc) -> None:
    """SIGKILL the collector's whole group (its local agents too): a stopped one as well."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
