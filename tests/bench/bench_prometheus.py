"""The Prometheus source at fleet scale: N hosts x 8 GPUs of dcgm-exporter series backfilled
into a real Prometheus (Debian's 2.42, ``promtool tsdb create-blocks-from openmetrics``),
then what one console refresh costs.

For each N: the OpenMetrics file is written (dcgm-exporter's default-on families with its
labels, ``--points`` samples a minute apart ending 30 s ago), backfilled, and Prometheus is
started on it with a 3 h lookback (``--query.lookback-delta``): at 10,000 hosts the backfill
and the start-up reads take minutes, and with the default 5 min the data would go stale
before the refreshes are measured (a live Prometheus is scraping all along).

Measured, in this process (the console's side; Prometheus's own CPU is its own process and
reported apart):

- baseline: one raw instant query of ``DCGM_FI_DEV_FB_USED`` for the whole fleet (HTTP and
  bytes only, no decoding): what any reader pays for the biggest single answer;
- discovery (2 queries) and the start-up history read (``query_range`` per history field);
- a refresh: one shard's read (``read_shard``: one instant query per due metric over the
  shard's hosts, decoding, building a sample per host), its queries and bytes; median of
  ``--refreshes`` after each shard's first read; up to 1,000 hosts the shard is the whole
  fleet.  Also the whole fleet read at once (every shard, as ``snapshot`` reads it);
- folding a read's samples into the console's fleet state (history, findings, detectors
  when due), the part that runs on the UI thread;
- the share of a core of this process over the refresh loop as the console runs it (a
  shard read every ``--every / shards`` seconds, each folded into the fleet state, and the
  fleet table's rows and totals once a second), with the console's collector settings.

    python tests/bench/bench_prometheus.py --hosts 1000,10000 [--points 4] [--spacing 60] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.fleet_state import FleetState  # noqa: E402
from probes.sources.prometheus.backend import prometheus_specs  # noqa: E402
from probes.sources.prometheus.client import PromClient, PromEndpoint  # noqa: E402
from probes.sources.prometheus.source import (  # noqa: E402
    PromFleetOptions,
    PromFleetSource,
    with_window,
)
from tests.support.prometheus import backfill, prometheus  # noqa: E402
from tui.gc_policy import tune_for_streaming  # noqa: E402
from tui.views.fleet_rows import FleetRows  # noqa: E402

FAMILIES = (
    ("DCGM_FI_DEV_FB_USED", "gauge"), ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"), ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"), ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"), ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge"), ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "gauge"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "gauge"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "gauge"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"), ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
)
"""dcgm-exporter's default-on families that rigwatch reads (``etc/default-counters.csv``);
declared gauge here: OpenMetrics would want ``_total`` names for counters."""


def _value(name: str, host: int, gpu: int, k: int) -> str:
    if name == "DCGM_FI_DEV_FB_USED":
        return f"{60000 + 512 * gpu + (2 * k if host == 7 and gpu == 3 else 0)}"
    if name == "DCGM_FI_DEV_FB_FREE":
        return f"{21559 - 512 * gpu}"
    return {"DCGM_FI_DEV_GPU_UTIL": "97", "DCGM_FI_DEV_MEM_COPY_UTIL": "53",
            "DCGM_FI_DEV_GPU_TEMP": "66", "DCGM_FI_DEV_MEMORY_TEMP": "72",
            "DCGM_FI_DEV_POWER_USAGE": "611.5", "DCGM_FI_DEV_SM_CLOCK": "1980",
            "DCGM_FI_DEV_MEM_CLOCK": "2619"}.get(name, "0")


def write_openmetrics(path: Path, hosts: int, points: int, end: float,
                      spacing_s: float = 60.0) -> int:
    """The fleet's series; returns the number of samples written."""
    labels = []
    for h in range(hosts):
        for g in range(8):
            labels.append((h, g, f'gpu="{g}",UUID="GPU-{h:08x}-0000-4000-8000-{g:012x}",'
                                 f'pci_bus_id="00000000:{0x18 + 16 * g:02X}:00.0",'
                                 f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",'
                                 f'Hostname="gpu-{h:05d}",'
                                 f'DCGM_FI_DRIVER_VERSION="550.90.07",'
                                 f'instance="10.{h // 65536}.{h // 256 % 256}.{h % 256}:9400",'
                                 f'job="dcgm"'))
    stamps = [f"{end - spacing_s * (points - 1 - k):.3f}" for k in range(points)]
    n = 0
    with path.open("w", buffering=1 << 20) as f:
        for name, kind in FAMILIES:
            f.write(f"# TYPE {name} {kind}\n")
            for h, g, lab in labels:
                head = f"{name}{{{lab}}} "
                f.writelines(f"{head}{_value(name, h, g, k)} {stamps[k]}\n"
                             for k in range(points))
                n += points
        f.write("# EOF\n")
    return n


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _prometheus_pid(port_url: str) -> int | None:
    port = port_url.rsplit(":", 1)[1]
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"/usr/bin/prometheus" in cmd and f"127.0.0.1:{port}".encode() in cmd:
                return int(d.name)
    return None


