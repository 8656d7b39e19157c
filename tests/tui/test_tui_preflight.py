"""The preflight screen in the running app, on the real demo fleet's agents."""

from __future__ import annotations

from textual.widgets import Static

from probes.analysis.preflight import CheckVerdict
from probes.config.fleet import demo_fleet
from probes.sources.agents import AgentFleetBackend
from tests.support.tui_fakes import wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.preflight import PreflightScreen
from widgets.check_list import CheckList
from widgets.preflight_table import PreflightTable


def _lines(app: RigwatchApp) -> dict[str, tuple[CheckVerdict, str]]:
    return {line.host: (line.verdict, line.first_problem)
            for line in app.screen.query_one(PreflightTable).hosts}


async def test_preflight_screen_names_the_failing_hosts_and_shows_their_checks() -> None:
    app = make_app(AgentFleetBackend(demo_fleet()), ConsoleOptions(demo=True))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: all(h.hello is not None and h.last is not None
                                            for h in app.fleet.hosts.values()), timeout_s=20)
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, PreflightScreen))
        app.refresh_view()
        await wait_until(pilot, lambda: len(_lines(app)) == 8)
        lines = _lines(app)
        screen = app.screen
        assert isinstance(screen, PreflightScreen)
        # judged now, from the live state: GPU 6 of gpu-b02 fell off the bus after its
        # hello, GPU 5 of gpu-a03 sits in thermal slowdown (Fabric Manager aside: the
        # simulator's version is judged against its driver, tests/analysis/test_preflight_now.py)
        results = screen._results
        failing = {h for h, checks in results.items()
                   if any(c.verdict is CheckVerdict.FAIL and c.check != "fabric-manager"
                          for c in checks)}
        assert failing == {"gpu-a03", "gpu-a04", "gpu-b01", "gpu-b02", "gpu-b04"}
        assert {h for h, (v, _) in lines.items() if v is CheckVerdict.FAIL} >= failing
        b02 = {c.check: c for c in results["gpu-b02"]}
        assert b02["gpu-count"].detail.startswith("GPU6 LOST (0000:ba:00.0)")
        a03 = {c.check: c for c in results["gpu-a03"]}
        assert a03["gpu-throttle"].verdict is CheckVerdict.FAIL
        assert a03["gpu-temperature"].verdict is CheckVerdict.FAIL
        # the table's first problem leads with the verdict
        assert lines["gpu-a04"][1].startswith("pcie-link: trained below capability: GPU2")
        assert lines["gpu-b02"][1].startswith("gpu-count: GPU6 LOST")
        assert lines["gpu-a03"][1].startswith("gpu-temperature: hot: GPU5")
        summary = str(app.screen.query_one("#preflight-summary", Static).render())
        n_fail = sum(1 for v, _ in lines.values() if v is CheckVerdict.FAIL)
        assert f"{8 - n_fail} pass, 0 warn, {n_fail} fail" in summary
        assert "odd one out: gpu-b01 (driver 535.183.01, cuda 12.2" in summary
        # the cursor's host's checks, problems first
        table = app.screen.query_one(PreflightTable)
        table.focus()
        for _ in range(3):
            await pilot.press("down")
        await wait_until(pilot, lambda: app.screen.query_one(CheckList).checks[0].host
                         == "gpu-a04")
        checks = app.screen.query_one(CheckList).checks
        rendered = str(app.screen.query_one(CheckList).render())
        assert rendered.index("fail pcie-link") < rendered.index("pass gpu-count")
        assert "pass gpu-temperature" in rendered
        assert "threshold: max generation and x16" in rendered
        assert any(c.check == "pcie-link" and c.verdict is CheckVerdict.FAIL for c in checks)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, PreflightScreen))
        await app.action_quit()  # as q does: the agents are stopped inside the test's loop


async def test_at_80x24_the_first_problem_is_readable_and_leads_with_the_verdict() -> None:
    """The counts give way below 110 columns; the first problem keeps enough room to say
    which GPU is lost (it was 14 characters, ``pcie-link: tra``)."""
    from probes.analysis.alerts import AlertPolicy
    from tests.support.tui_fakes import sim_fleet

    backend, clock = sim_fleet([("gpu-b02", "xid79:6@600"), ("gpu-a03", "throttle:5"),
                                ("gpu-a01", "healthy")], minutes=45)
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False)),
                   clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: all(h.last is not None
                                            for h in app.fleet.hosts.values()))
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, PreflightScreen))
        app.refresh_view()
        await wait_until(pilot, lambda: len(_lines(app)) == 3)
        table = app.screen.query_one(PreflightTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels == ["Host", "Verdict", "First problem"]

        def text() -> str:
            strips = app.screen._compositor.render_strips()
            return "\n".join("".join(seg.text for seg in strip) for strip in strips)
        # the rows reach the screen a frame after the table has them (raced under load)
        await wait_until(pilot, lambda: "gpu-count: GPU6 LOST" in text())
        assert "gpu-temperature: hot: GPU5" in text()
