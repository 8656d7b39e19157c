"""``rigwatch snapshot --prometheus`` against a real Prometheus scraping a real console.

The console runs the demo fleet headless (Textual's test driver) with ``--metrics-port``;
Debian's Prometheus 2.42 scrapes it on 127.0.0.1 every second; then the ``rigwatch`` command
reads the fleet back from Prometheus alone, as a site with dcgm-exporter would.

The demo runs one simulated minute per real second, while Prometheus stamps samples with
real time: the settings scale the leak detector's hour down by the same 60 (60 s window,
30 s of data), so the demo's 600 MiB/h leak reads as a leak in half a minute.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from probes.config.fleet import demo_fleet
from probes.sources.agents import AgentFleetBackend
from probes.sources.prometheus.client import PromClient, PromEndpoint
from probes.sources.prometheus.fields import FIELDS
from tests.support.prometheus import prometheus
from tests.support.sshd import free_port
from tui.app import make_app
from tui.console_options import ConsoleOptions

SCALED = ("detectors:\n  leak_window_s: 60\n  leak_min_data_s: 30\n  leak_bins: 20\n")
"""The leak detector's hour at the demo's 60x speed (its thresholds in MiB/h stay)."""


async def _wait_for_series(url: str, seconds: float) -> None:
    """Until every demo host has ``seconds`` of FB_USED in Prometheus."""
    client = PromClient(PromEndpoint(url))
    deadline = time.monotonic() + seconds + 60
    first: float | None = None
    while time.monotonic() < deadline:
        got = await client.query('count(count by (Hostname) (DCGM_FI_DEV_FB_USED))')
        if got and int(float(got[0].value[1])) == 8:
            first = first or time.monotonic()
            if time.monotonic() - first >= seconds:
                return
        await asyncio.sleep(0.5)
    raise AssertionError("Prometheus never held the demo's 8 hosts")


async def test_snapshot_reads_the_demo_fleet_back_from_prometheus(tmp_path: Path) -> None:
    scrape_port = free_port()
    settings = tmp_path / "settings.yaml"
    settings.write_text(SCALED)
    with prometheus(tmp_path / "prom", scrape_port=scrape_port, interval_s=1.0) as prom:
        backend = AgentFleetBackend(demo_fleet())
        app = make_app(backend, ConsoleOptions(demo=True, metrics_port=scrape_port))
        async with app.run_test(size=(120, 40)):
            await _wait_for_series(prom.url, 35.0)
            # a thread waits for the command while the console's loop keeps serving scrapes
            proc = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "tui.cli", "--settings", str(settings),
                                 "snapshot", "--prometheus", prom.url, "--json"],
                capture_output=True, text=True, timeout=60, check=False)
            await app.action_quit()  # the agents get EOF and are reaped while the loop runs
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    hosts = {h["name"]: h for h in snap["hosts"]}
    assert sorted(hosts) == [s.name for s in demo_fleet()]
    gpus = {name: len(h["sample"]["gpus"]) for name, h in hosts.items()}
    assert gpus == {**{n: 8 for n in hosts}, "gpu-b02": 7}, gpus
    # the GPUs carry dcgm-exporter's identity labels, read once
    a01 = hosts["gpu-a01"]["hello"]["facts"]["gpus"]
    assert all(g["uuid"].startswith("GPU-") and g["bus_id"] for g in a01)
    found = {name: {(f["code"], f["gpu"]) for f in h["findings"]} for name, h in hosts.items()}
    assert ("memory-leak", 3) in found["gpu-a02"], hosts["gpu-a02"]["findings"]
    assert ("clocks-throttled", 5) in found["gpu-a03"], hosts["gpu-a03"]["findings"]
    assert not found["gpu-a01"] - {("metric-not-collected", None)}, found["gpu-a01"]
    # discovery (2), a range query per history field, an instant query per field: a
    # number of the fields, whatever the fleet's size
    most = 2 + len(FIELDS) + sum(f.history for f in FIELDS)
    assert snap["source"]["queries"] <= most, snap["source"]
