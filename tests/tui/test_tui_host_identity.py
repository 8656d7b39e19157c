"""A host cannot pass for another: the host screen leads with the inventory's name, and a
hello's hostname that differs is shown beside it as what the host reports."""

from __future__ import annotations

from functools import partial

from probes.config.fleet import HostSpec
from probes.wire.events import SessionItem
from tests.support.tui_fakes import FakeBackend, FrozenClock, hello, sample, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import HostScreen
from widgets.host_facts import HostFactsBar


def _titled(app: RigwatchApp, host: str) -> bool:
    screen = app.screen
    return isinstance(screen, HostScreen) \
        and str(screen.query_one(HostFactsBar).render()).startswith(host + " ")


async def test_the_inventory_name_leads_and_a_different_hostname_is_labelled() -> None:
    specs = [HostSpec(name="gpu-evil", expect_gpus=8), HostSpec(name="gpu-a01", expect_gpus=8)]
    items: list[tuple[str, SessionItem]] = [
        ("gpu-evil", hello("gpu-a01")), ("gpu-evil", sample("gpu-evil", 0)),
        ("gpu-a01", hello("gpu-a01")), ("gpu-a01", sample("gpu-a01", 0))]
    backend = FakeBackend(specs, items)
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await backend.started.wait()
        for host, reported in (("gpu-evil", "reports hostname gpu-a01"), ("gpu-a01", None)):
            app.post_message(HostChosen(host))
            await wait_until(pilot, partial(_titled, app, host))
            text = str(app.screen.query_one(HostFactsBar).render())
            if reported:
                assert reported in text
            else:
                assert "reports hostname" not in text
            app.pop_screen()
            await pilot.pause()
