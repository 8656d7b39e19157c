"""The fleet screen names each SSH failure the way an operator can act on it."""

from __future__ import annotations

import pytest

from probes.wire.events import Disconnected
from tests.support.tui_fakes import fake_fleet, settled, wait_until
from tui.app import make_app
from widgets.fleet_table import FleetTable


@pytest.mark.parametrize(("kind", "reason", "shown"), [
    ("auth-failed", "ops@gpu-t02:22: permission denied (publickey)",
     "auth-failed: ops@gpu-t02:22: permission denied (publickey)"),
    ("host-key-refused", "REMOTE HOST IDENTIFICATION HAS CHANGED for gpu-t02",
     "host-key-refused: REMOTE HOST IDENTIFICATION HAS CHANGED for gpu-t02"),
    ("unreachable", "gpu-t02:22: timed out", "unreachable: gpu-t02:22: timed out"),
    ("agent-failed", "agent exited with status 127: python3: not found",
     "agent-failed: agent exited with status 127: python3: not found"),
])
async def test_failure_kinds_show_in_the_status_column(kind: str, reason: str,
                                                       shown: str) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, demo=False, clock=clock)
    async with app.run_test(size=(200, 40)) as pilot:
        await settled(pilot, backend)
        backend.push("gpu-t02", Disconnected(clock(), reason, 30.0, None, kind))
        table = app.screen.query_one(FleetTable)
        await wait_until(pilot, lambda: table.get_cell("gpu-t02", "status").plain == shown)
        header = str(app.screen.query_one("#totals").render())
        assert "1 down" in header and "2/3 streaming" in header
