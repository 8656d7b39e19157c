"""Replay is faithful: after any seek the console's picture (findings with their onsets and
counts, the fleet rows, triage's steps and first failure) equals that of playing straight
through to the same instant; silence is judged on the recording's clock.

A demo-like fleet (the agent's own simulator: a leak, throttling, a narrow link, a busy disk,
an Xid 79 drop-out, an NCCL timeout) is recorded through the live console's recording backend
and played headless: ReplayBackend → FleetState, as the app folds them, without the UI.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from probes.analysis.findings import Finding
from probes.analysis.incident import TriageRecord, first_failure, review
from probes.config.fleet import HostSpec, demo_fleet
from probes.fleet_state import FleetState, HostStatus
from probes.sources import replay as replay_module
from probes.sources.recording import RecordingBackend
from probes.sources.replay import ReplayBackend
from probes.store.recording import Recorder
from probes.store.recording_reader import RecordingReader
from probes.triage import Severity
from probes.wire.events import Connected, SessionItem
from probes.wire.samples import FabricSample, Hello, HostSample
from tests.support.tui_fakes import SIM_STEP_S, T0, FakeBackend, sim_items, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions

MINUTES = 105
"""A minute of the demo (45 simulated minutes sent at once, then one a second) is this long."""
GAP_HOST = "gpu-a01"
GAP = (T0 + 40 * SIM_STEP_S, T0 + 52 * SIM_STEP_S)
"""When gpu-a01's agent said nothing (its samples in between are left out of the recording)."""


def _items(specs: list[HostSpec], gap: bool) -> list[tuple[str, SessionItem]]:
    out: list[tuple[str, SessionItem]] = []
    for spec in specs:
        for item in sim_items(spec.name, ",".join(spec.simulate), seed=spec.seed,
                              minutes=MINUTES):
            silent = gap and spec.name == GAP_HOST and isinstance(item, HostSample) \
                and GAP[0] <= item.ts < GAP[1]
            if not silent:
                out.append((spec.name, item))
    return out


