"""The wall's view model at N hosts: what pressing ``w`` builds before the wall is drawn.

``bench_ui``'s simulated fleet (its hosts, scenarios and samples) folded into a
``FleetState``, then ``wall_view`` for every host's row, timed against the reference copy of
the code before session 10 (``tests.analysis.wall_view_before_s10``) in alternating passes
in one process; also the wall's layout (``build_layout``) of the view and the young
collections each pass set off.

    python tests/bench/bench_wall_view.py [--hosts 1024] [--reps 30]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.fleet_state import FleetState
from probes.wire.events import Connected
from tests.analysis.wall_view_before_s10 import wall_view_before
from tests.bench.bench_ui import SimFleetBackend
from tui.views.wall_view import wall_view
from widgets._wall_layout import build_layout


def fleet_of(hosts: int, seconds: int = 5) -> tuple[FleetState, float]:
    """The simulated fleet after ``seconds`` of samples, and the time of the last."""
    sim = SimFleetBackend(hosts)
    fleet = FleetState(sim.specs)
    now = time.time()
    for spec, pool in zip(sim.specs, sim.pools, strict=True):
        fleet.apply(spec.name, Connected(now), now)
        fleet.apply(spec.name, pool.hello, now)
        fleet.apply(spec.name, pool.logsource, now)
    for seq in range(seconds):
        ts = now + seq
        for i, (spec, pool) in enumerate(zip(sim.specs, sim.pools, strict=True)):
            s = pool.samples[(seq + i) % len(pool.samples)]
            fleet.apply(spec.name, replace(s, ts=ts, seq=seq), ts)
    return fleet, now + seconds


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--metric", default="mem")
    args = p.parse_args()
    fleet, now = fleet_of(args.hosts)
    rows = [h.row(now) for h in fleet.hosts.values()]
    builds: dict[str, Any] = {"before": wall_view_before, "after": wall_view}
    ms: dict[str, list[float]] = {k: [] for k in builds}
    layout_ms: dict[str, list[float]] = {k: [] for k in builds}
    young: dict[str, int] = dict.fromkeys(builds, 0)
    counts = [0]

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            counts[0] += 1

    gc.callbacks.append(counted)
    for rep in range(args.reps):
        for name in (("before", "after") if rep % 2 == 0 else ("after", "before")):
            n0 = counts[0]
            t = time.perf_counter()
            view = builds[name](fleet, args.metric, now, rows=rows)
            t1 = time.perf_counter()
            build_layout(view, 160)
            t2 = time.perf_counter()
            ms[name].append((t1 - t) * 1000)
            layout_ms[name].append((t2 - t1) * 1000)
            young[name] += counts[0] - n0
    out = {"hosts": args.hosts, "reps": args.reps, "metric": args.metric,
           **{name: {"wall_view_ms_p50": round(statistics.median(ms[name]), 2),
                     "wall_view_ms_min": round(min(ms[name]), 2),
                     "layout_ms_p50": round(statistics.median(layout_ms[name]), 2),
                     "young_collections_per_pass": round(young[name] / args.reps, 2)}
              for name in builds}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
