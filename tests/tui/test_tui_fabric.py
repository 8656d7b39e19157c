"""A fixture host whose port goes down mid-run, on every screen within two samples.

The host is the real agent on a sysfs fixture tree (``tests/support/ib_sysfs.py``, with the
NVML stand-in), its stream decoded by the console's reader; the console gets it a sample at
a time.  Within two samples of the port going down the fleet row leads with ``IB PORT DOWN``,
the host screen's findings and network panel say so beside the GPU under the same switch,
and triage names it as the first failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from textual.pilot import Pilot

from probes.config.fleet import HostSpec
from probes.transport.bootstrap import agent_source
from probes.wire.events import Connected, SessionItem
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.analysis.test_fabric_live import FAKE_GPUS, _agent_env
from tests.support.ib_sysfs import IbTree
from tests.support.tui_fakes import FakeBackend, FrozenClock, wait_until
from tests.tui.test_terminals import screen_text
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.messages import HostChosen
from tui.screens.host import HostScreen
from tui.screens.triage import TriageScreen
from widgets.network_panel import NetworkPanel

CHANGE_AFTER = 3
"""The port goes down after the agent's sample 3."""


def _stream(tree: IbTree) -> list[list[SessionItem]]:
    """The agent's items (wire v2), cut after each sample; the port goes down after
    sample ``CHANGE_AFTER`` was read."""
    proc = subprocess.Popen([sys.executable, "-", "--sys-root", str(tree.root), "--wire", "2",
                             "--interval", "0.15", "--count", "8"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_agent_env())
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(agent_source(simulate=False))
    proc.stdin.close()
    reader = MessageReader()
    batches: list[list[SessionItem]] = [[Connected(0.0)]]
    for raw in proc.stdout:
        for msg in reader.feed(raw):
            batches[-1].append(msg)
            if isinstance(msg, HostSample):
                if msg.seq == CHANGE_AFTER:
                    tree.set_state("mlx5_1", "DOWN", "Polling", 40)
                batches.append([])
    assert proc.wait(timeout=30) == 0
    return [b for b in batches if b]


async def test_port_down_on_fleet_host_and_triage_within_two_samples(tmp_path: Path) -> None:
    batches = _stream(IbTree(tmp_path, n=4, gpus=FAKE_GPUS))
    first = [item for b in batches[:CHANGE_AFTER + 1] for item in b]
    last_ts = max(getattr(i, "ts", 0.0) for b in batches for i in b)
    backend = FakeBackend([HostSpec(name="ib-host", expect_gpus=4)], [("ib-host", i)
                                                                     for i in first])
    clock = FrozenClock(last_ts + 1.0)
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await backend.started.wait()
        assert isinstance(app, RigwatchApp)
        app.refresh_view()
        await pilot.pause()
        assert "IB PORT DOWN" not in screen_text(app)
        shown_at = None
        for seq, batch in enumerate(batches[CHANGE_AFTER + 1:], CHANGE_AFTER + 1):
            for item in batch:
                backend.push("ib-host", item)
            app.refresh_view()
            await pilot.pause()
            if "IB PORT DOWN · mlx5_1/1 DOWN/Polling (beside GPU 1)" in screen_text(app):
                shown_at = seq
                break
        assert shown_at is not None and shown_at <= CHANGE_AFTER + 2

        app.post_message(HostChosen("ib-host"))
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        await _shows(pilot, app, "IB PORT DOWN")
        await pilot.press("7")
        panel = app.screen.query_one(NetworkPanel)
        await wait_until(pilot, lambda: panel.network is not None and bool(panel.network.ports))
        text = await _shows(pilot, app, "✗ DOWN")
        line = next(x for x in text.splitlines() if "mlx5_1/1" in x)
        assert "DOWN Polling" in line and "GPU1" in line
        assert "✓ ok" in next(x for x in text.splitlines() if "mlx5_0/1" in x)
        await pilot.press("escape")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await _shows(pilot, app, "IB PORT DOWN")


async def _shows(pilot: Pilot[None], app: RigwatchApp, needle: str) -> str:
    text = ""
    for _ in range(100):
        await pilot.pause(0.02)
        text = screen_text(app)
        if needle in text:
            return text
    raise AssertionError(f"{needle!r} not shown on {type(app.screen).__name__}:\n{text}")
