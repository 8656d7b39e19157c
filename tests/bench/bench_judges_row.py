"""The fold with its per-tick judges reading the row against reading ``sample.gpus``, in
one process (issue 38, judges read the row).

Two fleets of ``--hosts`` hosts replay the same simulator templates (``bench_ingest``), each
host through its own ``MessageReader``, as the console folds (``feed`` then
``FleetState.apply``, both timed, CPU): fleet ``row`` with the judges as they are (a
fast-path tick's row and static epoch, ``tick_gpus``), fleet ``gpus`` with the judges made to
read the sample's GPUs (``tick_gpus`` and ``static_gpus`` swapped for the sample's own GPUs
while it folds: the code path before the change, same samples, rows kept alive as before;
a row sample's GPUs are built on their first read, ``HostSample.gpus``, as the old judges
made them be on every tick).
The order of the two alternates tick by tick, so both see the same load.

Garbage collection is shared by the two fleets but charged to whichever crosses the
threshold, so by default it is off while measuring (``--gc`` keeps it on and reports which
fleet ran each collection).  Prints per fleet: mean and median CPU per host-sample of the
steady seconds.

    python tests/bench/bench_judges_row.py [--hosts 64] [--seconds 120] [--warm 60] [--gc]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.analysis import allocation, findings, tick_gpus
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.compact import static_gpus
from probes.wire.protocol import MessageReader
from probes.wire.samples import GpuSample, HostSample
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tui.gc_policy import tune_for_streaming

WAYS = ("row", "gpus")


def _gpus_only(sample: HostSample) -> tick_gpus.TickGpus:
    return sample.gpus, sample.gpus, None


def _fixed_only(sample: HostSample) -> Sequence[GpuSample]:
    return sample.gpus


JUDGES = {"row": (tick_gpus.tick_gpus, tick_gpus.tick_gpus, static_gpus),
          "gpus": (_gpus_only, _gpus_only, _fixed_only)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.warm + args.seconds
    feed = [template(k, total)[1] for k in range(TEMPLATES)]
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    fleets = {w: FleetState([HostSpec(name=n, expect_gpus=8) for n in names]) for w in WAYS}
    readers = {w: [MessageReader() for _ in names] for w in WAYS}
    for w in WAYS:
        for i, name in enumerate(names):
            for msg in readers[w][i].feed(feed[i % TEMPLATES][0]):
                fleets[w].apply(name, msg, T0)
    running = ["row"]
    collections = dict.fromkeys(WAYS, 0)

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections[running[0]] += 1

    gc.callbacks.append(count)
    spent: dict[str, list[float]] = {w: [] for w in WAYS}
    for t in range(total):
        if t == args.warm:
            gc.collect()
            if not args.gc:
                gc.disable()
            collections.update(dict.fromkeys(WAYS, 0))
        for w in WAYS if t % 2 else WAYS[::-1]:
            findings.tick_gpus, allocation.tick_gpus, allocation.static_gpus = JUDGES[w]
            running[0] = w
            fleet, rs, lines = fleets[w], readers[w], [f[1][t] for f in feed]
            t0 = time.process_time()
            for i, name in enumerate(names):
                for msg in rs[i].feed(lines[i % TEMPLATES]):
                    fleet.apply(name, msg, T0 + t)
            if t >= args.warm:
                spent[w].append(time.process_time() - t0)
    gc.enable()
    gc.callbacks.remove(count)
    findings.tick_gpus, allocation.tick_gpus, allocation.static_gpus = JUDGES["row"]
    out: dict[str, Any] = {"bench": "judges_row", "load1": round(os.getloadavg()[0], 2),
                           "hosts": args.hosts, "seconds": args.seconds, "gc": args.gc}
    for w in WAYS:
        per = [1e6 * s / args.hosts for s in spent[w]]
        out[f"{w}_mean_us"] = round(statistics.fmean(per), 1)
        out[f"{w}_median_us"] = round(statistics.median(per), 1)
        out[f"{w}_collections"] = collections[w]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--warm", type=int, default=60)
    ap.add_argument("--gc", action="store_true")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
