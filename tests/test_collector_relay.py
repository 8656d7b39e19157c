"""Back-pressure without freezing (issue 38 item 4; performance review §1b): a console that
stops reading its collector's pipe must stall no session, and a collector must not outlive
its console.

Real parts: the project's collector processes and their local agents (simulated hosts
streaming every ``INTERVAL_S``), the console's own ``CollectorBackend`` folded into a
``FleetState``.  The console's loop is frozen with a blocking sleep, as Textual's column
re-measure froze it for minutes; a thread beside it watches, through ``/proc``, whether any
agent or the collector sits blocked in a pipe write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from probes.transport.collector_wire import CollectorJob, frame
from probes.transport.collectors import CollectorBackend
from probes.wire.events import SourceHealth
from probes.wire.samples import HostSample
from tests.support.watched import Watched, healthy_hosts, until

INTERVAL_S = 0.02
"""Each agent's sample period: 4 hosts of 8 GPUs fill a 64 KiB pipe in about half a second."""
FREEZE_S = 6.0
PIPE_WAIT = "pipe_write"
"""What ``/proc/PID/wchan`` reads (``anon_pipe_write``, ``pipe_write``) for a process
blocked writing into a full pipe."""


def _fast_hosts(n: int) -> list:  # type: ignore[type-arg]
    return [dataclasses.replace(s, interval_s=INTERVAL_S) for s in healthy_hosts(n)]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ""


