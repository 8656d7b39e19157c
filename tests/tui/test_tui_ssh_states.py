"""The fleet screen names each SSH failure the way an operator can act on it: a short word
in the Status column, the reason in full beside it."""

from __future__ import annotations

import pytest

from probes.errors import DisconnectKind
from probes.wire.events import Disconnected
from tests.support.tui_fakes import fake_fleet, settled, wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions
from widgets.fleet_table import FleetTable


@pytest.mark.parametrize(("kind", "reason", "word"), [
    (DisconnectKind.AUTH_FAILED, "ops@gpu-t02:22: permission denied (publickey)", "auth failed"),
    (DisconnectKind.HOST_KEY_REFUSED, "REMOTE HOST IDENTIFICATION HAS CHANGED for gpu-t02",
     "key refused"),
    (DisconnectKind.UNREACHABLE, "gpu-t02:22: timed out", "unreachable"),
    (DisconnectKind.AGENT_FAILED, "agent exited with status 127: python3: not found",
     "agent failed"),
])
async def test_failure_kinds_show_a_word_and_the_whole_reason(kind: DisconnectKind, reason: str,
                                                              word: str) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(200, 40)) as pilot:
        await settled(pilot, backend)
        backend.push("gpu-t02", Disconnected(clock(), reason, 30.0, None, kind))
        table = app.screen.query_one(FleetTable)
        await wait_until(pilot, lambda: table.get_cell("gpu-t02", "status").plain == word)
        assert table.get_cell("gpu-t02", "worst").plain == reason
        header = str(app.screen.query_one("#totals").render())
        assert "1 down" in header and "2/3 streaming" in header
