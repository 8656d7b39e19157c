"""Reading and comparing a tick's judge inputs (issue 38, session 10c): today's
``sample_judge.tick_inputs`` and ``_same`` against ``tests/analysis/sample_judge_before_s10c``
(main at ``e046a8e``), in one process.

``--hosts`` hosts replay ``bench_ingest``'s templates (host *i*: template *i mod 16*, a
quarter throttling; ``--throttling``: only the four throttling ones); past ``--warm`` s
every ``SampleJudge.judged`` call's arguments are kept.  Then, over those calls in order,
each side reads the inputs and compares them with the same host's last ones (what a quiet
tick pays before its answer), repeats alternating which side goes first; CPU µs a call.

    python tests/bench/bench_tick_inputs_s10c.py [--hosts 256] [--seconds 90] [--warm 30]
                                                 [--repeats 9] [--throttling]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.analysis import sample_judge
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.protocol import MessageReader
from tests.analysis import sample_judge_before_s10c as before_s10c
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tui.gc_policy import tune_for_streaming

THROTTLING = (1, 5, 9, 13)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tune_for_streaming()
    kinds = THROTTLING if args.throttling else tuple(range(TEMPLATES))
    feed = {k: template(k, args.seconds)[1] for k in kinds}
    names = [f"h{i:04d}" for i in range(args.hosts)]
    fleet = FleetState([HostSpec(name=n) for n in names])
    hosts = [(n, MessageReader(), feed[kinds[i % len(kinds)]]) for i, n in enumerate(names)]
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

    def side(module: Any) -> tuple[float, int]:
        inputs, same = module.tick_inputs, module._same
        last: dict[str, Any] = {}
        hits = 0
        gc.collect()
        t0 = time.process_time()
        for a in calls:
            got = inputs(a[0], a[1], a[2], a[5], a[6], a[7])
            was = last.get(a[0])
            if got is not None and was is not None and same(got, was):
                hits += 1
            last[a[0]] = got
        return time.process_time() - t0, hits

    spent: dict[str, list[float]] = {"before": [], "after": []}
    hits = {}
    ways = (("before", before_s10c), ("after", sample_judge))
    for rep in range(args.repeats):
        for k, module in (ways if rep % 2 == 0 else ways[::-1]):
            s, hits[k] = side(module)
            spent[k].append(round(1e6 * s / len(calls), 3))
    before, after = statistics.median(spent["before"]), statistics.median(spent["after"])
    return {"bench": "tick_inputs_s10c",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts,
            "throttling": args.throttling, "calls": len(calls), "same": hits,
            "before_us": before, "after_us": after, "ratio": round(after / before, 3),
            "lower": sum(a < b for a, b in zip(spent["after"], spent["before"], strict=True)),
            "repeats": spent}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=90)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--throttling", action="store_true")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
