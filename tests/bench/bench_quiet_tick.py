"""The fold's per-tick path outside the history and the detectors (issue 38 item 1,
session 9): ``FleetState.apply`` of a tick against the path before, in one run.

Two fleets of ``--hosts`` hosts fold the same wire v2 streams, each through its own
readers (``MessageReader.feed``, as ``bench_fold``): **after** is ``FleetState``, **before**
is ``tests.analysis.decode9_before_s9.FleetStateBefore`` with ``judging_before`` (main at
``12ea918``).  Host *i*
replays ``bench_ingest``'s template *i mod 16* (a quarter throttling, leaking or on an x8
link).  After ``--warm`` simulated seconds folded by both, each chunk of ``--chunk``
seconds is folded by one fleet and then the other (alternating which goes first); CPU
(``process_time``) per host-sample of each is a pair.  ``--apply-only``: the chunk's
items are decoded first (untimed) and only ``apply`` is timed.  ``--only S``: every host
replays a template of scenario ``S`` (``bench_ingest.SCENARIOS``: 0 healthy, 1 throttling,
2 leaking, 3 on an x8 link).  ``--outside``: the
history's ``add`` and the detectors' ``run`` do nothing in both fleets (the work this
bench is about, without the two largest shares, which it does not change).

    python tests/bench/bench_quiet_tick.py [--hosts 256] [--seconds 120] [--warm 30]
                                           [--chunk 10] [--apply-only] [--outside]
                                           [--only S]
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

from probes.analysis.detectors import DetectorSchedule
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.history import HostHistory
from probes.wire.protocol import MessageReader
from tests.analysis.decode9_before_s9 import FleetStateBefore, judging_before
from tests.bench.bench_ingest import SCENARIOS, T0, TEMPLATES, template
from tui.gc_policy import tune_for_streaming


class Side:
    def __init__(self, cls: type[FleetState], names: list[str], feed: list[Any]) -> None:
        self.before = cls is FleetStateBefore
        self.fleet = cls([HostSpec(name=n, expect_gpus=8) for n in names])
        self.readers = [MessageReader() for _ in names]
        self.hosts = [(n, self.readers[i], feed[i % TEMPLATES][1]) for i, n in enumerate(names)]
        for i, n in enumerate(names):
            for m in self.readers[i].feed(feed[i % TEMPLATES][0]):
                self.fleet.apply(n, m, T0)

    def fold(self, seconds: range, apply_only: bool) -> float:
        if self.before:
            with judging_before():
                return self._fold(seconds, apply_only)
        return self._fold(seconds, apply_only)

    def _fold(self, seconds: range, apply_only: bool) -> float:
        apply = self.fleet.apply
        if apply_only:
            items = [(n, r.feed(ls[t]), T0 + t) for t in seconds for n, r, ls in self.hosts]
            gc.collect()
            t0 = time.process_time()
            for n, msgs, now in items:
                for m in msgs:
                    apply(n, m, now)
            return time.process_time() - t0
        gc.collect()
        t0 = time.process_time()
        for t in seconds:
            now = T0 + t
            for n, r, ls in self.hosts:
                for m in r.feed(ls[t]):
                    apply(n, m, now)
        return time.process_time() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.warm + args.seconds
    kinds = range(TEMPLATES) if args.only is None else \
        [k for k in range(TEMPLATES) if k % len(SCENARIOS) == args.only] * len(SCENARIOS)
    feed = [template(k, total)[1] for k in kinds]
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    if args.outside:
        HostHistory.add = lambda self, sample: None  # type: ignore[method-assign]
        DetectorSchedule.run = lambda self, *a: None  # type: ignore[method-assign]
    sides = {"before": Side(FleetStateBefore, names, feed), "after": Side(FleetState, names, feed)}
    for s in sides.values():
        s.fold(range(args.warm), False)
    pairs = []
    for k, start in enumerate(range(args.warm, total, args.chunk)):
        chunk = range(start, min(start + args.chunk, total))
        order = ("before", "after") if k % 2 == 0 else ("after", "before")
        spent = {w: sides[w].fold(chunk, args.apply_only) for w in order}
        n = args.hosts * len(chunk)
        pairs.append({w: round(1e6 * spent[w] / n, 2) for w in ("before", "after")})
    before = statistics.median(p["before"] for p in pairs)
    after = statistics.median(p["after"] for p in pairs)
    return {"bench": "quiet_tick", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts,
            "seconds": args.seconds, "apply_only": args.apply_only, "outside": args.outside,
            "only": None if args.only is None else SCENARIOS[args.only],
            "before_us": before, "after_us": after, "ratio": round(after / before, 3),
            "lower": sum(p["after"] < p["before"] for p in pairs), "pairs": pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--apply-only", action="store_true")
    ap.add_argument("--outside", action="store_true")
    ap.add_argument("--only", type=int, choices=range(len(SCENARIOS)))
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
