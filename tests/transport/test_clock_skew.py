"""A host whose clock is off the console's (issue #34 item 2): its skew is estimated from when
its samples arrive, taken off before anything is folded or recorded, and said.

The end-to-end test runs two real agents through the local transport, as an inventory
would: ``h-late``'s interpreter is a wrapper whose ``sitecustomize`` sets ``time.time`` ten
minutes back (the faults review's scenario 9).  Its GPU falls off the bus 12 s after it
starts; ``h-first``'s 4 s after.  By its own clock ``h-late`` failed ten minutes earlier;
in real time ``h-first`` did.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from probes.config.fleet import HostSpec, TransportName
from probes.fleet_state import FleetState
from probes.sources.agents import AgentFleetBackend
from probes.sources.recording import RecordingBackend
from probes.sources.replay import ReplayBackend
from probes.store.recording import Recorder
from probes.transport.host_clock import CORRECT_FROM_S, HostClockWatch
from probes.triage import Code
from probes.wire.events import ClockOffset, Connected
from probes.wire.samples import ClockFacts, HostSample, LogEvent
from tests.support.tui_fakes import T0, hello, sample

BEHIND_S = 600.0


def test_a_clock_ten_minutes_behind_is_estimated_and_taken_off() -> None:
    watch = HostClockWatch()
    out: list[ClockOffset] = []
    h = hello("h")
    object.__setattr__(h, "ts", T0 - BEHIND_S)
    first = watch.observe(h, T0 + 0.05)
    assert first is not None and abs(first.offset_s + BEHIND_S + 0.05) < 1e-6
    assert abs(h.ts - (T0 + 0.05)) < 1e-6  # taken off the hello itself
    for i in range(1, 30):
        s = sample("h", i)
        object.__setattr__(s, "ts", T0 + i - BEHIND_S)
        delay = 0.02 + (i % 7) * 0.3  # the link's delay only ever makes it arrive later
        update = watch.observe(s, T0 + i + delay)
        if update is not None:
            out.append(update)
        assert abs(s.ts - (T0 + i)) < 0.1, s.ts  # on the console's clock
    assert abs(watch.applied + BEHIND_S) < 0.1
    assert not out  # the estimate held: no new report for every jitter


def test_a_synced_clock_is_left_alone_and_a_fast_simulated_clock_is_no_skew() -> None:
    watch = HostClockWatch()
    for i in range(10):
        s = sample("h", i)
        object.__setattr__(s, "ts", T0 + i)
        watch.observe(s, T0 + i + 0.4)
        assert s.ts == T0 + i  # under CORRECT_FROM_S: untouched
    assert watch.applied == 0.0 and abs(watch.reported or 0.0) < CORRECT_FROM_S
    sim = HostClockWatch()
    h = hello("sim")
    object.__setattr__(h, "clock", ClockFacts(speed=60.0))
    sim.observe(h, T0)
    for i in range(1, 10):  # a demo host: 60 of its seconds a second
        s = sample("sim", i)
        object.__setattr__(s, "ts", T0 + 60.0 * i)
        sim.observe(s, T0 + i + 0.1)
        assert s.ts == T0 + 60.0 * i
    assert sim.applied == 0.0
    assert sim.observe(Connected(T0 + 20), T0 + 20) is None  # a new agent starts over


def test_past_the_limit_the_host_has_a_clock_skew_finding() -> None:
    fleet = FleetState([HostSpec(name="h")])
    fleet.apply("h", ClockOffset(T0, -601.2, -601.2, 5), T0)
    (skew,) = [f for f in fleet.hosts["h"].findings() if f.code == Code.CLOCK_SKEW]
    assert "10 min 1 s behind" in skew.summary and skew.action
    fleet.apply("h", ClockOffset(T0 + 5, -0.4, 0.0, 9), T0 + 5)
    assert not [f for f in fleet.hosts["h"].findings() if f.code == Code.CLOCK_SKEW]


def _wrapper(tmp: Path, shift_s: float) -> Path:
    """A ``python:`` for the inventory whose ``time.time`` runs ``shift_s`` off."""
    site = tmp / "skewed"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import time\n_real = time.time\n"
        f"time.time = lambda: _real() + ({shift_s!r})\n")
    wrapper = tmp / "python-skewed"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def test_the_host_that_failed_first_in_real_time_leads_and_replays_first(
        tmp_path: Path) -> None:
    specs = [HostSpec(name="h-first", transport=TransportName.LOCAL,
                      simulate=("xid79:4@4",), expect_gpus=8),
             HostSpec(name="h-late", transport=TransportName.LOCAL,
                      python=str(_wrapper(tmp_path, -BEHIND_S)),
                      simulate=("xid79:5@12",), expect_gpus=8)]
    fleet = FleetState(specs)
    path = tmp_path / "skew.sqlite3"
    recorder = Recorder(path, "skew", [s.name for s in specs])
    backend = RecordingBackend(AgentFleetBackend(specs), recorder)

    async def run() -> None:
        task = asyncio.create_task(backend.run(lambda h, it: fleet.apply(h, it, time.time())))
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and (fleet.scan_logs() or True) and sum(
                1 for f in fleet.all_findings() if f.code == Code.XID) < 2:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        fleet.scan_logs()

    asyncio.run(run())
    late = fleet.hosts["h-late"]
    assert late.clock is not None and abs(late.clock.offset_s + BEHIND_S) < 5.0, late.clock
    (skew,) = [f for f in late.findings() if f.code == Code.CLOCK_SKEW]
    assert "behind" in skew.summary
    first = fleet.diagnosis().first
    assert first is not None and first.finding.xid == 79
    assert first.finding.host == "h-first", first.headline
    xids = {f.host: f.ts for f in fleet.all_findings() if f.code == Code.XID}
    assert xids["h-first"] is not None and xids["h-late"] is not None
    assert 4.0 < xids["h-late"] - xids["h-first"] < 14.0  # real time, not ten minutes apart
    # the recording and its replay keep real-time order across the two hosts
    replay = ReplayBackend(str(path))
    played = [(host, ts, item) for host, ts, item in replay.ordered_items()]
    times = [ts for _, ts, item in played if isinstance(item, HostSample | LogEvent)]
    assert times == sorted(times)
    kernel = [host for host, _, item in played
              if isinstance(item, LogEvent) and "Xid" in item.line]
    assert kernel[0] == "h-first"
    starts = {h: min(ts for host, ts, item in played if host == h and
                     isinstance(item, HostSample)) for h in ("h-first", "h-late")}
    assert abs(starts["h-first"] - starts["h-late"]) < 10.0, starts
    assert os.path.getsize(path) > 0
