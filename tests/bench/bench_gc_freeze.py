"""The collector's pauses while a fleet streams, with and without the console's refreeze.

``bench_fold``'s feed (16 simulated templates over wire v2, host *i* replaying template
*i mod 16*) through ``MessageReader.feed`` and ``FleetState.apply`` in this process, with
the console's collector settings (``tune_for_streaming``).  After ``--warm`` simulated
seconds (the hosts' histories, step series and tiers made), the same ``--seconds`` are
folded twice from the same point in two child processes: one as before, one after
``gc_policy.refreeze`` (what the console does 30 s, 2 min and 10 min after it starts).
Reported per run, from ``gc.callbacks``: every collection's generation and wall time, the
longest pause, the pauses' total and the objects tracked outside the frozen set.  A pause
is time the UI loop cannot answer a key (issue 38: key p95 ≤ 100 ms).

    python tests/bench/bench_gc_freeze.py [--hosts 1024] [--warm 90] [--seconds 60]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def child(hosts: int, warm: int, seconds: int, freeze: bool, gen0: int | None
          ) -> dict[str, Any]:
    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState
    from probes.wire.protocol import MessageReader
    from tests.bench.bench_ingest import T0, TEMPLATES, template
    from tui import gc_policy

    total = warm + seconds
    feed = [template(k, total)[1] for k in range(TEMPLATES)]
    names = [f"h{i:04d}" for i in range(hosts)]
    gc_policy.tune_for_streaming()
    if gen0 is not None:
        gc.set_threshold(gen0, *gc.get_threshold()[1:])
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(feed[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)

    def fold(seconds: range) -> None:
        for t in seconds:
            for i, name in enumerate(names):
                for msg in readers[i].feed(feed[i % TEMPLATES][1][t]):
                    fleet.apply(name, msg, T0 + t)

    fold(range(warm))
    frozen = gc_policy.refreeze() if freeze else gc.get_freeze_count()
    pauses: list[tuple[int, float]] = []
    started: list[float] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            pauses.append((info["generation"], time.perf_counter() - started.pop()))

    gc.callbacks.append(watch)
    t0 = time.process_time()
    fold(range(warm, total))
    cpu = time.process_time() - t0
    gc.callbacks.remove(watch)
    ms = [1e3 * p for _, p in pauses]
    return {"freeze": freeze, "thresholds": gc.get_threshold(), "frozen": frozen,
            "tracked": len(gc.get_objects()),
            "collections": [sum(1 for g, _ in pauses if g == k) for k in range(3)],
            "pause_max_ms": round(max(ms, default=0.0), 1),
            "pause_p50_ms": round(statistics.median(ms), 1) if ms else 0.0,
            "pause_total_ms": round(sum(ms), 1),
            "gen1_plus_max_ms": round(max((1e3 * p for g, p in pauses if g >= 1),
                                          default=0.0), 1),
            "fold_cpu_s": round(cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--warm", type=int, default=90)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--child", choices=("plain", "freeze"))
    ap.add_argument("--gen0", type=int, default=None,
                    help="young-generation threshold instead of the console's")
    ap.add_argument("--ways", default="plain,freeze")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.hosts, args.warm, args.seconds, args.child == "freeze",
                               args.gen0)))
        return
    runs = []
    for _ in range(args.pairs):
        for way in args.ways.split(","):
            gen0 = [] if args.gen0 is None else ["--gen0", str(args.gen0)]
            out = subprocess.run([sys.executable, __file__, "--child", way, "--hosts",
                                  str(args.hosts), "--warm", str(args.warm), "--seconds",
                                  str(args.seconds), *gen0], capture_output=True, text=True,
                                 check=True).stdout
            runs.append(json.loads(out.splitlines()[-1]))
    print(json.dumps({"bench": "gc_freeze", "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                   time.gmtime()),
                      "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts,
                      "warm_s": args.warm, "seconds": args.seconds, "runs": runs}))


if __name__ == "__main__":
    main()
