"""The host screen shows what the core knows (issue #19 item 1): a lost GPU keeps its row
and says LOST with its bus id, serial and when it went; a GPU the inventory expects but the
host never reported says MISSING; the header counts 7/8; the State column is the core's
verdict at 80 columns; the findings lead the screen; a down host's values are marked old."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial

from probes.analysis.alerts import AlertPolicy
from probes.analysis.findings import Finding
from probes.analysis.judge import GpuVerdict, gpus_present, judge_gpus
from probes.config.fleet import HostSpec
from probes.triage import Code, Severity, Step
from probes.wire.events import Connected, Disconnected, SessionItem
from tests.support.tui_fakes import (
    SIM_STEP_S,
    T0,
    FakeBackend,
    FrozenClock,
    fake_fleet,
    hello,
    sample,
    settled,
    sim_fleet,
    wait_until,
)
from tests.support.zone import pinned_utc  # noqa: F401  (autouse: TZ=UTC)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import HostScreen
from tui.screens.host_panels import key_hint
from widgets.gpu_table import GpuRow, GpuTable, gone_lines
from widgets.host_facts import FindingsStrip, HostFactsBar

DEMO = [("gpu-a02", "leak:3"), ("gpu-a03", "throttle:5"), ("gpu-b02", "xid79:6@600")]
MINUTES = 45


# ---- the judgement ------------------------------------------------------------------


def _dropout(gpu: int, ts: float) -> Finding:
    return Finding(Step.GPU, Code.GPU_DROPOUT, Severity.CRITICAL, f"GPU{gpu} dropped out",
                   "h", gpu=gpu, ts=ts)


def test_a_gpu_gone_from_the_samples_is_lost_since_its_findings_onset() -> None:
    h = hello("h")
    s = sample("h", 5)
    s = replace(s, gpus=tuple(g for g in s.gpus if g.index != 6))
    found = [_dropout(6, T0 + 300), replace(_dropout(6, T0 + 120), code=Code.GPU_LOST)]
    judged = judge_gpus(s, h, found, expected=8)
    assert [j.index for j in judged] == list(range(8))
    lost = judged[6]
    assert lost.verdict is GpuVerdict.LOST and lost.gone and lost.since == T0 + 120
    assert gpus_present(judged) == 7
    assert all(j.verdict is GpuVerdict.OK for j in judged if j.index != 6)


def test_gpus_never_reported_are_missing_up_to_expect_gpus() -> None:
    # a kernel update without the driver: the agent sees no GPU at all
    none = judge_gpus(replace(sample("h", 0), gpus=()), hello("h", gpus=0), [], expected=8)
    assert [j.verdict for j in none] == [GpuVerdict.MISSING] * 8
    assert gpus_present(none) == 0
    # seven reported, eight expected: the eighth is missing at the first free index
    seven = replace(sample("h", 0), gpus=sample("h", 0).gpus[:7])
    judged = judge_gpus(seven, hello("h", gpus=7), [], expected=8)
    assert [j.verdict for j in judged].count(GpuVerdict.MISSING) == 1
    assert judged[7].index == 7 and judged[7].verdict is GpuVerdict.MISSING
    # no expectation, or nothing heard yet: nothing is invented
    assert len(judge_gpus(seven, hello("h", gpus=7), [])) == 7
    assert judge_gpus(None, hello("h"), [], expected=8) == ()


def test_a_gpu_only_a_finding_remembers_is_still_lost() -> None:
    """Reported in earlier samples (not in the hello), now gone: the dropout finding
    keeps its row."""
    s = replace(sample("h", 0), gpus=sample("h", 0).gpus[:6])
    judged = judge_gpus(s, hello("h", gpus=6), [_dropout(6, T0 + 60)])
    assert [(j.index, j.verdict) for j in judged][-1] == (6, GpuVerdict.LOST)


# ---- on screen ----------------------------------------------------------------------


def _screen_text(app: RigwatchApp) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def _row(text: str, index: int) -> str:
    """GPU ``index``'s line of the host screen's table ("" while it is not drawn)."""
    return next((line for line in text.splitlines()
                 if line.strip().startswith(f"{index} ") and "State" not in line), "")


def _missing_rows(text: str) -> list[str]:
    return [x for x in text.splitlines() if re.match(r"\s+\d\s+✗ MISSING", x)]


def _showing(app: RigwatchApp, host: str) -> bool:
    screen = app.screen
    return isinstance(screen, HostScreen) and screen.host == host \
        and screen.query_one(GpuTable).row_count == 8


async def test_demo_b02_shows_gpu6_lost_and_a03_says_throttled_at_80x24() -> None:
    backend, clock = sim_fleet(DEMO, minutes=MINUTES)
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False, bell=False)),
                   clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == MINUTES
                                            for h in app.fleet.hosts.values()))
        for host, index, word in (("gpu-b02", 6, "✗ LOST"), ("gpu-a03", 5, "throttled"),
                                  ("gpu-a02", 3, "leaking")):
            app.post_message(HostChosen(host))
            await wait_until(pilot, partial(_showing, app, host))
            # the table's rows reach the screen a frame after the table has them
            await wait_until(pilot, lambda w=word, i=index: w in _row(_screen_text(app), i))
            text = _screen_text(app)
            row = _row(text, index)
            assert word in row, (host, row)
            # the verdict beside an "ok" it contradicts never appears
            assert "ok" not in row
            if host == "gpu-b02":
                assert "GPUs 7/8" in text
                assert "✗ GPU6 LOST" in text and "0000:ba:00.0" in text
                assert "gone since 22:23:20" in text  # the dropout at 600 s, not "now"
                findings = app.screen.query_one(FindingsStrip)
                assert findings.region.y < app.screen.query_one(GpuTable).region.y
                # one line per incident, led by the verdict: truncation keeps the meaning
                lines = str(findings.render()).splitlines()
                assert lines[0].startswith("✗ GPU6 LOST · Xid 79 · ") and "+3 more" in lines[0]
            if host == "gpu-a03":
                top = str(app.screen.query_one(FindingsStrip).render())
                assert top.startswith("! GPU5 THROTTLED · ")
            app.pop_screen()
            await pilot.pause()


async def test_a_host_with_no_gpus_against_expect_gpus_lists_them_missing() -> None:
    specs = [HostSpec(name="x-real", expect_gpus=8)]
    items: list[tuple[str, SessionItem]] = [
        ("x-real", Connected(T0)), ("x-real", hello("x-real", gpus=0)),
             ("x-real", replace(sample("x-real", 0), gpus=()))]
    backend = FakeBackend(specs, items)
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock(T0 + 1))
    async with app.run_test(size=(120, 30)) as pilot:
        await backend.started.wait()
        app.post_message(HostChosen("x-real"))
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and app.screen.query_one(GpuTable).row_count == 8)
        await wait_until(pilot, lambda: len(_missing_rows(_screen_text(app))) == 8)
        text = _screen_text(app)
        assert "GPUs 0/8" in str(app.screen.query_one(HostFactsBar).render())
        rows = _missing_rows(text)
        assert len(rows) == 8, text
        assert "GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7 MISSING" in text
        assert "driver" in text


async def test_a_down_host_says_how_old_its_values_are_and_why() -> None:
    backend, clock = sim_fleet([("gpu-s01", "healthy")], minutes=5)
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await backend.started.wait()
        state = app.fleet.hosts["gpu-s01"]
        await wait_until(pilot, lambda: state.last is not None and state.last.seq == 5)
        app.post_message(HostChosen("gpu-s01"))
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and app.screen.query_one(GpuTable).row_count == 8)
        reason = "unreachable: 10.0.0.7:22: Connect call failed"
        backend.push("gpu-s01", Disconnected(clock.now, reason, retry_in_s=8))
        clock.now += 2 * SIM_STEP_S
        app.refresh_view()
        await wait_until(pilot, lambda: "last seen" in _screen_text(app))
        text = _screen_text(app)
        line = next(x for x in text.splitlines() if "last seen" in x)
        assert "last seen 2 m ago" in line and "Connect call failed" in line
        assert "waiting for the agent's hello" not in text
        assert app.screen.query_one(GpuTable).has_class("-stale")


def test_the_panel_strip_marks_the_shown_panels_and_ends_cleanly() -> None:
    strip = key_hint({"memory", "host"})
    assert "[1 memory]" in strip.plain and "[6 host]" in strip.plain
    assert " 2 thermals " in strip.plain and "[2" not in strip.plain
    assert "—" not in strip.plain and len(strip.plain) <= 80
    styles = {str(span.style) for span in strip.spans}
    assert any("reverse" in s for s in styles), styles  # visible without colour too


def test_gone_gpu_cells_and_lines() -> None:
    judged = judge_gpus(replace(sample("h", 0), gpus=sample("h", 0).gpus[:6]),
                        hello("h", gpus=7), [_dropout(6, T0 + 600)], expected=8)
    rows = tuple(GpuRow(None, j, "00000000:BA:00.0", "1654922006536", "22:23:20")
                 for j in judged if j.gone)
    assert [r.judged.verdict for r in rows] == [GpuVerdict.LOST, GpuVerdict.MISSING]
    lost = GpuTable.cells(rows[0])
    assert lost[1] == ("✗ LOST", "cell--sev-critical")
    assert "gone since 22:23:20" in lost[-1][0] and "1654922006536" in lost[-1][0]
    assert GpuTable.cells(rows[1])[1][0] == "✗ MISSING"
    lines = [c.plain for c in gone_lines(rows)]
    assert lines[0].startswith("✗ GPU6 LOST gone since 22:23:20 · bus 00000000:BA:00.0")
    assert lines[1].startswith("✗ GPU7 MISSING")


async def test_a_host_never_reached_says_so_not_last_seen() -> None:
    """Its own failed retries are no sighting: no 'last seen 1 s ago', no 'old values'."""
    clock = FrozenClock(T0)
    reason = "connection refused by 127.0.0.1:22209 (sshd down or port closed)"
    backend = FakeBackend([HostSpec("x-down", expect_gpus=8)],
                          [("x-down", Disconnected(T0, reason, retry_in_s=30))])
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await backend.started.wait()
        clock.now += 5
        app.post_message(HostChosen("x-down"))
        await wait_until(pilot, lambda: "never reached" in _screen_text(app))
        line = next(x for x in _screen_text(app).splitlines() if "never reached" in x)
        assert "connection refused" in line and "next retry in 25 s" in line, line
        assert "last seen" not in _screen_text(app)
        assert "values below are old" not in line


async def test_a_redraw_that_falls_due_after_the_app_closed_draws_nothing() -> None:
    """A connect near the end asks for a redraw on a timer; it can fire once the screens
    are gone (it raised ScreenStackError and failed the run, twice in CI)."""
    specs = [HostSpec(name="x-real", expect_gpus=8)]
    backend = FakeBackend(specs, [("x-real", Connected(T0))])
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock(T0 + 1))
    async with app.run_test(size=(80, 24)):
        pass
    assert not app.screen_stack
    before = app.redraws
    app.refresh_view()
    assert app.redraws == before + 1


async def test_a_panel_shown_below_the_fold_is_scrolled_into_view() -> None:
    """Thermals fill the body (1fr); the topology shown after it must come into view.

    CI once caught ``[3 topo]`` marked shown while the body stayed on the thermals: the
    scroll ran before the layout had placed the panel.
    """
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(140, 45)) as pilot:
        await settled(pilot, backend)
        app.run_command("host gpu-t02")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and app.screen.is_mounted)
        await pilot.press("1")  # memory off: thermals move up and fill the body
        await pilot.pause()
        body = app.screen.query_one("#host-body")
        topo = app.screen.query_one("#panel-topology")
        await pilot.press("3")

        def topo_in_view() -> bool:
            top = topo.virtual_region.y
            return topo.virtual_region.height > 0 and \
                body.scroll_y <= top < body.scroll_y + body.scrollable_content_region.height

        await wait_until(pilot, topo_in_view)
        assert body.scroll_y > 0  # it really moved: the topology starts below the first screen
        assert "PCIe topology" in _screen_text(app)
