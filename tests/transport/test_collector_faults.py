"""A collector's faults are the console's, not its hosts' (faults review S5a, S5b; security
review C2): real collector processes, killed with SIGKILL, frozen with SIGSTOP, fed a bad
frame on their pipe, and orphaned by a console that dies.

Each fault must be one finding about the collector (``collector-died``,
``collector-stalled``), paged once; its hosts read "unknown", never down or stale, and no
host pages during the fault or after it.  The other collector never notices.
"""

from __future__ import annotations

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
from probes.sources.collectors import CollectorBackend
from probes.transport.collector_wire import check_batch
from probes.wire.events import Disconnected, SourceHealth
from tests.support.paths import REPO
from tests.support.processes import kill_each, survivors
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

        def died() -> list[SourceHealth]:
            return [h for h in _health(w, names[0]) if h.fault is WatcherFault.COLLECTOR_DIED]

        await until(lambda: bool(died()), 5.0, "the collector's end told")
        assert "sent no heartbeat for" in died()[0].reason and "killed" in died()[0].reason
        await until(lambda: _streaming(w, names) and w.fleet.unseen == {}, 40.0, "back")
        await until(lambda: bool(w.pages("recovery")), 3.0, "the recovery")
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
    from probes.sources.collectors import CollectorBackend

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
                               text=True, cwd=REPO)
    pids: list[int] = []
    try:
        assert console.stdout is not None
        line = console.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, line
        assert all(_group_alive(p) for p in pids)
        console.kill()  # SIGKILL: no cleanup of its own runs
        console.wait(10)
        left = survivors(pids, _group_alive, 15.0)
    finally:
        console.kill()
        kill_each(pids, lambda p: os.killpg(p, signal.SIGKILL))
    assert left == [], f"collector groups still alive: {left}"


def test_hosts_a_source_hides_read_unknown_on_every_screen_and_count_apart() -> None:
    """Folded items only: the row, the table's status cell, the wall, the header."""
    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState
    from tests.support.builders import sample_of_8
    from tui.views.wall_view import wall_host
    from widgets.fleet_table import FleetLine, short_status, why_text
    from widgets.header_bar import totals_content

    fleet = FleetState([HostSpec("h1"), HostSpec("h2")])
    for h in ("h1", "h2"):
        fleet.apply(h, sample_of_8(10.0), now=10.0)
    fleet.apply("h1", SourceHealth(11.0, "collector 1", WatcherFault.COLLECTOR_STALLED,
                                   "no heartbeat for 3 s"), now=11.0)
    fleet.apply("h2", sample_of_8(40.0), now=40.0)
    row = fleet.rows(40.0)[0]  # 30 s silent, but through a stalled collector: not stale
    assert row.status.value == "unknown" and row.reason == \
        "collector 1 stalled: no heartbeat for 3 s"
    assert short_status(row)[0] == "unknown" and why_text(FleetLine(row)) == row.reason
    assert wall_host(fleet.hosts["h1"], "mem", 40.0, row).status == "unknown"
    assert fleet.hosts["h1"].findings() == []
    text = totals_content(fleet.totals(40.0)).plain
    assert text.startswith("1/2 streaming, 1 unknown"), text
    # seen again: its stale clock starts afresh, so it is not stale at once
    fleet.apply("h1", SourceHealth(41.0, "collector 1"), now=41.0)
    assert fleet.rows(42.0)[0].status.value == "streaming"
    assert fleet.unseen == {}


async def test_the_console_shows_a_stalled_collector_on_every_screen() -> None:
    from tests.support.tui_fakes import wait_until
    from tui.app import make_app
    from tui.console_options import ConsoleOptions
    from tui.messages import HostChosen
    from tui.screens.host import HostScreen
    from tui.screens.triage import TriageScreen
    from widgets.first_failure import FirstFailureBanner

    specs = healthy_hosts(4)
    backend = CollectorBackend(specs, 2, flush_s=0.02)
    app = make_app(backend, ConsoleOptions(demo=False))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: all(h.last is not None
                                            for h in app.fleet.hosts.values()), 40.0)
        victim = backend.pids()[0]
        os.killpg(victim, signal.SIGSTOP)
        try:
            await wait_until(pilot, lambda: all(app.fleet.hosts[h].reach.watch is not None
                                                for h in ("h1", "h3")), 8.0)
            app.refresh_view()
            await pilot.pause(0.2)
            header = str(app.screen.query_one("HeaderBar").query_one("#totals").render())
            assert "2 unknown" in header, header
            app.post_message(HostChosen("h1"))
            await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
            await pilot.pause(0.3)
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
            app.refresh_view()
            await pilot.pause(0.3)
            banner = str(app.screen.query_one(FirstFailureBanner).render())
            assert "collector 1" in banner, banner
            await pilot.press("escape", "escape", "w")
            await pilot.pause(0.3)
        finally:
            os.killpg(victim, signal.SIGCONT)
        await wait_until(pilot, lambda: not app.fleet.unseen, 10.0)
        await app.action_quit()


async def test_a_resumed_recording_does_not_keep_the_last_sessions_source_faults(
        tmp_path: Path) -> None:
    """The console was killed while a collector was stalled: the next console resumes that
    recording, and its own collectors (none at fault) must not leave the hosts unknown."""
    import asyncio

    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState
    from probes.sources.base import BackendBase
    from probes.sources.recording import RecordingBackend
    from probes.store.recording import Recorder, RecordingReader
    from tests.support.builders import sample_of_8

    path = tmp_path / "r.sqlite3"
    with Recorder(path, "fleet", ["h1"], flush_interval_s=0.05) as rec:
        now = time.time()
        rec.record("h1", now - 5, sample_of_8(now - 5))
        rec.record("h1", now - 4, SourceHealth(now - 4, "collector 1",
                                               WatcherFault.COLLECTOR_STALLED, "no heartbeat"))

    class Quiet(BackendBase):
        def __init__(self) -> None:
            self.specs = [HostSpec("h1")]

        async def run(self, emit: object) -> None:
            await asyncio.sleep(3600)

    rec = Recorder(path, "fleet", ["h1"], flush_interval_s=0.05)
    fleet = FleetState([HostSpec("h1")])
    backend = RecordingBackend(Quiet(), rec, resume_from=RecordingReader(path))
    task = asyncio.create_task(backend.run(lambda h, i: fleet.apply(h, i, time.time())))
    try:
        await until(lambda: backend.resumed_items >= 2, 5.0, "the playback")
        await asyncio.sleep(0.1)
        assert fleet.hosts["h1"].reach.watch is None and fleet.unseen == {}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
