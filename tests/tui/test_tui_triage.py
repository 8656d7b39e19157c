"""The triage screen in the running app: the real demo fleet, marks, notes and a report."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from textual.widgets import Input, Label

from probes.analysis.incident import Verdict
from probes.config.fleet import demo_fleet
from probes.sources.agents import AgentFleetBackend
from probes.triage import Step
from tests.support.tui_fakes import FrozenClock, fake_fleet, settled, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.host import HostScreen
from tui.screens.note import NoteScreen
from tui.screens.triage import TriageScreen
from widgets.first_failure import FirstFailureBanner
from widgets.step_detail import StepDetail
from widgets.triage_steps import TriageSteps

DEMO_SPEED = 600.0
"""Xid 79 at simulated 600 s arrives after 1 s; the NCCL timeout at 1200 s after 2 s."""


def banner(app: RigwatchApp) -> str:
    return str(app.screen.query_one(FirstFailureBanner).render())


def detail(app: RigwatchApp) -> str:
    return str(app.screen.query_one(StepDetail).render())


async def test_demo_fleet_triage_finds_the_xid_behind_the_nccl_timeout(tmp_path: Path) -> None:
    app = make_app(AgentFleetBackend(demo_fleet(speed=DEMO_SPEED)), ConsoleOptions(demo=True))
    app.reports_dir = tmp_path / "reports"
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await wait_until(pilot, lambda: any(f.code == "nccl-timeout" for f in
                                            app.fleet.hosts["gpu-b03"].findings()), timeout_s=20)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        app.refresh_view()
        await wait_until(pilot, lambda: "Xid 79" in banner(app))
        text = banner(app)
        # gpu-b03's watchdog is its own job's (48207), never gpu-b02's consequence
        assert re.search(r"First failure: \d\d:\d\d:\d\d Xid 79 on gpu-b02 GPU6; also "
                         r"NCCL timeout on gpu-b03\n", text)
        assert "Do now: drain gpu-b02, reboot it; RMA GPU6 if it recurs\n" in text
        # GPU state first: the demo has throttling, a leak-free lost GPU, a slow link...
        steps = str(app.screen.query_one(TriageSteps).render())
        assert "▶ 1 GPU state" in steps and "2 System log  · open    2 crit" in steps
        assert "Next: 1." in text
        await pilot.press("c")  # GPU state clear (for this walk)
        await wait_until(pilot, lambda: "Next: 2." in banner(app))
        await pilot.press("g")
        await wait_until(pilot, lambda: "System log" in detail(app).splitlines()[0])
        assert "Xid 79 on gpu-b02 GPU6" in detail(app) and "→" in detail(app)
        await pilot.press("x")  # system log suspect: the walk stops here
        await wait_until(pilot, lambda: "marked suspect" in banner(app))
        await pilot.press("3")
        await wait_until(pilot, lambda: "NCCL" in detail(app).splitlines()[0])
        # the rank placed on its GPU: once gpu-b03's processes have been sampled (on a
        # loaded machine that can come a tick after the timeout itself)
        await wait_until(pilot, lambda: "nccl-timeout rank 3 on gpu-b03 GPU3" in detail(app))
        await pilot.press("r")
        await wait_until(pilot, lambda: app.screen.last_report is not None)  # type: ignore[attr-defined]
        report = app.screen.last_report  # type: ignore[attr-defined]
        assert stat.S_IMODE(report.stat().st_mode) == 0o600
        body = report.read_text()
        assert "## 2. System log: suspect" in body and "Xid 79 on gpu-b02 GPU6" in body
        # the agents run ×600, yet nothing in the report is dated after it was written
        written = re.search(r"Written (\S+Z)", body)
        assert written is not None
        stamps = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body)
        assert len(stamps) > 5 and max(stamps) == written.group(1)
        assert "serial" in body and "VBIOS" in body and "topology-cross-numa" not in body
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TriageScreen))
        await pilot.press("q")


async def test_marks_and_notes_survive_leaving_and_reopening(tmp_path: Path) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(140, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await pilot.press("down", "x", "n")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        # the modal says how to leave it: Enter saves, Esc cancels
        hint = str(app.screen.query_one("#note-hint", Label).render())
        assert "Enter saves" in hint and "Esc cancels" in hint
        app.screen.query_one(Input).value = "first try, thrown away"
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        assert Step.SYSLOG not in app.triage_records[None].notes
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        app.screen.query_one(Input).value = "reseated GPU 3 on gpu-t02"
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await wait_until(pilot, lambda: "reseated GPU 3" in detail(app))
        await pilot.press("escape")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        record = app.triage_records[None]
        assert record.verdict(Step.SYSLOG) is Verdict.SUSPECT
        assert record.notes[Step.SYSLOG] == "reseated GPU 3 on gpu-t02"
        # the reopened screen fills its steps on the next view, not on mount
        await wait_until(pilot, lambda: "suspect" in str(
            app.screen.query_one(TriageSteps).render()))


async def test_triage_from_a_host_screen_covers_only_that_host() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock(clock.now))
    async with app.run_test(size=(140, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("down", "enter")  # gpu-t02: the throttled GPU and the Xid
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        app.refresh_view()
        await wait_until(pilot, lambda: "gpu-t02" in detail(app))
        screen = app.screen
        assert isinstance(screen, TriageScreen) and screen.host == "gpu-t02"
        assert "gpu-t01" not in detail(app) and "gpu-t03" not in detail(app)
        # throttling (a warning) was seen from the first sample, but the Xid is what broke
        assert re.search(r"First failure: \d\d:\d\d:\d\d Xid 79 on gpu-t02", banner(app))
        await pilot.press("2")
        await wait_until(pilot, lambda: "Xid 79 on gpu-t02" in detail(app))
