"""SVG snapshots of triage at 80×24 and 160×48: the demo's incident, and the same fleet
with one more host that was never reachable.

The data is the demo's eight simulated hosts 45 minutes into their run, through the wire
format (``tests.support.tui_fakes.sim_fleet``), with a frozen clock.  Each shot also
asserts what it must show, so a regenerated SVG cannot quietly accept a regression.

Regenerate with ``pytest tests/tui/test_snapshots_triage.py --snapshot-update`` after a
deliberate visual change, and look at ``snapshot_report.html`` before committing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from probes.analysis.alerts import AlertPolicy
from probes.config.fleet import HostSpec, demo_fleet
from probes.errors import DisconnectKind
from probes.fleet_state import HostStatus
from probes.wire.events import Connected, Disconnected
from tests.support.tui_fakes import T0, FakeBackend, sim_fleet, wait_until
from tests.support.zone import pinned_utc  # noqa: F401  (autouse: TZ=UTC)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.triage import TriageScreen
from widgets.first_failure import FirstFailureBanner
from widgets.step_detail import StepDetail
from widgets.triage_steps import TriageSteps

SnapCompare = Callable[..., bool]
DEMO = [(s.name, ",".join(s.simulate)) for s in demo_fleet(speed=1.0, history_s=0)]
MINUTES = 45
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
DOWN = "gpu-c01"
DOWN_REASON = f"ssh: connect to host {DOWN} port 22: No route to host"


def _app(with_down_host: bool) -> tuple[RigwatchApp, FakeBackend]:
    backend, clock = sim_fleet(DEMO, minutes=MINUTES)
    if with_down_host:
        # unreachable from the start, five minutes before gpu-b02's Xid
        backend.specs.append(HostSpec(name=DOWN, tags=("rack-c",), expect_gpus=8))
        backend.items += [(DOWN, Connected(T0)),
                          (DOWN, Disconnected(T0 + 300.0, DOWN_REASON, retry_in_s=30.0,
                                              kind=DisconnectKind.UNREACHABLE))]
    quiet = AlertPolicy(notify=False, bell=False)
    return make_app(backend, ConsoleOptions(demo=True, alerts=quiet), clock=clock), backend


def _text(app: RigwatchApp, widget: type[FirstFailureBanner | TriageSteps | StepDetail]) -> str:
    return str(app.screen.query_one(widget).render())


def _until_triage(backend: FakeBackend, with_down_host: bool
                  ) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, RigwatchApp)
        await backend.started.wait()
        sims = [app.fleet.hosts[h] for h, _ in DEMO]
        await wait_until(pilot, lambda: all(h.last is not None and h.last.seq == MINUTES
                                            for h in sims))
        if with_down_host:
            await wait_until(pilot, lambda: app.fleet.hosts[DOWN].status
                             is HostStatus.UNREACHABLE)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        app.refresh_view()
        await wait_until(pilot, lambda: "First failure:" in _text(app, FirstFailureBanner)
                         and "none seen" not in _text(app, FirstFailureBanner))
        banner = _text(app, FirstFailureBanner).splitlines()
        detail = _text(app, StepDetail)
        steps = _text(app, TriageSteps)
        assert "topology-cross-numa" not in detail
        assert "each GPU has a local NIC on 8 of 8 hosts" in detail
        down_found = with_down_host and any(f.host == DOWN for f in
                                            app.fleet.hosts[DOWN].findings())
        if down_found:
            # the host down since before the Xid is the first failure; the Xid is still named
            assert DOWN in banner[0] and "also Xid 79 on gpu-b02 GPU6" in banner[0]
            assert banner[1].startswith(f"Do now: check {DOWN}'s power and network")
            assert "11 (3 crit)" in steps
        else:
            # the demo's incident, named once, then its action on one line each; gpu-b03's
            # watchdog is another job's incident, named, never its consequence
            assert banner[0].endswith("Xid 79 on gpu-b02 GPU6; also NCCL timeout on gpu-b03")
            assert banner[1] == "Do now: drain gpu-b02, reboot it; RMA GPU6 if it recurs"
            # gpu-a03's training slowed with its throttled GPU5: throughput-drop sits there
            assert "10 (2 crit)" in steps and "throughput-drop on gpu-a03" in detail
        if with_down_host:
            # what the GPU step could not check, and why: with or without a finding for it
            assert f"checked: nothing on {DOWN} (unreachable)" in detail
            assert "on 8 of 9 hosts" in detail
        await pilot.pause()

    return run_before


class TestTriage:
    @pytest.mark.parametrize("size", SIZES)
    def test_demo_incident(self, snap_compare: SnapCompare, size: str) -> None:
        """The demo 45 minutes in: Xid 79 on gpu-b02 GPU6 first, the NCCL timeout on
        gpu-b03 after it, "Do now:", the GPU step's findings (gpu-b01's data starvation
        among them)."""
        app, backend = _app(with_down_host=False)
        assert snap_compare(app, terminal_size=SIZES[size],
                            run_before=_until_triage(backend, False))

    @pytest.mark.parametrize("size", SIZES)
    def test_with_a_host_down(self, snap_compare: SnapCompare, size: str) -> None:
        """The same fleet with gpu-c01 unreachable since before the Xid: the GPU step says
        it could not be checked and why (and, with the reachability findings, names it)."""
        app, backend = _app(with_down_host=True)
        assert snap_compare(app, terminal_size=SIZES[size],
                            run_before=_until_triage(backend, True))