async def measure(url: str, hosts: int, refreshes: int, every_s: float,
                  run_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tune_for_streaming()  # the console's collector settings (``tui/gc_policy.py``)
    client = PromClient(PromEndpoint(url, timeout_s=300.0))
    t0 = time.perf_counter()
    body = await client._post("/api/v1/query", {"query": "DCGM_FI_DEV_FB_USED"})
    out["baseline_raw_query_s"] = round(time.perf_counter() - t0, 3)
    out["baseline_bytes"] = len(body)

    options = with_window(PromFleetOptions(PromEndpoint(url, timeout_s=300.0),
                                           refresh_s=every_s), 3600.0)
    source = PromFleetSource(options)
    t0 = time.perf_counter()
    found = await source.discover()
    out["discover_s"] = round(time.perf_counter() - t0, 3)
    out["hosts_found"] = len(found.hosts)
    out["gpus_found"] = sum(len(g) for g in found.gpus.values())
    q0, t0, c0 = source.client.queries, time.perf_counter(), _cpu()
    history, _ = await source.read_history(time.time())
    out["history_s"] = round(time.perf_counter() - t0, 3)
    out["history_cpu_s"] = round(_cpu() - c0, 3)
    out["history_queries"] = source.client.queries - q0
    out["history_samples"] = sum(len(v) for v in history.values())

    # a refresh reads one shard (all of the fleet up to 1,000 hosts): what the fleet
    # table waits for between two updates
    shards = len(source.shards)
    out["shards"] = shards
    out["hosts_per_shard"] = [len(sh.hosts) for sh in source.shards]
    times, cpus, queries, nbytes = [], [], [], []
    for i in range(shards + refreshes):
        b0, c0 = source.client.bytes_read, _cpu()
        await source.read_shard(i % shards)
        if i >= shards:  # a shard's first read reads every field once; then the steady state
            times.append(source.last_refresh_s)
            cpus.append(_cpu() - c0)
            queries.append(source.last_queries)
            nbytes.append(source.client.bytes_read - b0)
    out["refresh_s_median"] = round(statistics.median(times), 3)
    out["refresh_s_max"] = round(max(times), 3)
    out["refresh_cpu_s_median"] = round(statistics.median(cpus), 3)
    out["queries_per_refresh"] = queries
    out["queries_per_refresh_mean"] = round(statistics.mean(queries), 1)
    out["bytes_per_refresh_max"] = max(nbytes)
    out["ratio_refresh_to_baseline"] = round(out["refresh_s_median"]
                                             / out["baseline_raw_query_s"], 2)
    # the whole fleet read at once (what ``snapshot`` does): every shard, one after another
    _, samples, _ = await source.read_now()
    out["whole_fleet_read_s"] = round(source.last_refresh_s, 3)
    out["samples_per_whole_read"] = len(samples)

    fleet = FleetState(prometheus_specs(found.hosts, every_s))
    now = time.time()
    for host in found.hosts:
        fleet.apply(host, found.hello(host, now, {}), now)
    t0 = time.perf_counter()
    for host, past in history.items():  # what the console folds at start-up
        for s in past:
            fleet.apply(host, s, now)
    out["fold_history_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    for host, s in samples.items():
        fleet.apply(host, s, now)
    out["fold_first_refresh_s"] = round(time.perf_counter() - t0, 3)
    _, later, _ = await source.read_shard(0)  # a read later: only the due detectors run
    t0 = time.perf_counter()
    for host, s in later.items():
        fleet.apply(host, s, now + every_s)
    out["fold_next_read_s"] = round(time.perf_counter() - t0, 3)
    view = FleetRows(fleet)  # the console's rows (``tui.views.fleet_rows``)
    t0 = time.perf_counter()
    rows = view.rows(now + every_s)
    out["fleet_rows_s"] = round(time.perf_counter() - t0, 3)
    assert len(rows) == hosts

    # the refresh loop as ``PromFleetSource.run`` runs it (a shard read every
    # every_s / shards), each read folded into the fleet state as the console's UI thread
    # does: CPU of this whole process over the window, so the console's share of a core
    # and the fleet table's tick, once a second, as the console's: rows and totals, a
    # screenful of hosts on screen (off-screen rows are rebuilt at most every 5 s)
    view.focus = frozenset(found.hosts[:40])
    tick_s: list[float] = []

    async def ticks() -> None:
        while True:
            await asyncio.sleep(1.0)
            t = time.perf_counter()
            fleet.tick(time.time())
            view.rows(time.time())
            view.totals(time.time())
            tick_s.append(time.perf_counter() - t)

    ticker = asyncio.create_task(ticks())
    c0, t0 = _cpu(), time.perf_counter()
    reads, fold_s, read_walls = 0, 0.0, []
    while time.perf_counter() - t0 < run_s:
        started = time.monotonic()
        _, got, _ = await source.read_shard(reads % shards)
        read_walls.append(source.last_refresh_s)
        f0 = time.perf_counter()
        stamp = time.time()
        for host, s in got.items():
            fleet.apply(host, s, stamp)
        fold_s += time.perf_counter() - f0
        reads += 1
        await asyncio.sleep(max(0.0, every_s / shards - (time.monotonic() - started)))
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    ticker.cancel()
    out["loop_tick_s_median"] = round(statistics.median(tick_s), 3) if tick_s else None
    out["loop_tick_s_max"] = round(max(tick_s), 3) if tick_s else None
    out["loop_window_s"] = round(wall, 1)
    out["loop_reads"] = reads
    out["loop_read_s_median"] = round(statistics.median(read_walls), 3)
    out["loop_read_s_max"] = round(max(read_walls), 3)
    out["loop_fold_s_per_read"] = round(fold_s / max(1, reads), 3)
    out["loop_cpu_share_of_a_core"] = round(cpu / wall, 3)
    return out


def run_one(hosts: int, points: int, refreshes: int, every_s: float, run_s: float,
            keep: Path | None, spacing_s: float = 60.0) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-prom-{hosts}-", dir=keep))
    om = tmp / "fleet.om"
    end = time.time() - 30.0
    t0 = time.perf_counter()
    n = write_openmetrics(om, hosts, points, end, spacing_s)
    result: dict[str, Any] = {"hosts": hosts, "gpus": hosts * 8, "series": hosts * 8 *
                              len(FAMILIES), "samples_backfilled": n,
                              "openmetrics_mib": round(om.stat().st_size / 2**20, 1),
                              "write_s": round(time.perf_counter() - t0, 1)}
    tsdb = tmp / "prom" / "tsdb"
    tsdb.mkdir(parents=True)
    t0 = time.perf_counter()
    backfill(om, tsdb)
    result["promtool_backfill_s"] = round(time.perf_counter() - t0, 1)
    om.unlink()
    t0 = time.perf_counter()
    with prometheus(tmp / "prom", extra_args=("--query.lookback-delta=3h",)) as prom:
        result["prometheus_ready_s"] = round(time.perf_counter() - t0, 1)
        pid = _prometheus_pid(prom.url)
        p0 = _proc_cpu(pid) if pid else None
        w0 = time.perf_counter()
        result.update(asyncio.run(measure(prom.url, hosts, refreshes, every_s, run_s)))
        if pid and p0 is not None:
            result["prometheus_cpu_share_of_a_core"] = round(
                (_proc_cpu(pid) - p0) / (time.perf_counter() - w0), 3)
            rss = [ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if ln.startswith("VmRSS")]
            result["prometheus_rss_mib"] = int(rss[0].split()[1]) // 1024 if rss else None
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="1000,10000")
    ap.add_argument("--points", type=int, default=4, help="samples per series, a minute apart")
    ap.add_argument("--spacing", type=float, default=60.0,
                    help="seconds between two samples of a series (300 with 13 points: an "
                         "hour, so that the start-up history has points at 10,000 hosts)")
    ap.add_argument("--refreshes", type=int, default=8)
    ap.add_argument("--every", type=float, default=15.0, help="refresh interval of the loop")
    ap.add_argument("--run", type=float, default=45.0, help="seconds of the loop window")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--url", help="measure a Prometheus already running (its series as this "
                                  "bench writes them) instead of backfilling a new one")
    args = ap.parse_args()
    if args.url:
        n = int(args.hosts.split(",")[0])
        print(json.dumps(asyncio.run(measure(args.url, n, args.refreshes, args.every,
                                             args.run)), indent=1))
        return
    machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
    results = []
    for n in (int(x) for x in args.hosts.split(",")):
        r = run_one(n, args.points, args.refreshes, args.every, args.run, None, args.spacing)
        results.append(r)
        if not args.json:
            print(json.dumps(r, indent=1), flush=True)
    if args.json:
        print(json.dumps({"machine": machine, "results": results}))


if __name__ == "__main__":
    main()
