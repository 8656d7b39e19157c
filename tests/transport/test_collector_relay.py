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

import asyncio
import contextlib
import dataclasses
import fcntl
import os
import signal
import subprocess
import sys
import termios
import textwrap
import threading
import time
from pathlib import Path

import pytest

from probes.analysis.incident import TriageRecord, review
from probes.sources.collectors import CollectorBackend
from probes.transport import relay as relay_module
from probes.transport.collector_wire import CollectorJob, frame, frame_length, unframe
from probes.transport.relay import Relay
from probes.wire.events import Connected, Disconnected, SourceHealth
from probes.wire.protocol import MAX_LINE_BYTES, MessageReader
from probes.wire.samples import HostSample
from tests.support.paths import REPO
from tests.support.processes import kill_each, survivors
from tests.support.watched import Watched, healthy_hosts, until
from tui.views.triage_view import host_view

INTERVAL_S = 0.02
"""Each agent's sample period: 4 hosts of 8 GPUs fill a 64 KiB pipe in about half a second."""
FREEZE_S = 6.0
F_SETPIPE_SZ = 1031
"""fcntl: set a pipe's size (Linux)."""
PIPE_WAIT = "pipe_write"
"""What ``/proc/PID/wchan`` reads (``anon_pipe_write``, ``pipe_write``) for a process
blocked writing into a full pipe."""

FREEZE_MAX_S = 30.0
PIPE_FULL = 48 << 10
"""Bytes waiting in the collector's stdout pipe (64 KiB) when the relay must skip."""
FULL_FOR_S = 1.0


def _pipe_held(pid: int) -> int:
    """Bytes waiting, unread by this process, in the pipe that is ``pid``'s stdout."""
    try:
        pipe = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") == pipe:
                buf = fcntl.ioctl(int(fd), termios.FIONREAD, b"\0\0\0\0")
                return int.from_bytes(buf, sys.byteorder)
    return 0


def _freeze_until_full(collector: int) -> tuple[float, bool]:
    """Block this loop for ``FREEZE_S``, and on until the collector's pipe has been full for
    ``FULL_FOR_S`` (at most ``FREEZE_MAX_S``); the seconds frozen, and whether it filled."""
    t0 = time.monotonic()
    full_since: float | None = None
    while (now := time.monotonic()) - t0 < FREEZE_MAX_S:
        if _pipe_held(collector) >= PIPE_FULL:
            full_since = now if full_since is None else full_since
        if now - t0 >= FREEZE_S and full_since is not None and now - full_since >= FULL_FOR_S:
            break
        time.sleep(0.05)
    return time.monotonic() - t0, full_since is not None


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
        # the console's loop does nothing: it reads no pipe, for FREEZE_S and until the
        # collector's pipe is full and has stayed full a while (on a loaded machine the
        # agents may not fill it within FREEZE_S, and then nothing needed skipping)
        frozen_s, filled = _freeze_until_full(collector)
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
        dropped = {h: w.fleet.hosts[h].reach.relay_dropped for h in names}
        checked = review([], [host_view(w.fleet.hosts[h]) for h in names],
                         TriageRecord())[0].checked
    print(f"froze {frozen_s:.1f} s: longest pipe-write wait {max(watch.longest.values()):.2f} s, "
          f"newest samples {caught_up_s:.2f} s after, skipped per host {sorted(dropped.values())}")
    assert filled, f"the collector's pipe never filled in {frozen_s:.0f} s"
    blocked = {p: round(s, 2) for p, s in watch.longest.items() if s >= 0.5}
    assert blocked == {}, f"blocked in a pipe write (s) while the console froze: {blocked}"
    assert caught_up_s < 3.0, f"{caught_up_s:.1f} s to the newest samples"
    assert all(reports.values()), reports
    assert all(n > 0.3 * FREEZE_S / INTERVAL_S for n in dropped.values()), dropped
    assert all(r.source == "collector 1" for rs in reports.values() for r in rs)
    assert checked[-1].startswith(f"{sum(dropped.values())} samples skipped"), checked


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
        assert w.fleet.hosts[h].reach.relay_dropped == 0


