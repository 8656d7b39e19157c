"""What a flood of costly job-log lines costs the console's UI loop, with the log rules on
the loop (as ``snapshot`` and the tests fold) and on the console's worker thread.

A fleet of 8 hosts; one host's job log gets N lines of the review's E3b shape (8 KB of
``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, `` repeated: a digit cut
does not shorten it), then one Xid on another host.  Each run folds them as the console does
and asks for every finding once a "tick" (every 100 lines), until the Xid is found.  Printed:
the folding thread's CPU seconds (``time.thread_time``, the UI loop's share), the worst single
tick on it, and the ratio of the worker's loop cost to the on-loop cost measured in the same
run (machines are shared: only the ratio means much).

    .venv/bin/python tests/bench/bench_scan_worker.py [--lines N]
"""

from __future__ import annotations

import argparse
import json
import time

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.rules.logrules.scan_worker import ScanWorker
from probes.triage import Code
from probes.wire.samples import KERNEL_SOURCE, LogEvent, job_source

FRAGMENTS = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, " * 130)[:8000]
XID = "NVRM: Xid (PCI:0000:48:00): 79, pid=0, GPU has fallen off the bus."
JOB = job_source("/scratch/alice/train.log")
T0 = 1_796_532_000.0
TICK = 100


def run(lines: int, worker: ScanWorker | None) -> dict[str, float]:
    fleet = FleetState([HostSpec(f"h{i}") for i in range(8)], scan_worker=worker)
    loop_s = worst = 0.0
    start = time.monotonic()
    for i in range(lines):
        t = time.thread_time()
        fleet.apply("h0", LogEvent(T0 + i, JOB, FRAGMENTS), T0 + i)
        if i == lines // 2:
            fleet.apply("h1", LogEvent(T0 + i, KERNEL_SOURCE, XID), T0 + i)
        if i % TICK == 0:
            fleet.take_scans()
            fleet.all_findings()
        spent = time.thread_time() - t
        loop_s += spent
        worst = max(worst, spent)
    while True:  # ticks until the Xid is found (the worker may still be scanning)
        t = time.thread_time()
        fleet.take_scans()
        found = any(f.code == Code.XID for f in fleet.all_findings())
        spent = time.thread_time() - t
        loop_s, worst = loop_s + spent, max(worst, spent)
        if found:
            break
        time.sleep(0.01)
    return {"loop_cpu_s": loop_s, "worst_tick_ms": worst * 1000,
            "done_after_s": time.monotonic() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    on_loop = run(args.lines, None)
    worker = ScanWorker()
    worker.start()
    apart = run(args.lines, worker)
    worker.stop()
    out = {"lines": args.lines, "on_loop": on_loop, "worker": apart,
           "worker_thread_cpu_s": worker.busy_s,
           "loop_cpu_ratio": apart["loop_cpu_s"] / on_loop["loop_cpu_s"],
           "worst_tick_ratio": apart["worst_tick_ms"] / on_loop["worst_tick_ms"]}
    for name in ("on_loop", "worker"):
        r = out[name]
        assert isinstance(r, dict)
        print(f"{name:8} UI-loop CPU {r['loop_cpu_s']:.3f} s, worst tick "
              f"{r['worst_tick_ms']:.1f} ms, all found after {r['done_after_s']:.2f} s")
    print(f"worker thread CPU {worker.busy_s:.3f} s; loop CPU ratio "
          f"{out['loop_cpu_ratio']:.3f}, worst tick ratio {out['worst_tick_ratio']:.3f}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
