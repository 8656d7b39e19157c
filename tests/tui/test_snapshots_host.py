"""SVG snapshots of the host screen telling the truth (issue #19 item 1, 3): the demo's
gpu-b02 with GPU 6 LOST at 80×24 and 160×48, and a host that went unreachable two minutes
ago, its last values dimmed under the reason and the next retry.

Fed by the agent's simulator through the wire format with a frozen clock and local time
pinned to UTC.  Regenerate with
``pytest tests/tui/test_snapshots_host.py --snapshot-update`` after a deliberate change, and
read the SVG's text before committing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from probes.analysis.alerts import AlertPolicy
from probes.errors import DisconnectKind
from probes.wire.events import Disconnected
from tests.support.tui_fakes import FakeBackend, FrozenClock, sim_fleet, wait_until
from tests.support.zone import pinned_utc  # noqa: F401  (autouse: TZ=UTC)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import HostScreen
from widgets.fleet_table import FleetTable
from widgets.gpu_table import GpuTable

SnapCompare = Callable[..., bool]
HOSTS = [("gpu-a01", "healthy"), ("gpu-b02", "xid79:6@600")]
MINUTES = 45
THEME = "rigwatch-dark"


def _app() -> tuple[RigwatchApp, FakeBackend, FrozenClock]:
    backend, clock = sim_fleet(HOSTS, minutes=MINUTES)
    quiet = AlertPolicy(notify=False, bell=False)
    return make_app(backend, ConsoleOptions(demo=True, alerts=quiet), clock=clock), backend, clock


async def _open(pilot: Pilot[None], backend: FakeBackend, host: str) -> None:
    app = pilot.app
    assert isinstance(app, RigwatchApp)
    app.theme = THEME
    await backend.started.wait()
    await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == MINUTES
                                        for h in app.fleet.hosts.values()))
    app.refresh_view()
    await wait_until(pilot, lambda: app.screen.query_one(FleetTable).row_count == len(HOSTS))
    app.post_message(HostChosen(host))
    await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                     and app.screen.query_one(GpuTable).row_count == 8)
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_b02_gpu6_lost(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """GPUs 7/8 in the header, the Xid 79 findings on top, GPU 6's row saying LOST with
    its bus id, serial and when it went."""
    app, backend, _ = _app()

    async def run_before(pilot: Pilot[None]) -> None:
        await _open(pilot, backend, "gpu-b02")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_down_host(snap_compare: SnapCompare) -> None:
    """gpu-a01 unreachable for two minutes: "last seen 2 m ago · unreachable: … · next retry
    in 8 s" above its dimmed table; no "waiting for the agent's hello"."""
    app, backend, clock = _app()

    async def run_before(pilot: Pilot[None]) -> None:
        await _open(pilot, backend, "gpu-a01")
        backend.push("gpu-a01", Disconnected(
            clock.now, "10.0.0.7:22: connection refused", retry_in_s=8,
            kind=DisconnectKind.UNREACHABLE))
        clock.now += 120
        assert isinstance(pilot.app, RigwatchApp)
        pilot.app.refresh_view()
        await wait_until(pilot, lambda: pilot.app.screen.query_one(GpuTable).has_class("-stale"))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)
