"""The console's per-sample path outside the history, before and after session 12's
``apply12`` (issue 38), in one process, the two sides frame by frame.

Frames are made once by the real collector side (``bench_relay_decode.collector_frames``:
the stand-in recordings of the agent's own simulator, as ``bench_fleet`` serves them; an
inventory without ``expect_gpus``, as ``bench_fleet``'s).  Each side is a console of its
own: a shard of readers, a ``FleetState``, a clock watch per host; each frame is unframed,
checked and folded by ``CollectorBackend._fold`` (the relayed rows built by
``relayed_sample``), every item through ``clocked`` into ``FleetState.apply``; then
``FleetState.tick``, ``all_findings`` (the alerts' check) and three ``take_scans`` (what
the UI loop runs beside the fold: the profile at 1024 hosts had 183 in 60 s), with a scan
worker that never scans (``IdleWorker``: the console's worker path without a thread's
noise).  Each received time is the frame's second plus a seeded jitter of 20–50 ms (a
link's delays).  The sides take each frame in turn, which goes first alternating frame by
frame, so the machine's load falls on both alike.

* **before**: ``tests/analysis/{fleet_state,host_clock,host_logs}_before_s12`` (main
  ``2425ab3``); **after**: today's modules.  The history and detectors are today's on both
  sides (``probes/history`` is not this branch's).
* ``--outside``: the history's ``add`` and the detectors' ``run`` stubbed on both sides,
  so what is left is this path's own cost.
* Reported: CPU (``process_time``) per host-sample of each side, per chunk of ``--chunk``
  seconds past ``--warm``, over ``--passes`` fresh pairs of consoles; the medians and how
  many chunks were lower.  ``--profile SIDE``: one side alone under cProfile.

    python tests/bench/bench_apply_s12.py [--hosts 256] [--seconds 60] [--warm 20]
                                          [--chunk 5] [--passes 2] [--outside]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import fleet_state
from probes.analysis.detectors import DetectorSchedule
from probes.config.fleet import HostSpec
from probes.history import HostHistory
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import host_clock
from probes.transport.collector_wire import CollectorJob, check_batch, unframe
from tests.analysis import fleet_state_before_s12, host_clock_before_s12
from tests.bench.bench_ingest import T0
from tests.bench.bench_relay_decode import agent_feed, collector_frames
from tui.gc_policy import tune_for_streaming

SIDES: dict[str, tuple[Any, Any]] = {
    "before": (fleet_state_before_s12.FleetState, host_clock_before_s12.clocked),
    "after": (fleet_state.FleetState, host_clock.clocked),
}


class IdleWorker:
    """A scan worker that never scans: the hosts' logs take the console's worker path (lines
    handed on, ``take_scans`` walking every host, a tick's scan asking for finds), without a
    thread's noise in the figures."""

    def submit(self, scanner: object) -> None:
        pass


class Side:
    """One console's side of the frames: its shard of readers, clock watches and fold."""

    def __init__(self, side: str, specs: tuple[HostSpec, ...], seed: int) -> None:
        fleet_cls, clocked = SIDES[side]
        self.fleet = fleet_cls(list(specs), scan_worker=IdleWorker())
        self.shard = _Shard(1, CollectorJob(specs, 4, 0.05))
        self.slices = FoldSlices(budget_s=3600.0)
        self.hosts = len(specs)
        rng = random.Random(seed)
        self.now = T0

        def received() -> float:
            return self.now + 0.02 + 0.03 * rng.random()

        def fold(host: str, item: Any) -> None:
            self.fleet.apply(host, item, self.now)

        self.emit = clocked(fold, received)

    async def second(self, k: int, data: bytes) -> float:
        """Frame ``k`` folded, the tick, the alerts' read and three ``take_scans``: its CPU
        seconds."""
        self.now = T0 + k
        t0 = time.process_time()
        batch = check_batch(unframe(data[4:]), self.hosts)
        await CollectorBackend._fold(self.shard, batch, self.emit, self.slices)
        self.fleet.tick(self.now + 0.5)
        self.fleet.all_findings()  # the alerts' check, each tick
        for _ in range(3):
            self.fleet.take_scans()
        return time.process_time() - t0


def console_pass(frames: list[bytes], specs: tuple[HostSpec, ...], warm: int, seed: int,
                 chunk: int) -> list[dict[str, float]]:
    """Both sides fed frame by frame, which goes first alternating each frame; each
    chunk's CPU seconds a side past ``warm``."""
    sides = {name: Side(name, specs, seed) for name in SIDES}
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
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--chunk", type=int, default=5, help="seconds a reported pair covers")
    p.add_argument("--outside", action="store_true",
                   help="the history's add and the detectors' run do nothing (both sides)")
    p.add_argument("--profile", metavar="SIDE", help="one pass of SIDE under cProfile")
    args = p.parse_args()
    if args.outside:
        HostHistory.add = lambda self, sample: None  # type: ignore[method-assign]
        DetectorSchedule.run = lambda self, *a: None  # type: ignore[method-assign]
    feed = agent_feed(args.hosts, args.seconds)
    specs = tuple(HostSpec(name=f"h{i:04d}") for i in range(args.hosts))
    frames, _ = collector_frames(feed, specs, args.seconds)
    del feed
    tune_for_streaming()
    if args.profile:
        prof = cProfile.Profile()
        side = Side(args.profile, specs, 0)
        prof.enable()
        for k, data in enumerate(frames):
            asyncio.run(side.second(k, data))
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return
    pairs: list[tuple[float, float]] = []
    for k in range(args.passes):
        for c in console_pass(frames, specs, args.warm, k, args.chunk):
            hs = args.hosts * args.chunk
            pairs.append((1e6 * c["before"] / hs, 1e6 * c["after"] / hs))
            print(f"pass {k} chunk: before {pairs[-1][0]:.2f} after {pairs[-1][1]:.2f} "
                  "µs a host-sample", flush=True)
    out = {"bench": "apply_s12", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
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
