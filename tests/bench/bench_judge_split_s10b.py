"""Where a throttling host's judge time goes (issue 38, session 10b), in one process.

``--hosts`` hosts replay the four throttling templates of ``bench_ingest`` (``throttle:5``:
one GPU of eight throttling, its printed clock moving every tick, so ``SampleJudge`` rests
judged whole); after ``--warm`` s every ``SampleJudge.judged`` call's arguments are kept.
Then, over those calls, alternating the order each repeat (CPU µs a call, median of
``--repeats``): **whole** = ``sample_judged_parts`` (what a resting host pays),
**inputs** = ``tick_inputs`` (what reading the tick's inputs costs: any path that keeps
what did not move must pay it), **throttled_only** = ``tick_gpus`` and ``_throttled`` for the
GPUs with clock-event reasons (the findings that must be rebuilt: they print the clock).
A path judging only what moved costs at least inputs + throttled_only.

    python tests/bench/bench_judge_split_s10b.py [--hosts 64] [--seconds 150] [--warm 60]
                                                 [--repeats 7]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.analysis import sample_judge
from probes.analysis.findings import _throttled
from probes.analysis.item_findings import sample_judged_parts
from probes.analysis.tick_gpus import tick_gpus
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.protocol import MessageReader
from tests.bench.bench_ingest import T0, template
from tui.gc_policy import tune_for_streaming

THROTTLING = (1, 5, 9, 13)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tune_for_streaming()
    feed = {k: template(k, args.seconds)[1] for k in THROTTLING}
    names = [f"h{i:03d}" for i in range(args.hosts)]
    fleet = FleetState([HostSpec(name=n) for n in names])
    hosts = [(n, MessageReader(), feed[THROTTLING[i % 4]]) for i, n in enumerate(names)]
    calls: list[tuple[Any, ...]] = []
    judged = sample_judge.SampleJudge.judged

    def kept(self: sample_judge.SampleJudge, *a: Any) -> Any:
        if a[2].ts >= T0 + args.warm:
            calls.append(a)
        return judged(self, *a)

    sample_judge.SampleJudge.judged = kept  # type: ignore[method-assign,assignment]
    for t in range(args.seconds):
        for n, r, (hello, lines) in hosts:
            for m in r.feed(lines[t] if t else hello + lines[0]):
                fleet.apply(n, m, T0 + t)
    sample_judge.SampleJudge.judged = judged  # type: ignore[method-assign]

    def whole() -> None:
        for a in calls:
            sample_judged_parts(*a)

    def inputs() -> None:
        for a in calls:
            sample_judge.tick_inputs(a[0], a[1], a[2], a[5], a[6], a[7])

    def throttled_only() -> None:
        for a in calls:
            s = a[2]
            moving, fixed, _ = tick_gpus(s)
            for now, g in zip(moving, fixed, strict=True):
                if now.clock_reasons:
                    _throttled(a[0], g, now, s.ts, a[5])

    ways: list[tuple[str, Callable[[], None]]] = [
        ("whole", whole), ("inputs", inputs), ("throttled_only", throttled_only)]
    spent: dict[str, list[float]] = {k: [] for k, _ in ways}
    for rep in range(args.repeats):
        for k, f in (ways if rep % 2 == 0 else ways[::-1]):
            gc.collect()
            t0 = time.process_time()
            f()
            spent[k].append(round(1e6 * (time.process_time() - t0) / len(calls), 2))
    return {"bench": "judge_split_s10b", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts, "calls": len(calls),
            **{f"{k}_us": statistics.median(v) for k, v in spent.items()}, "repeats": spent}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=150)
    ap.add_argument("--warm", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=7)
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