async def _record(path: Path, specs: list[HostSpec], items: list[tuple[str, SessionItem]],
                  marks: list[Finding]) -> None:
    """Through the live console's own tee, as ``rigwatch --demo`` records; alerts marked."""
    live = FakeBackend(specs, items)
    backend = RecordingBackend(live, Recorder(path, "demo", [s.name for s in specs]))
    task = asyncio.create_task(backend.run(lambda _h, _i: None))
    await live.started.wait()
    for f in marks:
        backend.record_alert(f, f.ts or T0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _straight(path: Path, until: float | None, specs: list[HostSpec]) -> FleetState:
    """Play the recording straight through, every item before ``until``, as the app does."""
    fleet = FleetState(specs)
    for host, ts, item in ReplayBackend(str(path)).ordered_items():
        if until is not None and ts >= until:
            break
        fleet.apply(host, item, ts)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    return fleet


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    specs = demo_fleet()
    items = _items(specs, gap=False)
    fleet = FleetState(specs)
    for host, item in items:
        fleet.apply(host, item, T0)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    marks = [f for h in fleet.hosts.values() for f in h.findings()
             if f.severity is not Severity.INFO and f.ts is not None]
    path = tmp_path_factory.mktemp("seek") / "demo.sqlite3"
    asyncio.run(_record(path, specs, items, marks))
    return path


def picture(fleet: FleetState, now: float) -> dict[str, Any]:
    """Everything a seek must get right, finding by finding."""
    found = [f for h in fleet.hosts.values() for f in h.findings()]
    first = first_failure(found)
    return {
        "findings": [(f.code, f.host, f.gpu, f.severity, f.ts, f.count) for f in found],
        "rows": [(r.name, r.tags, r.status, r.stale_s, r.gpus_ok, r.gpus_expected, r.findings,
                  r.worst_summary) for r in fleet.rows(now)],
        "first": None if first is None else (first.finding.key, first.finding.ts,
                                             [c.key for c in first.consequences],
                                             first.explanation),
        "steps": [(r.step, [f.key for f in r.findings])
                  for r in review(found, [], TriageRecord(started=0.0))],
    }


_EXPECTED: dict[tuple[str, float], dict[str, Any]] = {}
"""Straight play's picture per (recording, time): computed once, compared by many tests."""


class Headless:
    """A replay folded into a FleetState as the app folds it (a fresh one on a rewind)."""

    def __init__(self, path: Path) -> None:
        self.backend = ReplayBackend(str(path), speed=600.0)
        self.backend.paused = True
        self.fleet = FleetState(self.backend.specs)
        self.backend.on_rewind = self._rewind
        self.task: asyncio.Task[None] | None = None

    def _rewind(self) -> None:
        self.fleet = FleetState(self.backend.specs)

    def _emit(self, host: str, item: SessionItem) -> None:
        self.fleet.apply(host, item, self.backend.now())
        self.fleet.scan_logs()  # the owner's write, as the app's tick (every item here)

    async def __aenter__(self) -> Headless:
        self.task = asyncio.get_running_loop().create_task(
            self.backend.run(lambda host, item: self._emit(host, item)))
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def landed(self, timeout_s: float = 20.0) -> float:
        """Wait until the seek asked for has played; the replay's time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.backend.seeking:
            assert loop.time() < deadline, "the seek never landed"
            await asyncio.sleep(0.002)
        await asyncio.sleep(0)
        return self.backend.now()

    async def seek(self, t: float) -> float:
        self.backend.seek(t)
        return await self.landed()

    def check(self, path: Path, t: float) -> None:
        """The picture now equals straight play to ``t``."""
        key = (str(path), t)
        if key not in _EXPECTED:
            _EXPECTED[key] = picture(_straight(path, t, self.backend.specs), t)
        expected = _EXPECTED[key]
        got = picture(self.fleet, self.backend.now())
        for part in expected:
            assert got[part] == expected[part], f"{part} differs after a seek to T0+{t - T0:g}"


TARGETS = [T0 + s for s in (300.0, 650.0, 1250.0, 2700.0, 4200.0, MINUTES * SIM_STEP_S - 30)]
"""Before any trouble; just after the Xid; after the NCCL timeout; the leak found; late."""


def test_straight_play_shows_every_demo_trouble(demo: Path) -> None:
    """The reference itself: the full set (the review's 5 critical, 6 warning) is there."""
    with RecordingReader(demo) as reader:
        specs = ReplayBackend(str(demo)).specs
        end = reader.span()[1]  # type: ignore[index]
    shown = picture(_straight(demo, end + 1, specs), end + 1)
    codes = {(c, h) for c, h, *_ in shown["findings"]}
    for code, host in [("memory-leak", "gpu-a02"), ("clocks-throttled", "gpu-a03"),
                       ("pcie-link-downgraded", "gpu-a04"), ("disk-saturated", "gpu-b01"),
                       ("xid", "gpu-b02"), ("gpu-lost", "gpu-b02"),
                       ("nccl-timeout", "gpu-b03")]:
        assert (code, host) in codes
    assert shown["first"][1] == T0 + 600.0, "the drop-out at 600 s is the first failure"


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"T0+{t - T0:g}")
async def test_a_seek_from_the_start_equals_straight_play(demo: Path, target: float) -> None:
    async with Headless(demo) as replay:
        assert await replay.seek(target) == target
        replay.check(demo, target)
        assert replay.backend.rewinds == 0


async def test_the_header_says_a_seek_is_under_way(demo: Path) -> None:
    async with Headless(demo) as replay:
        replay.backend.seek(TARGETS[3])
        text = replay.backend.position.describe()
        assert "seeking to " + time.strftime("%H:%M:%S", time.gmtime(TARGETS[3])) in text
        await replay.landed()
        assert replay.backend.position.describe().startswith(
            "replay " + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(TARGETS[3])) + " ×600 "
            "paused (")


async def test_seeks_forward_past_and_back_equal_straight_play(demo: Path) -> None:
    """The review's case: far forward, then back to earlier; over and over, in any order."""
    async with Headless(demo) as replay:
        end = replay.backend.end
        for target in [TARGETS[4], TARGETS[1], TARGETS[2], TARGETS[0]]:
            await replay.seek(end)
            await replay.seek(target)
            replay.check(demo, target)
        assert replay.backend.rewinds == 4


