"""Where am I, what did that do (issue #36 item 7).

The filter is always in view and says when it matches nothing; the README's ``!healthy``
works; a replay's footer lists its keys and ``<``/``>`` say which finding they landed on; a
report written in a replay carries the wall clock and the recording's; each prompt shows
its own hint; the wall's footer lists the wall's keys; at 80×24 an alert notice takes one
line and the fleet's reason column is read whole; a note many hosts share is shown once
with their count; the palette lists rigwatch's commands first, without Textual's Quit and
Theme.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from pathlib import Path

import pytest
from textual.command import CommandList
from textual.widgets import Footer, Label, Static
from textual.widgets._footer import FooterKey

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.sources.recording import RecordingBackend
from probes.sources.replay import ReplayBackend
from probes.store.recording import Recorder
from probes.triage import Code, Severity, Step
from probes.wire.events import SessionItem
from probes.wire.samples import LogEvent
from tests.support.screens import screen_lines
from tests.support.tui_fakes import (
    T0,
    FakeBackend,
    FrozenClock,
    fake_fleet,
    fleet_items,
    fleet_specs,
    settled,
    sim_fleet,
    sim_items,
    wait_until,
)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen
from tui.screens.note import COMMAND_HINT, HINT, SEEK_HINT, NoteScreen
from tui.screens.triage import TriageScreen
from tui.views.alert_notice import alert_text, landed_text
from tui.views.fleet_view import filter_rows
from widgets.fleet_table import FleetTable
from widgets.fleet_wall import FleetWall
from widgets.header_bar import StatusLine
from widgets.step_detail import StepDetail, alike

XID = "NVRM: Xid (PCI:0000:48:00): 79, pid=0, GPU has fallen off the bus."


def crumb(app: RigwatchApp) -> str:
    line = app.screen.query_one("#fleet-crumb", Static)
    return str(line.render()) if line.display else ""


def footer_keys(app: RigwatchApp) -> dict[str, str]:
    """Key → what the footer says it does (a group's keys share its label)."""
    return {k.key: k.description for k in app.screen.query_one(Footer).query(FooterKey)
            if k.display}


async def footer_ready(pilot: object, app: RigwatchApp) -> None:
    await wait_until(pilot, lambda: bool(app.screen.query(Footer))  # type: ignore[arg-type]
                     and bool(footer_keys(app)))
    await pilot.pause(0.1)  # type: ignore[attr-defined]


# ---- the filter ---------------------------------------------------------------------------

async def test_healthy_means_what_the_readme_says_and_the_filter_stays_in_view() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        rows = {r.name: r for r in screen._rows}
        assert [r.name for r in filter_rows(list(rows.values()), "!healthy")] == ["gpu-t02"]
        assert [r.name for r in filter_rows(list(rows.values()), "healthy")] == [
            "gpu-t01", "gpu-t03"]
        assert [r.name for r in filter_rows(list(rows.values()), "lost")] == ["gpu-t02"]
        assert crumb(app) == ""  # nothing chosen: no line for it
        app.run_command("filter !healthy")
        await wait_until(pilot, lambda: screen.query_one(FleetTable).row_count == 1)
        assert crumb(app) == 'filter "!healthy": 1 of 3 hosts · / edits, Esc clears'
        app.run_command("sort worst")
        await wait_until(pilot, lambda: "sorted by worst" in crumb(app))
        app.run_command("filter nothing-has-this")
        await wait_until(pilot, lambda: "no hosts match" in crumb(app))
        assert crumb(app).startswith('no hosts match "nothing-has-this" (of 3)')
        assert screen.query_one("#fleet-crumb").has_class("-none")
        await pilot.press("w")  # the wall says it too, and the line stays above it
        await wait_until(pilot, lambda: screen.query_one(FleetWall).view.empty
                         == "no hosts match the filter")
        assert "no hosts match" in crumb(app)
        await pilot.press("escape")  # clears the filter
        await wait_until(pilot, lambda: "filter" not in crumb(app))


# ---- 80×24 ------------------------------------------------------------------------------

def test_an_alert_notice_fits_the_width_it_is_given() -> None:
    f = Finding(Step.SYSLOG, Code.GPU_FALLEN_OFF_BUS, Severity.CRITICAL,
                "GPU6 (0000:ba:00.0) has fallen off the bus", "gpu-b02", gpu=6, xid=79)
    tops = [(f"gpu-b0{i}", f, 2) for i in range(6)]
    wide = alert_text(tops, 200)
    assert wide.startswith("6 hosts with new findings: gpu-b00 ") and "and 4 more" in wide
    for width in (78, 60, 45):
        text = alert_text(tops, width)
        assert len(text) <= width and text.startswith("6 hosts with new findings")
    one = alert_text(tops[:1], 30)
    assert len(one) <= 30 and one.startswith("gpu-b00:")


async def test_at_80x24_alerts_take_one_line_and_the_reason_is_read_whole() -> None:
    extra = [(h, LogEvent(T0 + 25, "kernel", XID)) for h in ("gpu-t01", "gpu-t03")]
    backend = FakeBackend(fleet_specs(), fleet_items() + extra)
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, backend)
        line = app.screen.query_one(StatusLine)
        await wait_until(pilot, lambda: "hosts with new findings" in str(line.render()))
        await wait_until(pilot, lambda: line.region.height > 0)
        assert line.region.height == 1, str(line.render())
    backend, clock = sim_fleet([("gpu-s01", "link-downgrade:2"), ("gpu-s02", "healthy")],
                               minutes=10)
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: any(
            "GPU2 LINK DOWN-TRAINED · PCIe x8 (capable x16)" in ln for ln in screen_lines(app)))
        table = app.screen.query_one(FleetTable)
        assert [c.label.plain for c in table.ordered_columns] == [
            "Host", "Status", "Find", "Why / worst finding"]
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        # a fleet with short reasons keeps its numbers at 80 columns
        await settled(pilot, backend)
        labels = [c.label.plain for c in app.screen.query_one(FleetTable).ordered_columns]
        assert "Temp" in labels and "GPUs" in labels