CONSOLE = textwrap.dedent("""
    import asyncio, dataclasses, time
    from tests.support.watched import healthy_hosts
    from probes.sources.collectors import CollectorBackend

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
                               text=True, cwd=REPO)
    pids: list[int] = []
    try:
        assert console.stdout is not None
        (collector,) = [int(p) for p in console.stdout.readline().split()]
        time.sleep(2.0)  # the pipe fills: the collector has a frame it cannot send
        pids = [collector, *_children(collector)]
        assert len(pids) == 4 and all(_alive(p) for p in pids), pids
        console.kill()
        console.wait(10)
        left = survivors(pids, _alive, 10.0)
    finally:
        console.kill()
        kill_each(pids, lambda p: os.kill(p, signal.SIGKILL))
    assert left == [], f"still alive after the console was killed: {left}"


def test_a_collector_told_to_stop_while_its_pipe_is_full_stops_at_once() -> None:
    """The console closes the collector's stdin (its stop) without reading its stdout, as a
    console does that stops while frozen: the collector sees the end, closes its sessions
    and exits within a few seconds, instead of waiting in a write for the console's kill."""
    specs = tuple(_fast_hosts(3))
    proc = subprocess.Popen(
        [sys.executable, "-m", "probes.transport.collector_worker", str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
        cwd=REPO)
    pids: list[int] = [proc.pid]
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(frame(CollectorJob(specs, 4, 0.02, "collector 1")))
        proc.stdin.flush()
        got = b""
        # every agent streams (its hello travels decoded, its first static as text)
        while got.count(b'"type":"static"') < len(specs):
            more = proc.stdout.read1(1 << 16)
            assert more, f"the collector ended: {got[-300:]!r}"
            got += more
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


HELLO = b'{"type":"hello","v":2,"ts":1}\n'
STATIC = b'{"type":"static","v":2,"ts":1,"gpus":[]}\n'
EVENT = b'{"type":"event","v":2,"ts":1,"source":"kernel","line":"%d"}\n'


def _tick(seq: int) -> bytes:
    return b"[%d,1.0,[],[],[]]\n" % seq


async def _read_frames(r: int, skip: int, want: int) -> list[tuple[int, object]]:
    """Read past ``skip`` bytes of filler, then ``want`` frames, as a console that reads
    again does."""
    buf = b""
    for _ in range(400):
        with contextlib.suppress(BlockingIOError):
            buf += os.read(r, 1 << 20)
        if len(buf) >= skip:
            frames, rest = [], buf[skip:]
            while len(rest) >= 4 and len(rest) >= 4 + frame_length(rest[:4]):
                n = frame_length(rest[:4])
                frames.append(unframe(rest[4:4 + n]))
                rest = rest[4 + n:]
            if len(frames) >= want:
                return [e for f in frames for e in f]  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)
    raise AssertionError("the relay sent too little")


def _fill(w: int) -> int:
    """Fill the pipe (4 KiB): the console is not reading; how many bytes that took."""
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    filled = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filled += os.write(w, b"x" * 512)
    return filled


def _blocked_relay(specs: tuple, w: int) -> tuple[Relay, int]:  # type: ignore[type-arg]
    """A relay whose pipe is already full."""
    filled = _fill(w)
    return Relay(CollectorJob(specs, 4, 0.01, "collector 7"), w), filled


def test_a_blocked_relay_keeps_each_hosts_newest_sample_after_what_came_before_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Newest sample wins, in its place in the host's order (after a new static), other
    lines are kept in order up to their bound, and the counts follow the host's entries."""
    monkeypatch.setattr(relay_module, "LOG_BYTES", 3 * len(EVENT % 0))
    specs = tuple(healthy_hosts(2))
    r, w = os.pipe()
    os.set_blocking(r, False)

    async def run() -> list[tuple[int, object]]:
        relay, filled = _blocked_relay(specs, w)
        relay.add(0, HELLO + STATIC + _tick(1))
        relay.flush()  # this frame does not fit: the relay is blocked from here
        assert relay.blocked
        relay.add(0, _tick(2))
        relay.add(1, _tick(100) + _tick(101))
        for i in range(5):
            relay.add(0, EVENT % i)
        relay.add(0, STATIC)
        relay.add(0, _tick(3)[:5])  # a tick cut across chunks
        relay.add(0, _tick(3)[5:] + _tick(4))
        relay.add(1, _tick(102))
        relay.add(1, None)
        return await _read_frames(r, filled, 2)

    try:
        entries = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    host0 = [e for i, e in entries if i == 0]
    host1 = [e for i, e in entries if i == 1]
    assert [e for e in host0 if isinstance(e, bytes)] == [
        HELLO + STATIC + _tick(1), EVENT % 0, EVENT % 1, EVENT % 2, STATIC, _tick(4)]
    assert host1[:2] == [_tick(102), None]
    report0, report1 = host0[-1], host1[-1]
    assert isinstance(report0, SourceHealth) and isinstance(report1, SourceHealth)
    assert (report0.dropped_samples, report0.dropped_lines) == (2, 2)  # ticks 2, 3; 2 events
    assert (report1.dropped_samples, report1.dropped_lines) == (2, 0)
    assert report0.source == "collector 7" and report0.fault is None


def test_an_over_long_line_travels_in_pieces_and_the_reader_counts_it() -> None:
    """A line past the reader's limit is not held whole by the relay: its pieces go on, and
    the console's reader counts one over-long line and reads the next."""
    specs = tuple(healthy_hosts(1))
    r, w = os.pipe()
    long_line = b'{"type":"event","line":"' + b"a" * (MAX_LINE_BYTES + 100_000) + b'"}\n'

    async def run() -> list[tuple[int, object]]:
        relay = Relay(CollectorJob(specs, 4, 0.01), w)
        for k in range(0, len(long_line), 65536):
            relay.add(0, long_line[k:k + 65536])
        relay.add(0, HELLO)
        relay.add(0, None)
        os.set_blocking(r, False)
        return await _read_frames(r, 0, 1)

    try:
        entries = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    reader = MessageReader()
    msgs = [m for _, e in entries if isinstance(e, bytes) for m in reader.feed(e)]
    assert reader.stats.overlong == 1
    assert [type(m).__name__ for m in msgs] == ["Hello"]


def test_counts_go_out_at_most_once_per_report_period(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console that reads, but slowly, is not sent one more item per host each flush: a
    second stall's counts wait for ``REPORT_S`` and then come with the heartbeat."""
    monkeypatch.setattr(relay_module, "REPORT_S", 1.0)
    specs = tuple(healthy_hosts(1))
    r, w = os.pipe()
    os.set_blocking(r, False)

    def reports(entries: list[tuple[int, object]]) -> list[int]:
        return [e.dropped_samples for _, e in entries if isinstance(e, SourceHealth)]

    async def stall(relay: Relay, first: int) -> list[tuple[int, object]]:
        filled = _fill(w)
        relay.add(0, _tick(first))
        relay.flush()
        assert relay.blocked
        relay.add(0, _tick(first + 1) + _tick(first + 2))
        return await _read_frames(r, filled, 2)

    async def run() -> tuple[list[int], list[int], list[int]]:
        relay = Relay(CollectorJob(specs, 4, 0.01, "collector 1"), w)
        relay.heartbeat()
        one = reports(await stall(relay, 10))
        two = reports(await stall(relay, 20))
        await asyncio.sleep(1.5)
        later = reports(await _read_frames(r, 0, 1))
        await relay.close(0.5)
        return one, two, later

    try:
        one, two, later = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    assert (one, two, later) == ([1], [], [1])


def test_a_stream_that_broke_off_mid_line_does_not_spoil_the_next_ones_hello() -> None:
    """The relay holds a partial line until its newline; a session that ended without one
    (the link dropped) must not glue it to the next session's first line."""
    specs = tuple(healthy_hosts(1))
    r, w = os.pipe()

    async def run() -> list[tuple[int, object]]:
        relay = Relay(CollectorJob(specs, 4, 0.01), w)
        relay.add(0, Connected(1.0))
        relay.add(0, HELLO + _tick(1)[:7])  # the link drops inside a tick
        relay.add(0, Disconnected(2.0, "connection lost", 1.0))
        relay.add(0, Connected(3.0))
        relay.add(0, HELLO)
        os.set_blocking(r, False)
        return await _read_frames(r, 0, 1)

    try:
        entries = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    lines = [e for _, e in entries if isinstance(e, bytes)]
    assert lines == [HELLO, HELLO]
