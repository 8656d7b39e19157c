"""History cost: CPU per host-sample added, and memory after 24 h at 1 Hz, against a plain store.

Prints one JSON object and one summary line.  Samples are the simulator's 8-GPU host,
encoded and decoded as on the wire (a pool of distinct samples, re-stamped), so ``add`` sees
real ``HostSample`` objects.  CPU is ``process_time``.  The baseline is what a first cut
does: a ``deque`` of one tuple of the same values per sample; its memory is measured for
1 h and scaled to 24 h (it has no tiers, so it grows linearly).  Memory is the columns'
bytes (``HostHistory.nbytes``), tracemalloc of one host's history, and RSS growth.

    python tests/bench/bench_history.py [--quick]

``--quick``: one host for 24 h and a short timing run (about half a minute); the default also
builds 8 hosts and 64 hosts for 24 h (minutes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import tracemalloc
from collections import deque
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import agent
from probes.analysis.detectors import run_detectors
from probes.history import HostHistory, gpu_key
from probes.wire.protocol import decode_line
from probes.wire.samples import Hello, HostSample

DAY = 86400
T0 = 1_800_000_000.0


def sample_pool(n: int, seed: int = 1) -> tuple[Hello, list[HostSample]]:
    """``n`` distinct simulated samples, through JSON and the console's decoder."""
    sim = agent.Simulator(agent.parse_scenarios("healthy"), seed, "bench")
    facts, gpus = sim.facts()
    hello_msg = {"type": "hello", "v": 1, "agent": "bench", "ts": T0, "host": facts,
                 "gpus": gpus, "probes": {}, "simulated": ["healthy"]}
    hello = decode_line(json.dumps(hello_msg))
    assert isinstance(hello, Hello)
    out = []
    for i in range(n):
        g, host, disks = sim.sample(float(i))
        msg = {"type": "sample", "v": 1, "seq": i, "ts": T0 + i, "gpus": g, "host": host,
               "disks": disks}
        s = decode_line(json.dumps(msg))
        assert isinstance(s, HostSample)
        out.append(s)
    return hello, out


def stamped(pool: list[HostSample], n: int, start: float = T0) -> list[HostSample]:
    return [replace(pool[i % len(pool)], ts=start + i, seq=i) for i in range(n)]


def tuple_row(s: HostSample) -> tuple[float | None, ...]:
    """The values the history keeps, as a first-cut store would keep them."""
    row: list[float | None] = [s.ts]
    for g in s.gpus:
        row += (g.mem_used_mib, g.util_pct, g.temp_c, g.power_w, g.sm_clock_mhz)
        row += tuple(p.used_mib for p in (g.processes or ()))
    h = s.host
    row += (h.cpu_pct, h.mem_used_bytes, h.swap_in_pages_s, h.swap_out_pages_s)
    for d in s.disks:
        row += (d.util, d.r_await, d.aqu_sz)
    return tuple(row)


def cpu_per_add(samples: list[HostSample]) -> float:
    h = HostHistory()
    gc.collect()
    t = time.process_time()
    for s in samples:
        h.add(s)
    return (time.process_time() - t) / len(samples)


def baseline_cpu_per_add(samples: list[HostSample]) -> float:
    store: deque[tuple[float | None, ...]] = deque(maxlen=7200)
    gc.collect()
    t = time.process_time()
    for s in samples:
        store.append(tuple_row(s))
    return (time.process_time() - t) / len(samples)


def baseline_bytes_per_hour(pool: list[HostSample]) -> int:
    samples = stamped(pool, 3600)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = [tuple_row(s) for s in samples]
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del store
    return size


def rss_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def build_day(pool: list[HostSample], hosts: int) -> tuple[list[HostHistory], float, int]:
    """``hosts`` histories fed 24 h at 1 Hz, interleaved as the console would; CPU seconds."""
    hs = [HostHistory() for _ in range(hosts)]
    gc.collect()
    rss0 = rss_bytes()
    cpu = 0.0
    chunk = 3600
    for start in range(0, DAY, chunk):
        batch = stamped(pool, chunk, T0 + start)
        t = time.process_time()
        for h in hs:
            for s in batch:
                h.add(s)
        cpu += time.process_time() - t
    for h in hs:
        h.flush()
    gc.collect()
    return hs, cpu, rss_bytes() - rss0


