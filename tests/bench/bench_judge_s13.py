"""The console's fold of a host sample outside the history, before and after session 13's
``judge13`` (issue 38), in one process, the two sides frame by frame.

Frames are made once by the real collector side (``bench_relay_decode.collector_frames``,
the stand-in recordings, no ``expect_gpus``, as ``bench_fleet``).  Each side is a console
of its own (readers, clock watches, a ``FleetState``); each frame is unframed, checked and
decoded by ``CollectorBackend._fold`` into a list (untimed: the decode is not this path),
then the list is folded by ``FleetState.apply`` (timed: what ``RigwatchApp.fold`` runs, the
previous samples freed as the console frees them), then ``tick`` and ``all_findings``
(untimed).  Which side goes first alternates frame by frame.

* **before**: each host's judges from ``tests/analysis/sample_judge_before_s13`` and the
  fold from ``tests/analysis/fleet_state_before_s13`` (main ``31f101a``); **after**: today's.
* ``--outside``: the history's ``add`` does nothing on both sides (it is not this path's;
  the detectors run).
* Reported: CPU (``process_time``) per host-sample of each side's folds, per chunk of
  ``--chunk`` seconds past ``--warm``; medians and how many chunks were lower.

    python tests/bench/bench_judge_s13.py [--hosts 256] [--seconds 60] [--warm 15]
                                          [--chunk 5] [--passes 1] [--outside]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import fleet_state
from probes.config.fleet import HostSpec
from probes.history import HostHistory
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import host_clock
from probes.transport.collector_wire import CollectorJob, check_batch, unframe
from tests.analysis import fleet_state_before_s13, sample_judge_before_s13
from tests.bench.bench_ingest import T0
from tests.bench.bench_relay_decode import agent_feed, collector_frames
from tui.gc_policy import tune_for_streaming


class Side:
    """One console's side: its shard of readers, clock watches and fold."""

    def __init__(self, side: str, specs: tuple[HostSpec, ...]) -> None:
        if side == "before":
            self.fleet: Any = fleet_state_before_s13.FleetState(list(specs))
            for state in self.fleet.hosts.values():
                state.sample_judge = sample_judge_before_s13.SampleJudge()
        else:
            self.fleet = fleet_state.FleetState(list(specs))
        self.shard = _Shard(1, CollectorJob(specs, 4, 0.05))
        self.slices = FoldSlices(budget_s=3600.0)
        self.hosts = len(specs)
        self.now = T0
        self.items: list[tuple[str, Any]] = []
        self.emit = host_clock.clocked(lambda h, item: self.items.append((h, item)),
                                       lambda: self.now + 0.03)

    async def second(self, k: int, data: bytes) -> float:
        """Frame ``k`` decoded (untimed), folded (timed), then the tick: the fold's CPU s."""
        self.now = now = T0 + k
        await CollectorBackend._fold(self.shard, check_batch(unframe(data[4:]), self.hosts),
                                     self.emit, self.slices)
        items, self.items = self.items, []
        apply = self.fleet.apply
        t0 = time.process_time()
        for host, item in items:
            apply(host, item, now)
        took = time.process_time() - t0
        del items
        self.fleet.tick(now + 0.5)
        self.fleet.all_findings()
        return took


def console_pass(frames: list[bytes], specs: tuple[HostSpec, ...], warm: int, seed: int,
                 chunk: int) -> list[dict[str, float]]:
    sides = {name: Side(name, specs) for name in ("before", "after")}
    chunks: list[dict[str, float]] = []

    async def run() -> None:
        for k, data in enumerate(frames):
            order = ("before", "after") if (k + seed) % 2 == 0 else ("after", "before")
            took = {name: await sides[name].second(k, data) for name in order}
            if k <= warm:
                continue
            if (k - warm - 1) % chunk == 0:
                chunks.append({"before": 0.0, "after": 0.0})
            for name, t in took.items():
                chunks[-1][name] += t

    asyncio.run(run())
    sides.clear()
    gc.collect()
    return chunks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--warm", type=int, default=15)
    p.add_argument("--passes", type=int, default=1)
    p.add_argument("--chunk", type=int, default=5)
    p.add_argument("--outside", action="store_true", help="the history's add does nothing")
    args = p.parse_args()
    if args.outside:
        HostHistory.add = lambda self, sample: None  # type: ignore[method-assign]
    feed = agent_feed(args.hosts, args.seconds)
    specs = tuple(HostSpec(name=f"h{i:04d}") for i in range(args.hosts))
    frames, _ = collector_frames(feed, specs, args.seconds)
    del feed
    tune_for_streaming()
    pairs: list[tuple[float, float]] = []
    for k in range(args.passes):
        for c in console_pass(frames, specs, args.warm, k, args.chunk):
            hs = args.hosts * args.chunk
            pairs.append((1e6 * c["before"] / hs, 1e6 * c["after"] / hs))
            print(f"pass {k} chunk: before {pairs[-1][0]:.2f} after {pairs[-1][1]:.2f} "
                  "µs a host-sample", flush=True)
    out = {"bench": "judge_s13", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": f"{os.cpu_count()}-core {platform.machine()}, python "
                      f"{platform.python_version()}", "load1": round(os.getloadavg()[0], 2),
           "hosts": args.hosts, "seconds": args.seconds, "warm": args.warm,
           "outside": args.outside, "chunk": args.chunk,
           "before_us": round(statistics.median(a for a, _ in pairs), 2),
           "after_us": round(statistics.median(b for _, b in pairs), 2),
           "lower_in": f"{sum(b < a for a, b in pairs)} of {len(pairs)}", "pairs": [
               [round(a, 2), round(b, 2)] for a, b in pairs]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