class _PipeWatch(threading.Thread):
    """Samples every 50 ms which of ``pids`` sit blocked in a pipe write; keeps, per pid,
    the longest such stretch in seconds."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.longest: dict[int, float] = {p: 0.0 for p in pids}
        self.stop = threading.Event()

    def run(self) -> None:
        since: dict[int, float] = {}
        while not self.stop.wait(0.05):
            now = time.monotonic()
            for pid in self.pids:
                if PIPE_WAIT in _wchan(pid):
                    since.setdefault(pid, now)
                    self.longest[pid] = max(self.longest[pid], now - since[pid])
                else:
                    since.pop(pid, None)


def _newest_seq(w: Watched, host: str) -> int:
    last = w.fleet.hosts[host].last
    return last.seq if last is not None and last.seq is not None else -1


async def test_a_console_that_stops_reading_stalls_no_session_and_gets_the_newest_sample(
) -> None:
    """The console freezes for ``FREEZE_S``: every agent keeps being read (none and not the
    collector blocks in a pipe write), and once it reads again it has, at once, each host's
    newest sample and how many were skipped."""
    specs = _fast_hosts(4)
    names = [s.name for s in specs]
    backend = CollectorBackend(specs, 1, flush_s=0.02)
    async with Watched(backend) as w:
        await until(lambda: all(_newest_seq(w, h) >= 0 for h in names), 60.0, "streaming")
        collector = backend.pids()[0]
        agents = _children(collector)
        assert len(agents) == len(names), agents
        before = {h: _newest_seq(w, h) for h in names}
        watch = _PipeWatch([collector, *agents])
        watch.start()
        time.sleep(FREEZE_S)  # the console's loop does nothing: it reads no pipe
        watch.stop.set()
        watch.join()
        resumed = time.monotonic()
        # every agent made about FREEZE_S / INTERVAL_S samples meanwhile: the newest of
        # each must be here at once, not the backlog in order
        want = {h: before[h] + int(0.5 * FREEZE_S / INTERVAL_S) for h in names}
        with contextlib.suppress(AssertionError):  # judged below, after the pipe watch
            await until(lambda: all(_newest_seq(w, h) >= want[h] for h in names), 10.0)
        caught_up_s = time.monotonic() - resumed
        reports = {h: [i for i in w.items[h] if isinstance(i, SourceHealth)
                       and getattr(i, "dropped_samples", 0)] for h in names}
        dropped = {h: getattr(w.fleet.hosts[h], "relay_dropped", 0) for h in names}
    print(f"froze {FREEZE_S:g} s: longest pipe-write wait {max(watch.longest.values()):.2f} s, "
          f"newest samples {caught_up_s:.2f} s after, skipped per host {sorted(dropped.values())}")
    blocked = {p: round(s, 2) for p, s in watch.longest.items() if s >= 0.5}
    assert blocked == {}, f"blocked in a pipe write (s) while the console froze: {blocked}"
    assert caught_up_s < 3.0, f"{caught_up_s:.1f} s to the newest samples"
    assert all(reports.values()), reports
    assert all(n > 0.3 * FREEZE_S / INTERVAL_S for n in dropped.values()), dropped
    assert all(r.source == "collector 1" for rs in reports.values() for r in rs)


async def test_the_relay_loses_no_sample_while_the_console_reads() -> None:
    """Coalescing is for a console that does not read: one that does gets every sample."""
    specs = _fast_hosts(2)
    names = [s.name for s in specs]
    backend = CollectorBackend(specs, 1, flush_s=0.02)
    async with Watched(backend) as w:
        await until(lambda: all(_newest_seq(w, h) >= 100 for h in names), 60.0, "streaming")
    for h in names:
        seqs = [i.seq for i in w.items[h] if isinstance(i, HostSample) and i.seq is not None]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"{h}: gaps in {seqs[:5]}…"
        assert getattr(w.fleet.hosts[h], "relay_dropped", 0) == 0


CONSOLE = textwrap.dedent("""
    import asyncio, dataclasses, time
    from tests.support.watched import healthy_hosts
    from probes.transport.collectors import CollectorBackend

    async def main():
        specs = [dataclasses.replace(s, interval_s=0.02) for s in healthy_hosts(3)]
        backend = CollectorBackend(specs, 1, flush_s=0.02)
        seen = set()
        def emit(host, item):
            seen.add(host)
            if len(seen) == 3 and not main.told:
                main.told = True
                print(" ".join(map(str, backend.pids())), flush=True)
                time.sleep(3600)  # frozen: it reads nothing until it is killed
        await backend.run(emit)
    main.told = False
    asyncio.run(main())
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_frozen_console_killed_leaves_no_collector_or_agent(tmp_path: Path) -> None:
    """The console froze (its collector's pipe full) and was then killed: the collector and
    every agent it started are gone within a few seconds."""
    console = subprocess.Popen([sys.executable, "-c", CONSOLE], stdout=subprocess.PIPE,
                               text=True, cwd=Path(__file__).resolve().parents[1])
    pids: list[int] = []
    try:
        assert console.stdout is not None
        (collector,) = [int(p) for p in console.stdout.readline().split()]
        time.sleep(2.0)  # the pipe fills: the collector has a frame it cannot send
        pids = [collector, *_children(collector)]
        assert len(pids) == 4 and all(_alive(p) for p in pids), pids
        console.kill()
        console.wait(10)
        deadline = time.monotonic() + 10.0
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if _alive(p)]
    finally:
        console.kill()
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    assert left == [], f"still alive after the console was killed: {left}"


def test_a_collector_told_to_stop_while_its_pipe_is_full_stops_at_once() -> None:
    """The console closes the collector's stdin (its stop) without reading its stdout, as a
    console does that stops while frozen: the collector sees the end, closes its sessions
    and exits within a few seconds, instead of waiting in a write for the console's kill."""
    specs = tuple(_fast_hosts(3))
    proc = subprocess.Popen(
        [sys.executable, "-m", "probes.transport.collector_worker", str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
        cwd=Path(__file__).resolve().parents[1])
    pids: list[int] = [proc.pid]
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(frame(CollectorJob(specs, 4, 0.02, "collector 1")))
        proc.stdin.flush()
        got = b""
        while got.count(b'"type":"hello"') < len(specs):  # every agent streams
            got += proc.stdout.read1(1 << 16)
        time.sleep(2.0)  # nobody reads: the pipe fills
        pids += _children(proc.pid)
        assert len(pids) == 1 + len(specs), pids
        proc.stdin.close()
        t0 = time.monotonic()
        while any(_alive(p) for p in pids) and time.monotonic() - t0 < 6.0:
            time.sleep(0.1)
        took = time.monotonic() - t0
        left = [p for p in pids if _alive(p)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert left == [], f"still alive {took:.1f} s after the end of stdin: {left}"