def traced_day(pool: list[HostSample]) -> int:
    batches = [stamped(pool, 3600, T0 + s) for s in range(0, DAY, 3600)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    h = HostHistory()
    for batch in batches:
        for s in batch:
            h.add(s)
    h.flush()
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return size


def detector_ms(hello: Hello, h: HostHistory, calls: int) -> float:
    t = time.process_time()
    for _ in range(calls):
        run_detectors("bench", h, hello)
    return (time.process_time() - t) / calls * 1000


def query_us(h: HostHistory, calls: int) -> float:
    s = h.series(gpu_key(3, "mem_used_mib"))
    assert s is not None and h.last_ts is not None
    t = time.process_time()
    for _ in range(calls):
        s.points(since=h.last_ts - 3600, max_points=60)
    return (time.process_time() - t) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="one host and short runs")
    args = p.parse_args()
    hello, pool = sample_pool(300 if args.quick else 900)
    timed = stamped(pool, 6000 if args.quick else 40000)
    add = min(cpu_per_add(timed) for _ in range(1 if args.quick else 3))
    base_add = min(baseline_cpu_per_add(timed) for _ in range(1 if args.quick else 3))
    base_hour = baseline_bytes_per_hour(pool)
    base_day = base_hour * 24
    one, cpu1, _ = build_day(pool, 1)
    per_host = one[0].nbytes()
    traced = traced_day(pool)
    det = detector_ms(hello, one[0], 5 if args.quick else 20)
    q = query_us(one[0], 50 if args.quick else 200)
    results: dict[str, object] = {
        "add_us_per_host_sample": round(add * 1e6, 2),
        "baseline_add_us": round(base_add * 1e6, 2),
        "add_over_baseline": round(add / base_add, 2),
        "host_samples_per_cpu_s": round(1 / add),
        "history_bytes_per_host_day": per_host,
        "traced_bytes_per_host_day": traced,
        "baseline_bytes_per_host_hour": base_hour,
        "baseline_over_history_per_day": round(base_day / traced, 1),
        "projected_64_hosts_mb": round(64 * traced / 1e6, 1),
        "detectors_ms_per_host_call": round(det, 2),
        "detectors_core_pct_64_hosts_every_10s": round(64 * det / 10000 * 100, 2),
        "query_1h_60_points_us": round(q, 1),
        "day_cpu_s_one_host": round(cpu1, 2),
    }
    del one
    if not args.quick:
        for hosts in (8, 64):
            hs, cpu, rss = build_day(pool, hosts)
            results[f"hosts_{hosts}"] = {
                "history_mb": round(sum(h.nbytes() for h in hs) / 1e6, 1),
                "rss_growth_mb": round(rss / 1e6, 1),
                "rss_per_host_mb": round(rss / hosts / 1e6, 2),
                "add_us_per_host_sample": round(cpu / (hosts * DAY) * 1e6, 2),
            }
            del hs
            gc.collect()
    out = {"bench": "history", "python": sys.version.split()[0],
           "machine": platform.machine(), "cores": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "quick": args.quick, "gpus_per_host": 8,
           "results": results}
    print(json.dumps(out))
    r = results
    tail = ""
    if "hosts_64" in r:
        h64 = r["hosts_64"]
        assert isinstance(h64, dict)
        tail = f"; 64 hosts x 24 h: {h64['history_mb']} MB columns, {h64['rss_growth_mb']} MB RSS"
    print(f"history: {r['add_us_per_host_sample']} us/add per 8-GPU host-sample "
          f"({r['add_over_baseline']}x a deque of tuples), "
          f"{traced / 1e6:.2f} MB per host-day ({r['baseline_over_history_per_day']}x less than "
          f"tuples), 64 hosts projected {r['projected_64_hosts_mb']} MB; detectors "
          f"{r['detectors_ms_per_host_call']} ms/host call{tail}")


if __name__ == "__main__":
    main()
