"""The steady fold with the tiers read as before session 11 and as now, alternating in one
process (issue 38, session 11: the bucket and raw tiers' batched reads).

``bench_fold``'s fleet (host *i* replays simulator template *i mod 16*, wire v2, decoded by
the console's reader and folded by ``FleetState.apply``) is warmed ``--warm`` simulated
seconds, then folded in chunks of ``--chunk`` seconds, the chunks alternating which reads
the history uses (``rows_before_s11``'s or today's; the reads change nothing, so both sides
fold the same state).  A chunk of 120 s holds every detector's run of every host once or
twice, as a steady fleet does.  CPU (``process_time``) per host-sample of feed + apply, and
of it the detectors' (``DetectorSchedule.run``, timed on both sides alike);
pairs are (before, after) of consecutive chunks, the order alternating pair by pair.

``--detectors AT``: instead, ``bench_detectors``' histories of ``--hosts`` hosts grown to AT
simulated seconds, every detector run once over every host with the reads before and now
alternating, ``--pairs`` pairs (µs a host for all ten detectors once).

    python tests/bench/bench_rows_s11.py [--hosts 256] [--warm 540] [--chunk 120] [--pairs 4]
                                         [--detectors AT]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.analysis.detectors import DetectorSchedule
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.history.raw import RawRing
from probes.history.storage import Ring
from probes.wire.protocol import MessageReader
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tests.history import rows_before_s11
from tui.gc_policy import tune_for_streaming

NEW = (Ring.rows_many, RawRing.rows_many)


def reads(before: bool) -> None:
    if before:
        Ring.rows_many = rows_before_s11.rows_many  # type: ignore[method-assign]
        RawRing.rows_many = rows_before_s11.rows_many  # type: ignore[method-assign]
    else:
        Ring.rows_many, RawRing.rows_many = NEW  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.warm + 2 * args.pairs * args.chunk
    feed = [template(k, total)[1] for k in range(TEMPLATES)]
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(feed[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)
    hosts = [(name, readers[i], feed[i % TEMPLATES][1]) for i, name in enumerate(names)]

    spent = [0.0]
    real_run = DetectorSchedule.run

    def timed(self: DetectorSchedule, *a: Any) -> Any:
        t0 = time.process_time()
        got = real_run(self, *a)
        spent[0] += time.process_time() - t0
        return got

    DetectorSchedule.run = timed  # type: ignore[method-assign,assignment]

    def fold(seconds: range) -> float:
        spent[0] = 0.0
        t0 = time.process_time()
        for t in seconds:
            now = T0 + t
            for name, reader, lines in hosts:
                for msg in reader.feed(lines[t]):
                    fleet.apply(name, msg, now)
        return 1e6 * (time.process_time() - t0) / (args.hosts * len(seconds))

    gc.collect()
    fold(range(args.warm))
    pairs = []
    dets = []
    at = args.warm
    for p in range(args.pairs):
        got, det = {}, {}
        for before in ((True, False) if p % 2 == 0 else (False, True)):
            reads(before)
            got[before] = fold(range(at, at + args.chunk))
            det[before] = 1e6 * spent[0] / (args.hosts * args.chunk)
            at += args.chunk
        pairs.append((round(got[True], 2), round(got[False], 2)))
        dets.append((round(det[True], 2), round(det[False], 2)))
    reads(False)
    ratios = sorted(a / b for b, a in pairs)
    return {"bench": "rows_s11", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts, "warm_s": args.warm,
            "chunk_s": args.chunk, "before_after_us": pairs,
            "after_lower": sum(a < b for b, a in pairs),
            "median_after_over_before": round(ratios[len(ratios) // 2], 3),
            "detectors_before_after_us": dets,
            "detectors_after_lower": sum(a < b for b, a in dets)}


def detectors_alone(args: argparse.Namespace) -> dict[str, Any]:
    from probes.analysis.detectors import SCHEDULE
    from probes.analysis.limits import DetectorLimits
    from tests.bench.bench_detectors import hosts_at

    limits = DetectorLimits()
    hosts: list[Any] = next(iter(hosts_at(args.hosts, [args.detectors])))[1]

    def once() -> float:
        t0 = time.process_time()
        for det, _ in SCHEDULE:
            for name, hist, hello, sample in hosts:
                det(name, hist, hello, sample, limits)
        return 1e6 * (time.process_time() - t0) / args.hosts

    pairs = []
    for p in range(args.pairs):
        got = {}
        for before in ((True, False) if p % 2 == 0 else (False, True)):
            reads(before)
            got[before] = once()
        pairs.append((round(got[True]), round(got[False])))
    reads(False)
    return {"bench": "rows_s11_detectors", "load1": round(os.getloadavg()[0], 2),
            "hosts": args.hosts, "at_s": args.detectors, "before_after_us_a_host": pairs,
            "after_lower": sum(a < b for b, a in pairs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--warm", type=int, default=540)
    ap.add_argument("--chunk", type=int, default=120)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--detectors", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(detectors_alone(args) if args.detectors else run(args)))


if __name__ == "__main__":
    main()
