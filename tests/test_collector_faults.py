"""A collector's faults are the console's, not its hosts' (faults review S5a, S5b; security
review C2): real collector processes, killed with SIGKILL, frozen with SIGSTOP, fed a bad
frame on their pipe, and orphaned by a console that dies.

Each fault must be one finding about the collector (``collector-died``,
``collector-stalled``), paged once; its hosts read "unknown", never down or stale, and no
host pages during the fault or after it.  The other collector never notices.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from probes.errors import WatcherFault
from probes.transport.collector_wire import check_batch
from probes.transport.collectors import CollectorBackend
from probes.wire.events import Disconnected, SourceHealth
from tests.support.watched import Watched, healthy_hosts, until


def _health(w: Watched, host: str) -> list[SourceHealth]:
    return [i for i in w.items[host] if isinstance(i, SourceHealth)]


def _streaming(w: Watched, hosts: list[str]) -> bool:
    return all(w.status(h) == "streaming" and w.fleet.hosts[h].last is not None for h in hosts)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie our own loop has not reaped yet holds nothing
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


async def test_a_killed_collector_is_one_collector_died_page_not_host_outages() -> None:
    """S5a: SIGKILL one of two collectors: 4 'AGENT FAILED' pages for 4 healthy hosts before."""
    specs = healthy_hosts(4)
    backend = CollectorBackend(specs, 2, flush_s=0.02, restart_s=2.0)
    names = [s.name for s in specs]
    mine, others = names[0::2], names[1::2]
    async with Watched(backend) as w:
        await until(lambda: _streaming(w, names), 40.0, "every host streaming")
        victim = backend.pids()[0]
        marks = {h: len(w.items[h]) for h in names}
        os.killpg(victim, signal.SIGKILL)
        await until(lambda: all(w.status(h) == "unknown" for h in mine), 10.0, "unknown")
        for h in mine:
            assert "collector 1 died" in w.row_reason(h), w.row_reason(h)
            assert "exited (status -9)" in w.row_reason(h)
            assert not w.fleet.hosts[h].findings(), w.fleet.hosts[h].findings()
        await until(lambda: bool(w.alerts), 2.0, "the page")
        assert [(a.finding.host, a.finding.code) for a in w.alerts] == [
            ("collector 1", "collector-died")]
        page = w.alerts[0].finding
        assert page.extra["hosts"] == sorted(mine) and "not watched" in page.summary
        assert page.action and "restart" in page.action
        # restarted: the same hosts stream again, and the fault clears
        await until(lambda: all(w.samples_since(h, marks[h]) >= 2 for h in mine), 40.0,
                    "streaming again")
        await until(lambda: w.pages("recovery") == [("collector 1", "collector-died")], 5.0,
                    "the recovery")
        assert victim not in backend.pids()
        assert w.running
    for h in names:
        assert not any(isinstance(i, Disconnected) for i in w.items[h][marks[h]:]), h
    assert not any(_health(w, h) for h in others)
    assert w.pages() == [("collector 1", "collector-died")]


async def test_a_frozen_collector_is_stalled_at_once_and_pages_no_host_after() -> None:
    """S5b: SIGSTOP 18 s (past the sessions' own 15 s stall limit), then SIGCONT.  Before:
    'stale' warnings only while frozen, then 4 critical 'DOWN · no data for 15 s' pages for
    healthy hosts after it resumed."""
    specs = healthy_hosts(4)
    backend = CollectorBackend(specs, 2, flush_s=0.02)
    names = [s.name for s in specs]
    mine = names[0::2]
    async with Watched(backend) as w:
        await until(lambda: _streaming(w, names), 40.0, "every host streaming")
        victim = backend.pids()[0]
        marks = {h: len(w.items[h]) for h in names}
        os.killpg(victim, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            took = await until(lambda: all(w.status(h) == "unknown" for h in mine), 8.0,
                               "unknown")
            assert took < 5.0  # stalled after 3 s of silence, before any host reads stale
            assert all("collector 1 stalled: no heartbeat" in w.row_reason(h) for h in mine)
            await until(lambda: bool(w.alerts), 2.0, "the page")
            assert w.pages() == [("collector 1", "collector-stalled")]
            await until(lambda: time.monotonic() - t0 > 18.0, 30.0, "18 s frozen")
            assert all(w.status(h) == "unknown" for h in mine)
            assert [s for s in names[1::2] if w.status(s) != "streaming"] == []
        finally:
            os.killpg(victim, signal.SIGCONT)
        await until(lambda: all(w.samples_since(h, marks[h]) >= 2 for h in mine)
                    and _streaming(w, names), 20.0, "streaming again")
        await until(lambda: bool(w.pages("recovery")), 5.0, "the recovery")
        await until(lambda: time.monotonic() - t0 > 25.0, 10.0, "a while after")
        assert victim in backend.pids()  # not restarted: it resumed
    for h in names:
        assert not any(isinstance(i, Disconnected) for i in w.items[h][marks[h]:]), h
    assert w.pages() == [("collector 1", "collector-stalled")]
    assert w.pages("recovery") == [("collector 1", "collector-stalled")]


async def test_a_collector_hung_too_long_is_killed_and_restarted_as_one_outage() -> None:
    specs = healthy_hosts(2)
    backend = CollectorBackend(specs, 1, flush_s=0.02, restart_s=1.0, hung_after_s=6.0)
    names = [s.name for s in specs]
    async with Watched(backend) as w:
        await until(lambda: _streaming(w, names), 40.0, "every host streaming")
        victim = backend.pids()[0]
        os.killpg(victim, signal.SIGSTOP)  # never resumed: only a kill ends it
        await until(lambda: _gone(victim), 15.0, "the hung collector killed")
        died = [h for h in _health(w, names[0]) if h.fault is WatcherFault.COLLECTOR_DIED]
        assert died and "sent no heartbeat for" in died[0].reason and "killed" in died[0].reason
        await until(lambda: _streaming(w, names) and w.fleet.unseen == {}, 40.0, "back")
    # stalled, then died, then back: one outage of the collector, one page, one recovery
    assert w.pages() == [("collector 1", "collector-stalled")]
    assert w.pages("recovery") == [("collector 1", "collector-stalled")]


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize("bad", [
    _frame(b"\x80\x05garbage that is no pickle at all"),  # the review's C2 reproduction
    _frame(pickle.dumps([(99, b"x")])),  # IndexError on the shard's specs before
])
async def test_a_bad_frame_restarts_that_collector_only(bad: bytes) -> None:
    """C2: one bad frame on one collector's pipe stopped every collector ("Backend
    stopped · pickle data was truncated")."""
    specs = healthy_hosts(4)
    backend = CollectorBackend(specs, 2, flush_s=0.02, restart_s=1.0)
    names = [s.name for s in specs]
    mine, others = names[0::2], names[1::2]
    async with Watched(backend) as w:
        await until(lambda: _streaming(w, names), 40.0, "every host streaming")
        victim = backend.pids()[0]
        marks = {h: len(w.items[h]) for h in names}
        with open(f"/proc/{victim}/fd/1", "wb", buffering=0) as pipe:  # its stdout pipe
            pipe.write(bad)
        await until(lambda: any(_health(w, mine[0])), 10.0, "the fault")
        died = _health(w, mine[0])[0]
        assert died.fault is WatcherFault.COLLECTOR_DIED, died
        assert "sent a frame that cannot be read" in died.reason, died.reason
        await until(lambda: all(w.samples_since(h, marks[h]) >= 2 for h in names)
                    and _streaming(w, names), 40.0, "every host streaming again")
        assert w.running
        assert victim not in backend.pids()
    assert not any(_health(w, h) for h in others)
    assert not any(isinstance(i, Disconnected) for h in names for i in w.items[h][marks[h]:])
    assert w.pages() == [("collector 1", "collector-died")]


@pytest.mark.parametrize("batch", [
    {"not": "a batch"}, [(0,)], [("0", b"x")], [(-1, b"x")], [(True, b"x")], [(0, 3.5)],
    [(0, object())],
])
def test_a_batch_that_cannot_be_a_shards_is_refused(batch: object) -> None:
    with pytest.raises(ValueError):
        check_batch(batch, 2)


def test_a_good_batch_passes() -> None:
    good = [(0, b"line\n"), (1, None), (1, Disconnected(1.0, "gone"))]
    assert check_batch(good, 2) is good


CONSOLE = textwrap.dedent("""
    import asyncio, sys
    from tests.support.watched import healthy_hosts
    from probes.transport.collectors import CollectorBackend

    async def main():
        backend = CollectorBackend(healthy_hosts(2), 2, flush_s=0.02)
        seen = set()
        def emit(host, item):
            seen.add(host)
            if len(seen) == 2 and not main.told:
                main.told = True
                print(" ".join(map(str, backend.pids())), flush=True)
        await backend.run(emit)
    main.told = False
    asyncio.run(main())
""")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if fields[2] == str(pgid) and fields[0] != "Z":
                return True
    return False


def test_collectors_and_their_agents_exit_when_the_console_is_killed(tmp_path: Path) -> None:
    """Two collectors were left orphaned (ppid 1) holding 690 sessions after their console
    exited (performance review)."""
    console = subprocess.Popen([sys.executable, "-c", CONSOLE], stdout=subprocess.PIPE,
                               text=True, cwd=Path(__file__).resolve().parents[1])
    pids: list[int] = []
    try:
        assert console.stdout is not None
        line = console.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, line
        assert all(_group_alive(p) for p in pids)
        console.kill()  # SIGKILL: no cleanup of its own runs
        console.wait(10)
        deadline = time.monotonic() + 15.0
        while any(_group_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if _group_alive(p)]
    finally:
        console.kill()
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p, signal.SIGKILL)
    assert left == [], f"collector groups still alive: {left}"