async def test_next_and_previous_finding_jumps_equal_straight_play(demo: Path) -> None:
    async with Headless(demo) as replay:
        landed = []
        while (t := replay.backend.next_finding()) is not None:
            now = await replay.landed()
            assert now == t + 1.0
            replay.check(demo, now)
            landed.append(now)
        assert len(landed) >= 5 and replay.backend.rewinds == 0
        for _ in range(3):
            t = replay.backend.previous_finding()
            assert t is not None
            replay.check(demo, await replay.landed())
        assert replay.backend.rewinds == 3


async def test_ten_minute_steps_equal_straight_play(demo: Path) -> None:
    """``]`` and ``[`` are seeks of ±10 min from the replay's time."""
    async with Headless(demo) as replay:
        for step in [600.0, 600.0, -600.0, 600.0, 600.0, -600.0]:
            now = await replay.seek(replay.backend.now() + step)
            replay.check(demo, now)


async def test_playing_on_after_a_seek_equals_straight_play(demo: Path) -> None:
    """After a seek back, paced play from there shows what straight play shows."""
    async with Headless(demo) as replay:
        await replay.seek(TARGETS[4])
        await replay.seek(TARGETS[1])
        replay.backend.speed = 600.0
        replay.backend.toggle_pause()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while replay.backend.now() < TARGETS[2]:
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        replay.backend.toggle_pause()
        await asyncio.sleep(0.06)  # the step in flight ends
        replay.check(demo, replay.backend.now())


