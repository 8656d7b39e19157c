"""The fold while a fleet connects (issue 38 item 1, session 10): ``FleetState.apply`` with
today's ``SampleJudge`` and ``DetectorSchedule`` against session 10's start, in one run.

An inventory without ``expect_gpus`` (``bench_fleet``'s) has each host's GPU count checked
against its peers' (``PeerCounts.expected``: the count most hosts of its model list, *and
how many hosts list it*). While the fleet connects, that pair moves with every hello. Hosts
say hello ``--join`` s apart in all (spread evenly) and then tick at 1 Hz; host *i* replays
``bench_ingest``'s template *i mod 16* (a quarter throttling). Two fleets fold the same
streams, each through its own readers: **before** has every host's ``sample_judge`` from
``tests/analysis/sample_judge_before_s10.py`` and its ``detectors`` from
``detectors_before_s10.py`` (main at ``001268f``; ``--before judges`` or ``detectors``: only
that one), **after** today's. A young history's detectors answer [] unread
(``detectors.YOUNG``): the first minutes of every host. Each chunk of ``--chunk`` simulated
seconds is decoded first (untimed) and applied by one fleet and then the other, alternating
which goes first; CPU (``process_time``) per host-sample of each is a pair. ``whole``: ticks
judged whole (``sample_judged_parts``) per side; ``detector_calls``: detectors run per side.
``--expect``: the inventory names 8 GPUs (a control: no change expected there).
``--outside``: the history's ``add`` and the detectors' ``run`` do nothing in both fleets.
``--judges-from M``: the before judges from ``tests/analysis/M.py`` (session 10c:
``sample_judge_before_s10c``, main at ``e046a8e``).

    python tests/bench/bench_judges_s10.py [--hosts 1024] [--seconds 90] [--join 10]
                                           [--chunk 10] [--expect] [--outside]
                                           [--before judges,detectors]
                                           [--judges-from sample_judge_before_s10]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.analysis import detectors, sample_judge
from probes.analysis.detectors import DetectorSchedule
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.history import HostHistory
from probes.wire.protocol import MessageReader
from tests.analysis import detectors_before_s10
from tests.analysis import sample_judge_before_s10 as before_s10
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tui.gc_policy import tune_for_streaming

WHOLE = {"before": 0, "after": 0}
CALLS = {"before": 0, "after": 0}


def _counting(module: Any, side: str) -> None:
    parts = module.sample_judged_parts

    def counted(*args: Any) -> Any:
        WHOLE[side] += 1
        return parts(*args)

    module.sample_judged_parts = counted


def _calls(module: Any, side: str) -> None:
    """Each detector of ``module``'s schedule counted (the schedule reads its module's
    ``DETECTORS``, ``EVERY_S`` and, today's, ``YOUNG``: all keyed by the same wrappers)."""
    wrap = {}
    for det in module.DETECTORS:
        def counted(*args: Any, _det: Any = det) -> Any:
            CALLS[side] += 1
            return _det(*args)

        wrap[det] = counted
    module.DETECTORS = tuple(wrap[d] for d in module.DETECTORS)
    module.EVERY_S = {wrap[d]: e for d, e in module.EVERY_S.items()}
    if hasattr(module, "YOUNG"):
        module.YOUNG = {wrap[d]: y for d, y in module.YOUNG.items()}


class Side:
    def __init__(self, before: set[str], names: list[str], feed: list[Any], join: int,
                 expect: bool) -> None:
        self.fleet = FleetState([HostSpec(name=n, expect_gpus=8 if expect else None)
                                 for n in names])
        for h in self.fleet.hosts.values():
            if "judges" in before:
                h.sample_judge = before_s10.SampleJudge()  # type: ignore[assignment]
            if "detectors" in before:
                h.detectors = detectors_before_s10.DetectorSchedule(  # type: ignore[assignment]
                    h.detectors.limits, h.detectors.stretch)
        self.hosts = [(n, MessageReader(), feed[i % TEMPLATES], (i * join) // len(names))
                      for i, n in enumerate(names)]

    def fold(self, seconds: range) -> float:
        items = []
        for t in seconds:
            for n, r, (hello, lines), start in self.hosts:
                k = t - start
                if k < 0:
                    continue
                raw = lines[k] if k else hello + lines[0]
                items.append((n, r.feed(raw), T0 + t))
        apply = self.fleet.apply
        gc.collect()
        t0 = time.process_time()
        for n, msgs, now in items:
            for m in msgs:
                apply(n, m, now)
        return time.process_time() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    global before_s10
    before_s10 = importlib.import_module(f"tests.analysis.{args.judges_from}")
    total = args.seconds
    feed = [template(k, total)[1] for k in range(TEMPLATES)]
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    if args.outside:
        HostHistory.add = lambda self, sample: None  # type: ignore[method-assign]
        DetectorSchedule.run = lambda self, *a: None  # type: ignore[method-assign]
    _counting(before_s10, "before")
    _counting(sample_judge, "after")
    _calls(detectors_before_s10, "before")
    _calls(detectors, "after")
    old = set(args.before.split(","))
    sides = {"before": Side(old, names, feed, args.join, args.expect),
             "after": Side(set(), names, feed, args.join, args.expect)}
    pairs = []
    for k, start in enumerate(range(0, total, args.chunk)):
        chunk = range(start, min(start + args.chunk, total))
        order = ("before", "after") if k % 2 == 0 else ("after", "before")
        spent = {w: sides[w].fold(chunk) for w in order}
        n = sum(1 for t in chunk for *_, s in sides["after"].hosts if t >= s)
        pairs.append({w: round(1e6 * spent[w] / n, 2) for w in ("before", "after")})
    before = statistics.median(p["before"] for p in pairs)
    after = statistics.median(p["after"] for p in pairs)
    return {"bench": "judges_s10", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts, "join": args.join,
            "seconds": args.seconds, "expect": args.expect, "outside": args.outside,
            "before_us": before, "after_us": after, "ratio": round(after / before, 3),
            "lower": sum(p["after"] < p["before"] for p in pairs), "whole": dict(WHOLE),
            "detector_calls": dict(CALLS), "before_parts": args.before,
            "judges_from": args.judges_from,
            "pairs": pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=90)
    ap.add_argument("--join", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--expect", action="store_true")
    ap.add_argument("--outside", action="store_true")
    ap.add_argument("--before", default="judges,detectors")
    ap.add_argument("--judges-from", default="sample_judge_before_s10")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
