"""No blank "all clear": a screen opened by ``:host``, ``:job`` or ``:triage`` shows what is
known the moment it is composed, never its empty state while the hosts are streaming.

The review saw ``waiting for hosts…``, ``no findings on this host`` and ``First failure:
none seen yet`` for 0.3–2.5 s after ``:host`` and ``:job``: the screen waited for the
app's next redraw.  Here every redraw is switched off before the command, so what the
screen shows is what it drew itself.
"""

from __future__ import annotations

import pytest

from tests.support.tui_fakes import fake_fleet, settled, sim_fleet, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.base import DataScreen
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.triage import TriageScreen

EMPTY_STATES = ("waiting for hosts", "waiting for the agent's hello", "no findings",
                "none seen yet", "no GPU process of this job seen yet")


def screen_text(app: RigwatchApp) -> str:
    return "\n".join("".join(seg.text for seg in strip)
                     for strip in app.screen._compositor.render_strips())


def no_more_redraws(app: RigwatchApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on only a screen's own first draw can put data on it."""
    monkeypatch.setattr(app, "refresh_view", lambda: None)


async def opened(app: RigwatchApp, pilot: object, kind: type[DataScreen]) -> str:
    await wait_until(pilot, lambda: isinstance(app.screen, kind)  # type: ignore[arg-type]
                     and app.screen.is_mounted)
    await pilot.pause()  # type: ignore[attr-defined]
    return screen_text(app)


@pytest.mark.parametrize("command", ["host gpu-t02", "triage"])
async def test_a_screen_opened_by_command_shows_the_hosts_state_at_once(
        command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        no_more_redraws(app, monkeypatch)
        app.run_command(command)
        text = await opened(app, pilot, HostScreen if command.startswith("host")
                            else TriageScreen)
        assert not [s for s in EMPTY_STATES if s in text], text
        assert "3/3 streaming" in text and "1 critical" in text
        assert "Xid 79" in text or "fallen off the bus" in text.lower()


async def test_host_to_host_shows_the_second_host_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        app.run_command("host gpu-t03")
        await opened(app, pilot, HostScreen)
        no_more_redraws(app, monkeypatch)
        app.run_command("host gpu-t02")
        await wait_until(pilot, lambda: getattr(app.screen, "host", None) == "gpu-t02")
        text = await opened(app, pilot, HostScreen)
        assert "gpu-t02" in text and "streaming" in text
        assert not [s for s in EMPTY_STATES if s in text], text
        assert "Xid 79" in text  # its finding, on the first frame


async def test_a_job_opened_by_command_shows_its_ranks_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    backend, clock = sim_fleet([("gpu-s01", "train,throttle:5"), ("gpu-s02", "train")],
                               minutes=20)
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: all(h.last is not None
                                            for h in app.fleet.hosts.values()))
        no_more_redraws(app, monkeypatch)
        app.run_command("job 48201")  # gpu-s01's job (seed 1)
        text = await opened(app, pilot, JobScreen)
        want = "Slurm job 48201 · 1 host · 8 GPUs · 8 of 8 ranks placed · 1 GPU not ok"
        assert want in text, text
        assert not [s for s in EMPTY_STATES if s in text], text
        assert "throttl" in text.lower()  # its finding, on the first frame