async def test_a_far_seek_thins_the_far_past_and_says_so(demo: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Hours of a large fleet are too many items to play one by one: before the last
    SEEK_CONTEXT_S, one sample per host per THIN_S (scaled down here to the demo's size).
    Every log line still plays: the Xid, the NCCL timeout and their counts stay exact; the
    same findings show, onsets off by less than THIN_S; the header says where it is approximate.
    """
    monkeypatch.setattr(replay_module, "EXACT_SEEK_ITEMS", 100)
    monkeypatch.setattr(replay_module, "WHOLE_SEEK_ITEMS", 10_000)
    monkeypatch.setattr(replay_module, "SEEK_CONTEXT_S", 1200.0)
    monkeypatch.setattr(replay_module, "THIN_S", 300.0)
    target = TARGETS[4]
    emitted: list[SessionItem] = []
    async with Headless(demo) as replay:
        plain = replay._emit
        replay._emit = lambda h, i: (emitted.append(i), plain(h, i))  # type: ignore[method-assign]
        assert await replay.seek(target) == target
        got = picture(replay.fleet, target)
        expected = picture(_straight(demo, target, replay.backend.specs), target)
        samples = sum(isinstance(i, HostSample) for i in emitted)
        # straight: 8 hosts × 70 samples; thinned: the last 20 minutes whole, 1 in 5 before
        assert 8 * 20 < samples < 8 * 35, "most early samples left out"
        assert {f[:4] for f in got["findings"]} == {f[:4] for f in expected["findings"]}
        onsets = {f[:4]: f[4:] for f in expected["findings"]}
        # a soak detector dates what it finds from the history it has: a thinned past can
        # date it as late as the whole part's start
        detected = {(f.code, f.host, f.gpu) for h in replay.fleet.hosts.values()
                    for f in h.findings_kept.detected}
        for f in got["findings"]:
            ts, count = onsets[f[:4]]
            assert f[5] == count
            assert (f[4] is None) == (ts is None)
            late = target - 1200.0 + 300.0 if f[:3] in detected else ts + 300.0
            assert f[4] is None or ts - 300.0 < f[4] < late, f
        assert got["first"][0] == expected["first"][0] and got["first"][1] == expected["first"][1]
        before = time.strftime("%H:%M", time.gmtime(target - 1200.0))
        assert replay.backend.position.describe().endswith(f" approx. before {before}")
        monkeypatch.setattr(replay_module, "EXACT_SEEK_ITEMS", 100_000)
        await replay.seek(TARGETS[2])  # back, and close enough to replay exactly: it says so
        replay.check(demo, TARGETS[2])
        assert "approx" not in replay.backend.position.describe()


async def test_a_thinned_seek_plays_a_bounded_number_of_items_whole(
        demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a large fleet SEEK_CONTEXT_S holds too many items: WHOLE_SEEK_ITEMS bounds them."""
    monkeypatch.setattr(replay_module, "EXACT_SEEK_ITEMS", 100)
    monkeypatch.setattr(replay_module, "WHOLE_SEEK_ITEMS", 40)  # five demo minutes
    async with Headless(demo) as replay:
        await replay.seek(TARGETS[4])
        before = replay.backend.approximate_before
        assert before is not None and TARGETS[4] - 400.0 < before <= TARGETS[4] - 240.0
        assert any(f.code == "xid" for f in replay.fleet.hosts["gpu-b02"].findings())


async def test_a_backlog_stamped_before_its_hello_plays_after_it(tmp_path: Path) -> None:
    """A simulated host sends 45 minutes of history stamped in the past right after its
    hello: the live console saw the hello first, and so does the replay (GPU 6 is LOST, not
    "never reported")."""
    spec = next(s for s in demo_fleet() if s.name == "gpu-b02")
    items = sim_items(spec.name, ",".join(spec.simulate), seed=spec.seed, minutes=60)
    opened = T0 + 45 * SIM_STEP_S  # the wall clock when the session opened
    shifted: list[tuple[str, SessionItem]] = []
    for item in items:
        if isinstance(item, Connected):
            item = Connected(opened - 0.5)
        elif isinstance(item, Hello):
            item = dataclasses.replace(item, ts=opened)
        shifted.append((spec.name, item))
    path = tmp_path / "backlog.sqlite3"
    await _record(path, [spec], shifted, [])
    backend = ReplayBackend(str(path))
    first = list(itertools.islice((x for x in backend.ordered_items()
                                   if not isinstance(x[2], FabricSample)), 3))
    assert [type(i) for _, _, i in first] == [Connected, Hello, HostSample]
    assert first[0][1] == first[1][1] == T0, "played at the backlog's first stamp"
    times = [ts for _, ts, _ in backend.ordered_items()]
    assert times == sorted(times) and len(times) == len(shifted)
    async with Headless(path) as replay:
        await replay.seek(T0 + 900.0)
        state = replay.fleet.hosts[spec.name]
        assert state.hello is not None and state.status is HostStatus.STREAMING
        assert any(f.code == "gpu-lost" and f.gpu == 6 for f in state.findings())
        replay.check(path, T0 + 900.0)


# -- silence on the replay clock ------------------------------------------------------------

def _statuses(fleet: FleetState, now: float) -> dict[str, HostStatus]:
    return {r.name: r.status for r in fleet.rows(now)}


async def test_a_healthy_recording_never_reads_stale_at_high_speed(demo: Path) -> None:
    """At ×300 the demo's minute-apart samples come five a second: never "stale"."""
    async with Headless(demo) as replay:
        await replay.seek(T0 + 1800.0)
        assert set(_statuses(replay.fleet, replay.backend.now()).values()) == \
            {HostStatus.STREAMING}
        replay.backend.speed = 300.0
        replay.backend.toggle_pause()
        seen: set[HostStatus] = set()
        loop = asyncio.get_running_loop()
        until = loop.time() + 1.5
        while loop.time() < until:
            seen |= set(_statuses(replay.fleet, replay.backend.now()).values())
            await asyncio.sleep(0.005)
        assert replay.backend.now() > T0 + 1800.0 + 200.0, "the replay moved on"
        assert seen == {HostStatus.STREAMING}
        # the same moment judged by the inventory's 1 s interval reads every host stale:
        # the recorded pace is what makes the difference
        bare = FleetState([HostSpec(s.name) for s in replay.backend.specs])
        for host, state in replay.fleet.hosts.items():
            bare.hosts[host].reach.last_seen = state.reach.last_seen
            bare.hosts[host].reach.status = state.status
        assert HostStatus.STALE in _statuses(bare, replay.backend.now() + 30.0).values()


async def test_a_host_silent_in_the_recording_reads_stale(tmp_path: Path) -> None:
    specs = demo_fleet()
    path = tmp_path / "gap.sqlite3"
    await _record(path, specs, _items(specs, gap=True), [])
    async with Headless(path) as replay:
        await replay.seek(GAP[0] + 120.0)  # two missed samples: within the usual pace
        assert _statuses(replay.fleet, replay.backend.now())[GAP_HOST] is HostStatus.STREAMING
        await replay.seek(GAP[0] + 600.0)  # ten minutes silent
        rows = {r.name: r for r in replay.fleet.rows(replay.backend.now())}
        assert rows[GAP_HOST].status is HostStatus.STALE
        assert rows[GAP_HOST].stale_s == pytest.approx(600.0 + SIM_STEP_S, abs=1.0)
        assert {r.status for n, r in rows.items() if n != GAP_HOST} == {HostStatus.STREAMING}
        await replay.seek(GAP[1] + 1.0)  # it speaks again
        assert _statuses(replay.fleet, replay.backend.now())[GAP_HOST] is HostStatus.STREAMING


# -- the hosts' specs travel with the recording ---------------------------------------------

def test_tags_and_expected_gpus_come_back(demo: Path) -> None:
    backend = ReplayBackend(str(demo))
    live = {s.name: s for s in demo_fleet()}
    for spec in backend.specs:
        assert spec.tags == live[spec.name].tags and spec.tags[0].startswith("rack-")
        assert spec.expect_gpus == 8 and spec.simulate == live[spec.name].simulate
        assert spec.interval_s == SIM_STEP_S, "the recorded pace: a simulated minute"
    fleet = FleetState(backend.specs)
    rows = fleet.rows(T0)
    assert all(r.gpus_expected == 8 and r.simulated for r in rows), "8/8 before the hello"


def _without_specs(src: Path, dst: Path, value: str | None) -> Path:
    dst.write_bytes(src.read_bytes())
    with contextlib.closing(sqlite3.connect(dst)) as conn:
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = 'host_specs'")
        else:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'host_specs'", (value,))
        conn.commit()
    return dst


@pytest.mark.parametrize("stored", [None, "{not json", '["a"]',
                                    '{"gpu-a01": {"tags": [7, "\\u001b[2Jx"], '
                                    '"expect_gpus": "8", "interval_s": -1}}'])
def test_a_recording_without_usable_specs_still_opens(demo: Path, tmp_path: Path,
                                                      stored: str | None) -> None:
    """Older recordings have no specs; a damaged entry is read as none (and never as markup
    or terminal commands)."""
    backend = ReplayBackend(str(_without_specs(demo, tmp_path / "old.sqlite3", stored)))
    names = [s.name for s in backend.specs]
    assert names == [s.name for s in demo_fleet()]
    first = backend.specs[0]
    assert first.expect_gpus is None and first.interval_s == SIM_STEP_S
    assert all("\x1b" not in t for s in backend.specs for t in s.tags)


def test_a_resumed_recording_takes_the_inventory_as_it_is_now(demo: Path,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "again.sqlite3"
    path.write_bytes(demo.read_bytes())
    with Recorder(path, "demo", ["gpu-a01"]) as rec:
        rec.describe_hosts([HostSpec("gpu-a01", tags=("rack-z", "spare"), expect_gpus=4)])
    with RecordingReader(path) as reader:
        specs = {s.name: s for s in reader.host_specs()}
    assert specs["gpu-a01"].tags == ("rack-z", "spare") and specs["gpu-a01"].expect_gpus == 4
    assert specs["gpu-a02"].tags == ()  # no longer described



# -- the console's own keys -----------------------------------------------------------------

def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


async def _seek_key(pilot: Pilot[None], t: float) -> None:
    """``@``, the time typed, Enter: as the operator seeks."""
    await pilot.press("at")
    await pilot.pause()
    pilot.app.screen.query_one(Input).value = _iso(t)
    await pilot.press("enter")


def _app_picture(app: RigwatchApp) -> dict[str, Any]:
    return picture(app.fleet, app._clock())


async def test_the_at_key_seeks_faithfully_in_the_console(demo: Path) -> None:
    backend = ReplayBackend(str(demo), speed=60.0)
    app = make_app(backend, ConsoleOptions(demo=False, title="demo.sqlite3"))
    expected = {t: picture(_straight(demo, t, backend.specs), t) for t in TARGETS[1:4:2]}
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("space")  # paused: a seek lands on its target and stays there
        for target in (TARGETS[3], TARGETS[1]):  # forward, then back
            await _seek_key(pilot, target)
            await wait_until(pilot, lambda t=target: not backend.seeking  # type: ignore[misc]
                             and app._clock() == t and _app_picture(app) == expected[t])
        assert backend.rewinds == 1
        assert "paused" in app.mode_text()

