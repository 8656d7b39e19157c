"""History on day one: a day of dcgm-exporter series backfilled into a real Prometheus with
``promtool tsdb create-blocks-from openmetrics`` (recipe of ``shared/reviews/ecosystem.md``
§2b, Debian's prometheus 2.42), then ``rigwatch snapshot --prometheus`` finds, at start-up,
a leak that began six hours ago (from ``query_range``), a GPU that fell off the bus 40 min
ago (from ``DCGM_FI_DEV_XID_ERRORS`` going 0 → 79 and its series ending), and says which
default-off counters the exporters do not collect.

The series are rigwatch's own OpenMetrics export (dcgm-exporter's names and labels) of
samples shaped like an 8x H100 host's; the Xid family is written as dcgm-exporter writes it
(a gauge holding the last Xid's code).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec, SshOptions
from probes.outputs.export import export_openmetrics
from probes.sources.prometheus.backend import PrometheusBackend, prometheus_specs
from probes.sources.prometheus.client import PromEndpoint
from probes.sources.prometheus.fields import FIELDS
from probes.sources.prometheus.source import PromFleetOptions, PromFleetSource, with_window
from probes.wire.samples import GpuInfo, GpuSample, Hello, HostFacts, HostSample
from tests.support.prometheus import backfill, prometheus
from tests.support.sshd import keygen, make_sshd
from tests.support.tui_fakes import wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions

STEP_S = 60.0
DAY_S = 86400.0
TOTAL_MIB = 81559.0
LEAK_MIB_H = 600.0
BUS = [f"0000:{b:02x}:00.0" for b in (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb)]
UUIDS = [f"GPU-5f1e0c2a-7d3b-4e1f-9a2c-0000000000{i:02d}" for i in range(8)]


def _hello(host: str, ts: float) -> Hello:
    gpus = tuple(GpuInfo(i, UUIDS[i], BUS[i], "NVIDIA H100 80GB HBM3", TOTAL_MIB)
                 for i in range(8))
    facts = HostFacts(host, None, None, None, "550.90.07", None, None, None, None, None,
                      None, gpus=gpus)
    return Hello(ts, 2, "test", facts)


def _day(end: float, lost_at: float, leak_from: float) -> Iterator[tuple[str, float, object]]:
    """A day of samples for three hosts: healthy, leaking GPU3, losing GPU6."""
    start = end - DAY_S
    for host in ("gpu-h01", "gpu-h02", "gpu-h03"):
        yield host, start, _hello(host, start)
    n = int(DAY_S // STEP_S)
    for k in range(n + 1):
        ts = start + k * STEP_S
        for host in ("gpu-h01", "gpu-h02", "gpu-h03"):
            gpus = []
            for i in range(8):
                if host == "gpu-h03" and i == 6 and ts >= lost_at:
                    continue
                mem = 60000.0 + 512.0 * i
                if host == "gpu-h02" and i == 3 and ts > leak_from:
                    mem += 2.0 * ((LEAK_MIB_H * (ts - leak_from) / 3600.0) // 2.0)
                gpus.append(GpuSample(i, UUIDS[i], mem_used_mib=mem, mem_total_mib=TOTAL_MIB,
                                      util_pct=97.0, temp_c=66.0, power_w=610.0,
                                      sm_clock_mhz=1980.0, mem_clock_mhz=2619.0,
                                      pcie_replay=0, remap_correctable=0,
                                      remap_uncorrectable=0, remap_failure=False))
            yield host, ts, HostSample(ts, k, tuple(gpus))


def _xid_family(end: float, lost_at: float) -> str:
    labels = (f'gpu="6",UUID="{UUIDS[6]}",pci_bus_id="{BUS[6]}",'
              f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-h03"')
    lines = ["# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
             "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
    ts = end - 2 * 3600.0
    while ts < lost_at:
        code = 79 if ts >= lost_at - 120.0 else 0
        lines.append(f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {code} {ts:.3f}")
        ts += STEP_S
    return "\n".join(lines) + "\n"


@dataclass
class Day:
    url: str
    end: float
    backfill_s: float


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Day]:
    """A Prometheus holding a backfilled day that ends 30 s ago."""
    tmp_path = tmp_path_factory.mktemp("backfill")
    end = time.time() - 30.0
    lost_at = end - 40 * 60.0
    leak_from = end - 6 * 3600.0
    om = tmp_path / "day.om"
    with om.open("w") as f:
        for chunk in export_openmetrics(_day(end, lost_at, leak_from)):
            if chunk == "# EOF\n":
                f.write(_xid_family(end, lost_at))
            f.write(chunk)
    tsdb = tmp_path / "prom" / "tsdb"
    tsdb.mkdir(parents=True)
    t0 = time.monotonic()
    backfill(om, tsdb)
    backfill_s = time.monotonic() - t0
    with prometheus(tmp_path / "prom") as prom:
        yield Day(prom.url, end, backfill_s)


def test_a_leak_of_six_hours_is_found_at_start_up(day: Day) -> None:
    end = day.end
    out = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--prometheus",
                          day.url, "--json"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr  # every host answered (findings do not fail it)
    snap = json.loads(out.stdout)
    hosts = {h["name"]: h for h in snap["hosts"]}
    assert sorted(hosts) == ["gpu-h01", "gpu-h02", "gpu-h03"]
    found = {n: {(f["code"], f["gpu"]): f for f in h["findings"]} for n, h in hosts.items()}
    leak = found["gpu-h02"][("memory-leak", 3)]
    assert 450 <= leak["extra"]["slope_mib_h"] <= 750, leak
    # dated from the window read at start-up, not from the moment of the snapshot
    assert leak["ts"] <= end - 30 * 60.0, (leak["ts"], end)
    lost = found["gpu-h03"]
    assert ("gpu-lost", 6) in lost, sorted(lost)
    assert ("xid", 6) in lost, (sorted(lost), hosts["gpu-h03"]["events"])
    assert lost[("xid", 6)]["xid"] == 79, lost[("xid", 6)]
    assert "DCGM_FI_DEV_XID_ERRORS" in (lost[("xid", 6)]["evidence"] or "")
    assert not {k for k in found["gpu-h01"] if k[0] != "metric-not-collected"}
    # what the exporters leave out is said, not shown as healthy
    probes = {p["name"]: p for p in hosts["gpu-h01"]["hello"]["facts"]["probes"]}
    gen = probes["DCGM_FI_DEV_PCIE_LINK_GEN"]
    assert gen["available"] is False
    assert gen["reason"] == ("not collected — add DCGM_FI_DEV_PCIE_LINK_GEN to the "
                             "exporter's counters")
    assert "DCGM_FI_DEV_FB_USED" not in probes  # collected: no note
    # ... and the core's verdict, which the findings panels and triage render
    note = found["gpu-h01"][("metric-not-collected", None)]
    assert note["severity"] == "info"
    assert "PCIe link generation" in note["summary"]
    assert "not collected — add " in note["summary"]
    assert "DCGM_FI_DEV_PCIE_LINK_GEN" in note["summary"]
    assert "DCGM_FI_DEV_FB_USED" not in note["summary"]
    print(f"\nbackfill {day.backfill_s:.1f} s; snapshot {snap['source']}")


async def test_the_console_watches_the_prometheus_fleet(day: Day) -> None:
    """The same screens on the Prometheus source: every host streams, the leak is on the
    fleet table from the history read at start-up."""
    options = with_window(PromFleetOptions(PromEndpoint(day.url), refresh_s=1.0), 3600.0)
    source = PromFleetSource(options)
    found = await source.discover()
    backend = PrometheusBackend(options, prometheus_specs(found.hosts, 1.0), source)
    app = make_app(backend, ConsoleOptions(demo=False))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: source.refreshes >= 2 and all(
            h.last is not None and h.last.seq > 60 for h in app.fleet.hosts.values()),
            timeout_s=30)
        await wait_until(pilot, lambda: any(
            f.code == "memory-leak" for f in app.fleet.hosts["gpu-h02"].findings()),
            timeout_s=30)
        rows = {r.name: r for r in app.fleet.rows(time.time())}
        assert set(rows) == {"gpu-h01", "gpu-h02", "gpu-h03"}
        assert backend.mode_text().startswith("Prometheus http://127.0.0.1:")
        # the log steps say what Prometheus cannot tell, and how to get it
        assert "over SSH" in app.fleet.hosts["gpu-h01"].kernel_log_summary()
        assert source.refreshes >= 1 and source.last_queries <= len(FIELDS)


def test_preflight_reads_the_same_fleet(day: Day) -> None:
    """``preflight --prometheus``: the same checks on what Prometheus can tell; the host
    with a lost GPU fails."""
    out = subprocess.run([sys.executable, "-m", "tui.cli", "preflight", "--prometheus",
                          day.url, "--json"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.stdout.startswith("{"), out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert out.returncode == doc["exit"], out.stderr
    verdicts = {h["name"]: h["verdict"] for h in doc["hosts"]}
    assert sorted(verdicts) == ["gpu-h01", "gpu-h02", "gpu-h03"]
    assert verdicts["gpu-h03"] == "fail", doc["hosts"][2]


async def test_opening_a_host_reads_its_kernel_log_and_topology_over_ssh(
        day: Day, tmp_path: Path) -> None:
    """Issue #22 item 4: metrics hold no kernel log, topology or PCIe chains.  A host that
    the inventory reaches over SSH (here a real OpenSSH sshd on 127.0.0.1 running the
    agent with a simulated Xid 79) is read once when its screen opens: its kernel lines
    become findings like any agent's, the log steps stop saying SSH is needed, and the
    topology joins its hello while its GPUs stay the ones Prometheus knows."""
    key, known = tmp_path / "client_ed25519", tmp_path / "known_hosts"
    keygen(key)
    sshd = make_sshd(tmp_path / "sshd", key, known)
    try:
        ssh = SshOptions(address="127.0.0.1", port=sshd.port, user="root",
                         identity=str(key), known_hosts=str(known),
                         connect_timeout_s=5.0, login_timeout_s=10.0)
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"
        reach = HostSpec(name="gpu-h01", transport="ssh", python=python,
                         simulate=("xid79:6@0",), ssh=ssh)
        options = with_window(PromFleetOptions(PromEndpoint(day.url), refresh_s=1.0), 3600.0)
        source = PromFleetSource(options)
        found = await source.discover()
        backend = PrometheusBackend(options, prometheus_specs(found.hosts, 1.0), source,
                                    ssh={"gpu-h01": reach})
        app = make_app(backend, ConsoleOptions(demo=False))
        async with app.run_test(size=(140, 40)) as pilot:
            state = app.fleet.hosts["gpu-h01"]
            await wait_until(pilot, lambda: state.hello is not None and state.last is not None,
                             timeout_s=30)
            uuids = [g.uuid for g in state.hello.facts.gpus]  # type: ignore[union-attr]
            assert "over SSH" in state.kernel_log_summary()
            assert not [f for f in state.findings() if f.code == "xid"]
            app.open_host("gpu-h01")
            await wait_until(pilot, lambda: backend.drilled == ["gpu-h01"] and any(
                f.code == "xid" and f.xid == 79 for f in state.findings()), timeout_s=60)
            assert "over SSH" not in state.kernel_log_summary()
            assert state.hello is not None and state.hello.topo_text
            assert [g.uuid for g in state.hello.facts.gpus] == uuids  # still Prometheus's
            assert not backend.drill_down("gpu-h01")  # read a moment ago: not again yet
            assert not backend.drill_down("gpu-h02")  # no way to reach it over SSH
    finally:
        sshd.stop()
