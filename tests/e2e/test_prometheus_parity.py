"""Parity: the demo fleet read by its agents and read back through a real Prometheus give the
same critical and warning findings (issue 37 item 2).

The console runs the demo fleet headless with ``--metrics-port`` (its agents are the direct
read); Debian's Prometheus 2.42 scrapes it every second; ``rigwatch snapshot --prometheus
--json`` then reads the fleet back from Prometheus alone.  Per host, every critical or
warning code the agents found is found through Prometheus, and Prometheus finds nothing the
agents did not, except what only a host's own logs or disks tell (``NEEDS_HOST``: the
Prometheus source says so, "watch this host over SSH").

The detectors' hour is scaled down by the demo's speed (60x), as in
``test_prometheus_live``, so a leak reads as one on both sides.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from probes.analysis.findings import Finding
from probes.config.fleet import demo_fleet
from probes.sources.agents import AgentFleetBackend
from probes.triage import Severity
from tests.e2e.test_prometheus_live import SCALED, _wait_for_series
from tests.support.prometheus import prometheus
from tests.support.sshd import free_port
from tui.app import make_app
from tui.console_options import ConsoleOptions

PROM_SCALED = SCALED + ("  throttle_window_s: 5\n  temp_window_s: 5\n  hang_window_s: 5\n"
                        "  starve_window_s: 10\n")
"""Every detector's window at the demo's speed, for the reader of Prometheus (which stamps
wall time; the agents stamp simulated time, so their side keeps the hours)."""
LOUD = (Severity.CRITICAL.value, Severity.WARNING.value)
NEEDS_HOST = frozenset({"disk-saturated", "data-starvation"})
"""Codes read from the host itself, not from its GPUs: dcgm-exporter has no disk or CPU
series (they are node_exporter's), and ``data-starvation`` names a busy disk or CPU as its
suspect before it reads the GPUs' saw-tooth, so the Prometheus source cannot judge them.
Codes whose evidence is a log line (kernel, a job's log) are told apart by their source."""


def _from_a_log(f: Finding) -> bool:
    return bool(f.source) and (f.source == "kernel" or f.source.startswith("job:"))


async def _read_both(tmp_path: Path) -> tuple[dict[str, set[str]], dict[str, set[str]],
                                              dict[str, set[str]], dict[str, object]]:
    """(agents' loud codes, of them those only a log or the host tells, Prometheus's loud
    codes, the Prometheus snapshot) of the same running demo."""
    scrape_port = free_port()
    settings = tmp_path / "settings.yaml"
    settings.write_text(PROM_SCALED)
    with prometheus(tmp_path / "prom", scrape_port=scrape_port, interval_s=1.0) as prom:
        # the agents stamp simulated time (60x): their detectors keep their hours
        app = make_app(AgentFleetBackend(demo_fleet()),
                       ConsoleOptions(demo=True, metrics_port=scrape_port))
        async with app.run_test(size=(120, 40)):
            await _wait_for_series(prom.url, 35.0)
            proc = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "tui.cli", "--settings", str(settings),
                                 "snapshot", "--prometheus", prom.url, "--json"],
                capture_output=True, text=True, timeout=60, check=False)
            fleet = app.fleet
            fleet.tick(time.time())  # the app's write before a read (its tick)
            agents: dict[str, set[str]] = {}
            by_host: dict[str, set[str]] = {}
            for f in fleet.all_findings():
                if f.severity.value not in LOUD:
                    continue
                agents.setdefault(f.host, set()).add(str(f.code))
                if _from_a_log(f) or f.code in NEEDS_HOST:
                    by_host.setdefault(f.host, set()).add(str(f.code))
            await app.action_quit()
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    prom_codes = {h["name"]: {f["code"] for f in h["findings"] if f["severity"] in LOUD}
                  for h in snap["hosts"]}
    return agents, by_host, prom_codes, snap


async def test_prometheus_finds_what_the_agents_find(tmp_path: Path) -> None:
    agents, only_host, prom, snap = await _read_both(tmp_path)
    names = [s.name for s in demo_fleet()]
    report = "\n".join(f"{n}: agents {sorted(agents.get(n, ()))} (log/host only "
                       f"{sorted(only_host.get(n, ()))}), prometheus {sorted(prom.get(n, ()))}"
                       for n in names)
    # the demo's trouble is all there on the agents' side (the test is not vacuous)
    assert {"gpu-lost", "gpu-dropout"} <= agents.get("gpu-b02", set()), report
    assert "pcie-link-downgraded" in agents.get("gpu-a04", set()), report
    for n in names:
        mine = agents.get(n, set())
        seen = prom.get(n, set())
        assert mine - only_host.get(n, set()) <= seen, report
        assert seen <= mine, report
    # the two the review saw missing, with what names them
    hosts = {h["name"]: h for h in snap["hosts"]}
    b02 = {f["code"]: f for f in hosts["gpu-b02"]["findings"]}
    lost = b02["gpu-lost"]
    assert lost["gpu"] == 6 and "0000:ba:00.0" in lost["summary"], lost
    assert str(lost["extra"].get("uuid", "")).startswith("GPU-"), lost
    a04 = [f for f in hosts["gpu-a04"]["findings"] if f["code"] == "pcie-link-downgraded"]
    assert [(f["gpu"], f["severity"]) for f in a04] == [(2, "warning")], a04
    assert "x8" in a04[0]["summary"], a04