# ---- prompts and footers ----------------------------------------------------------------

async def test_each_prompt_shows_its_own_hint_and_the_wall_its_keys() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("colon")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        hint = str(app.screen.query_one("#note-hint", Label).render())
        assert hint == COMMAND_HINT and "note" not in hint
        await pilot.press("escape")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        assert str(app.screen.query_one("#note-hint", Label).render()) == HINT
        await pilot.press("escape", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen))
        await footer_ready(pilot, app)
        assert "R" in footer_keys(app) and "m" not in footer_keys(app)
        await pilot.press("w")
        await wait_until(pilot, lambda: "m" in footer_keys(app))
        keys = footer_keys(app)
        assert keys["m"] == "Metric" and keys["w"] == "Table" and keys["enter"] == "Open"
        assert "left" in keys and "H" in keys  # ←→ GPU, HL host (grouped)


# ---- replay -------------------------------------------------------------------------------

async def _recording(path: Path) -> None:
    """Two simulated hosts, one losing a GPU, recorded as ``rigwatch --demo`` records, with
    its findings marked as the live console marks them."""
    specs = [HostSpec(name="gpu-r01", tags=("r",)), HostSpec(name="gpu-r02", tags=("r",))]
    items: list[tuple[str, SessionItem]] = [
        (h, item) for h, scen, seed in (("gpu-r01", "healthy", 1), ("gpu-r02", "xid79:6@600", 2))
        for item in sim_items(h, scen, seed=seed, minutes=30)]
    live = FakeBackend(specs, items)
    backend = RecordingBackend(live, Recorder(path, "demo", [s.name for s in specs]))
    task = asyncio.create_task(backend.run(lambda _h, _i: None))
    await live.started.wait()
    fleet = FleetState(specs)
    for host, item in items:
        fleet.apply(host, item, T0)
    for f in fleet.all_findings():
        if f.severity is not Severity.INFO and f.ts is not None:
            backend.record_alert(f, f.ts)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_replay_lists_its_keys_says_where_a_jump_landed_and_reports_both_times(
        tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite3"
    await _recording(path)
    backend = ReplayBackend(str(path), speed=60.0)
    app = make_app(backend, ConsoleOptions(demo=False, title="demo.sqlite3"))
    app.reports_dir = tmp_path / "reports"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")  # paused
        await footer_ready(pilot, app)
        keys = footer_keys(app)
        assert {"space", "less_than_sign", "greater_than_sign", "at"} <= set(keys)
        assert "R" not in keys  # nothing to retry in a recording
        # the replay's keys come first: at 80 columns they are the ones on screen
        first = next(k for k in app.screen.query_one(Footer).query(FooterKey) if k.display)
        assert first.key == "space"
        await pilot.press("greater_than_sign")
        status = app.screen.query_one(StatusLine)
        await wait_until(pilot, lambda: "next finding, " in str(status.render()))
        said = str(status.render())
        assert "gpu-r02 GPU6" in said, said
        assert status.region.height == 1
        await pilot.press("at")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        assert str(app.screen.query_one("#note-hint", Label).render()) == SEEK_HINT
        await pilot.press("escape")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await pilot.press("r")
        await wait_until(pilot, lambda: app.screen.last_report is not None)  # type: ignore[attr-defined]
        report: Path = app.screen.last_report  # type: ignore[attr-defined]
        body = report.read_text()
        replay_at = json.loads(report.with_suffix(".json").read_text())["replay_at"]
        assert replay_at is not None and replay_at.startswith("2023-11-14")  # the recording's
        assert f"replaying a recording at {replay_at} (recording time)" in body
        written = json.loads(report.with_suffix(".json").read_text())["created"]
        assert not written.startswith("2023-")  # the wall clock's


def test_a_jump_says_which_finding_it_landed_on_in_one_line() -> None:
    f = Finding(Step.GPU, Code.PCIE_LINK_DOWNGRADED, Severity.WARNING,
                "GPU 2 PCIe x8 (capable x16)", "gpu-a04", gpu=2)
    text = landed_text(1, T0, [("gpu-a04", f), ("gpu-a04", f)])
    assert text == ("next finding, 22:13:20Z: gpu-a04 GPU2 LINK DOWN-TRAINED · PCIe x8 "
                    "(capable x16) (+1 more then)")
    short = landed_text(-1, T0, [("gpu-a04", f)], width=50)
    assert len(short) == 50 and short.endswith("…")
    assert short.startswith("previous finding, 22:13:20Z: gpu-a04 GPU2 LINK")
    assert landed_text(1, T0, []) == "next finding, 22:13:20Z"


# ---- notes many hosts share --------------------------------------------------------------

NOT_COLLECTED = ("PCIe link width: dcgm-exporter does not collect DCGM_FI_DEV_PCIE_LINK_WIDTH",
                 "DCGM_FI_DEV_PCIE_LINK_WIDTH", "Add the metrics to dcgm-exporter's counters")


def _note(host: str, ts: float) -> Finding:
    summary, evidence, action = NOT_COLLECTED
    return Finding(Step.GPU, Code.METRIC_NOT_COLLECTED, Severity.INFO, summary, host,
                   evidence=evidence, ts=ts, action=action)


def test_a_note_many_hosts_share_is_grouped_once_with_their_count() -> None:
    hosts = [f"gpu-p{i:02d}" for i in range(8)]
    findings = [_note(h, T0 + i) for i, h in enumerate(hosts)]
    other = Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL, "GPU 6 lost", "gpu-p03", gpu=6)
    grouped = alike([*findings, other])
    assert len(grouped) == 2
    first, on = grouped[0]
    assert first.ts == T0 and on == tuple(hosts)
    assert grouped[1] == (other, ("gpu-p03",))


