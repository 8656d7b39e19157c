"""The console's side of a collector frame, before and after session 13 (issue 38, branch
issue38-frames13), in one process, frame by frame.

The agent's own recordings (``bench_relay_decode.agent_feed``: hello, ``static``, fabric
reports, ticks with PCIe chains every 30th second) go through the real collector side
(``Relay`` readers, ``frame``) once; then two consoles take the same frames: unframe,
``check_batch``, the fold into samples (before: ``tests/transport/frames_before_s13``,
after: ``CollectorBackend._fold``), each through its own ``clocked`` into a fold
that keeps each host's newest item (freed a round later, as the console frees its last
sample).  Which console goes first alternates frame by frame; CPU (``process_time``) per
host-sample, each pass's first quarter (every host's ``static`` message) left out.
The before side uses ``host_clock_before_s13.clocked``.  ``--drop``: the fold drops each
item at once (the path alone; kept a round, freeing the last sample is the fold's cost).

    python tests/bench/bench_frames_s13.py [--hosts 256] [--seconds 40] [--passes 6] [--drop]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.config.fleet import HostSpec
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import host_clock
from probes.transport.collector_wire import CollectorJob, check_batch, relayed_sample, unframe
from probes.transport.host_clock import clocked
from tests.bench.bench_relay_decode import agent_feed, collector_frames
from tests.transport import frames_before_s13, host_clock_before_s13
from tui.gc_policy import tune_for_streaming


class Side:
    def __init__(self, specs: tuple[HostSpec, ...], fold: Any, clocked: Any,
                 drop: bool = False) -> None:
        self.shard = _Shard(1, CollectorJob(specs, 4, 0.05))
        self.slices = FoldSlices(budget_s=3600.0)
        self.fold = fold
        last: dict[str, object] = {}

        def keep(host: str, item: object) -> None:
            if not drop:
                last[host] = item

        self.emit = clocked(keep)
        self.cpu = 0.0

    async def take(self, data: bytes, hosts: int, count: bool) -> None:
        t0 = time.process_time()
        batch = check_batch(unframe(data[4:]), hosts)
        await self.fold(self.shard, batch, self.emit, self.slices)
        if count:
            self.cpu += time.process_time() - t0


def one_pass(frames: list[bytes], specs: tuple[HostSpec, ...], skip: int, drop: bool
             ) -> tuple[float, float]:
    before = Side(specs, frames_before_s13.fold, host_clock_before_s13.clocked, drop)
    after = Side(specs, CollectorBackend._fold, clocked, drop)

    async def run() -> None:
        for k, data in enumerate(frames):
            order = (before, after) if k % 2 else (after, before)
            for side in order:
                await side.take(data, len(specs), k >= skip)

    asyncio.run(run())
    return before.cpu, after.cpu


def parts(frames: list[bytes], specs: tuple[HostSpec, ...], rounds: int
          ) -> dict[str, list[tuple[float, float]]]:
    """The changed pieces alone, hot, before against after in turns: ``relayed_sample``
    over the last frames' ticks (the readers of a console that took every frame), and the
    clock watch's ``observe`` of their samples (watches of each side fed alike first)."""
    side = Side(specs, CollectorBackend._fold, clocked, drop=True)

    async def fill() -> None:
        for data in frames:
            await side.take(data, len(specs), False)

    asyncio.run(fill())
    readers = side.shard.readers
    ticks = [(readers[i], e) for data in frames[-5:]
             for i, e in check_batch(unframe(data[4:]), len(specs)) if type(e) is tuple]
    samples = [(i, s) for i, (r, e) in enumerate(ticks)
               if (s := relayed_sample(r, e)) is not None]
    out: dict[str, list[tuple[float, float]]] = {"relayed_sample": [], "observe": []}
    watches = {mod: [mod.HostClockWatch() for _ in ticks]
               for mod in (host_clock_before_s13, host_clock)}
    for ws in watches.values():  # each watch's window filled alike (64 values)
        for i, sample in samples[:64]:
            ws[i].observe(sample, sample.ts - 0.05)
    for _ in range(rounds):
        pair = []
        for fn in (frames_before_s13.relayed_sample, relayed_sample):
            t0 = time.process_time()
            for reader, tick in ticks:
                fn(reader, tick)
            pair.append(1e6 * (time.process_time() - t0) / len(ticks))
        out["relayed_sample"].append((round(pair[0], 3), round(pair[1], 3)))
        pair = []
        for mod in (host_clock_before_s13, host_clock):
            ws = watches[mod]
            t0 = time.process_time()
            for i, sample in samples:
                ws[i].observe(sample, sample.ts - 0.05)
            pair.append(1e6 * (time.process_time() - t0) / len(samples))
        out["observe"].append((round(pair[0], 3), round(pair[1], 3)))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--seconds", type=int, default=40)
    p.add_argument("--passes", type=int, default=6)
    p.add_argument("--parts", type=int, default=0,
                   help="then this many rounds of the changed pieces alone")
    p.add_argument("--drop", action="store_true",
                   help="each item dropped at once (the path alone, no sample kept a round)")
    args = p.parse_args()
    tune_for_streaming()
    specs = tuple(HostSpec(name=f"h{i:04d}", expect_gpus=8) for i in range(args.hosts))
    frames, _ = collector_frames(agent_feed(args.hosts, args.seconds), specs, args.seconds)
    skip = 1 + args.seconds // 4
    hs = args.hosts * (len(frames) - skip)
    pairs = []
    for _ in range(args.passes):
        b, a = one_pass(frames, specs, skip, args.drop)
        pairs.append((round(1e6 * b / hs, 2), round(1e6 * a / hs, 2)))
    extra: dict[str, Any] = {}
    if args.parts:
        for name, got in parts(frames, specs, args.parts).items():
            extra[name] = {"pairs_us": got,
                           "before_median": statistics.median(b for b, _ in got),
                           "after_median": statistics.median(a for _, a in got),
                           "lower": sum(a < b for b, a in got)}
    print(json.dumps({
        "bench": "frames_s13", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts, "seconds": args.seconds,
        "drop": args.drop,
        "pairs_us_per_hs": pairs,
        "before_median": statistics.median(b for b, _ in pairs),
        "after_median": statistics.median(a for _, a in pairs),
        "lower": sum(a < b for b, a in pairs), **extra}))


if __name__ == "__main__":
    main()