async def test_triage_shows_the_shared_note_once() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        detail = app.screen.query_one(StepDetail)
        review = detail.review
        assert review is not None
        notes = tuple(_note(h, T0) for h in ("gpu-t01", "gpu-t02", "gpu-t03"))
        app.refresh_view = lambda: None  # type: ignore[method-assign]
        detail.review = dataclasses.replace(review, findings=notes)
        await pilot.pause()
        text = str(detail.render())
        assert text.count("dcgm-exporter does not collect") == 1
        assert "metric-not-collected on 3 hosts" in text
        assert "hosts: gpu-t01, gpu-t02, gpu-t03" in text


# ---- the palette ---------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "qui"])
async def test_the_palette_lists_rigwatchs_commands_first_without_duplicates(
        query: str) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        await pilot.press("ctrl+p", *query)
        await wait_until(pilot, lambda: bool(app.screen.query(CommandList))
                         and app.screen.query_one(CommandList).option_count > 0)
        await pilot.pause(0.4)  # the search adds its hits in batches
        options = app.screen.query_one(CommandList)
        prompts = [str(options.get_option_at_index(i).prompt).split("\n")[0]
                   for i in range(options.option_count)]
        quits = [p for p in prompts if "quit" in p.lower()]
        assert len(quits) == 1 and quits[0].startswith(":quit"), prompts
        assert not any(p.startswith("Theme") for p in prompts), prompts
        if not query:
            ours = [p.startswith(":") for p in prompts]
            assert ours[0] and ours == sorted(ours, reverse=True), prompts  # ours, then Textual's
            assert any(p.startswith("Keys") or p.startswith("Screenshot") for p in prompts)
