"""What each history detector costs, per run and per host-sample, as a host's history grows
(issue 38 items 1 and 5: the detectors at start-up and at steady state).

Host *i* replays simulator template *i mod 16* (``bench_ingest.template``: a quarter of them
throttling, leaking or on an x8 link) into a ``HostHistory``; at each checkpoint (simulated
seconds since the host connected) every detector runs over every host ``--reps`` times.
Reported per detector and checkpoint, CPU (``process_time``):

* ``run_us``: one run over one host;
* ``hs_us``: that run spread over the samples between two runs (its ``SCHEDULE`` period at
  1 Hz), i.e. what it adds to each host-sample;

and ``schedule_idle_us``: ``DetectorSchedule.run`` on a tick where nothing is due.

``--before`` measures main's detectors and schedule instead (``tests/analysis/
detectors_before.py``, the copy the equivalence test holds the new ones to);
``--alternate K`` measures only K before/after pairs of the summed figure per checkpoint,
alternating in one process over the same histories; with ``--session6`` the "before" of
those pairs is main before session 6's change (``tests/analysis/clocks_before_s6.py``,
``spin_before_s6.py``: throttled-while-busy and collective-hang), and the pairs of those two
detectors are reported apart too; with ``--session8`` it is collective-hang before session
8's batched reads (``spin_before_s8.py``), reported apart.

    python tests/bench/bench_detectors.py [--hosts 32] [--at 60,180,600,1800] [--reps 3]
                                          [--before] [--alternate K [--session6 | --session8]]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.analysis.detectors import SCHEDULE, DetectorSchedule
from probes.analysis.limits import DetectorLimits
from probes.history import HostHistory
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, HostSample
from tests.bench.bench_ingest import TEMPLATES, template


def hosts_at(n: int, checkpoints: list[int]) -> Any:
    """Yield (checkpoint, [(name, history, hello, sample)]) as the histories grow."""
    total = max(checkpoints)
    feed = [template(k, total)[1] for k in range(min(n, TEMPLATES))]
    state: list[tuple[str, MessageReader, HostHistory, list[Any]]] = []
    for i in range(n):
        reader = MessageReader()
        hello = [m for m in reader.feed(feed[i % TEMPLATES][0]) if isinstance(m, Hello)]
        state.append((f"h{i:04d}", reader, HostHistory(), [hello[0] if hello else None, None]))
    done = 0
    for at in sorted(checkpoints):
        for t in range(done, at):
            for i, (_, reader, hist, last) in enumerate(state):
                for msg in reader.feed(feed[i % TEMPLATES][1][t]):
                    if isinstance(msg, HostSample):
                        hist.add(msg)
                        last[1] = msg
        done = at
        yield at, [(name, hist, last[0], last[1]) for name, _, hist, last in state]


def before_schedule() -> tuple[tuple[Any, float], ...]:
    """``SCHEDULE`` with main's detectors before issue 38's pruned windows (the copy the
    equivalence test holds the new ones to), for a same-run comparison."""
    from tests.analysis import detectors_before as old
    return tuple((getattr(old, det.__name__, det), every) for det, every in SCHEDULE)


SESSION6 = ("detect_throttled_while_busy", "detect_collective_hang")
"""The detectors session 6 changed."""


def session6_schedule() -> tuple[tuple[Any, float], ...]:
    """``SCHEDULE`` with main's throttled-while-busy and collective-hang from before session 6
    (the copies ``test_throttle_busy_first`` holds the new ones to)."""
    from tests.analysis import clocks_before_s6, spin_before_s6
    old = {"detect_throttled_while_busy": clocks_before_s6.detect_throttled_while_busy,
           "detect_collective_hang": spin_before_s6.detect_collective_hang}
    return tuple((old.get(det.__name__, det), every) for det, every in SCHEDULE)


def session8_schedule() -> tuple[tuple[Any, float], ...]:
    """``SCHEDULE`` with main's collective-hang from before session 8 (the copy
    ``test_hang_batched`` holds the batched one to)."""
    from tests.analysis import spin_before_s8
    old = {"detect_collective_hang": spin_before_s8.detect_collective_hang}
    return tuple((old.get(det.__name__, det), every) for det, every in SCHEDULE)


def run(args: argparse.Namespace) -> dict[str, Any]:
    limits = DetectorLimits()
    at = [int(x) for x in args.at.split(",")]
    rows: dict[str, dict[str, Any]] = {}
    schedule = before_schedule() if args.before else SCHEDULE
    for t, hosts in hosts_at(args.hosts, at):
        if args.alternate:
            alternate(rows, t, hosts, limits, args)
            continue
        total = 0.0
        for det, every in schedule:
            t0 = time.process_time()
            for _ in range(args.reps):
                for name, hist, hello, sample in hosts:
                    det(name, hist, hello, sample, limits)
            run_us = 1e6 * (time.process_time() - t0) / (args.reps * len(hosts))
            total += run_us / every
            row = rows.setdefault(det.__name__, {"every_s": every})
            row[f"run_us@{t}"] = round(run_us, 1)
            row[f"hs_us@{t}"] = round(run_us / every, 2)
        rows.setdefault("all", {})[f"hs_us@{t}"] = round(total, 2)
        # A schedule that has run once: every later tick within the period finds nothing due.
        from tests.analysis.detectors_before import ScheduleBefore
        sched: list[Any] = [ScheduleBefore(limits) if args.before else DetectorSchedule(limits)
                            for _ in hosts]
        for s, (name, hist, hello, sample) in zip(sched, hosts, strict=True):
            s.run(name, hist, hello, sample)
        later = [dataclasses.replace(h[3], ts=h[3].ts + 1.0) for h in hosts]
        t0 = time.process_time()
        for _ in range(200):
            for s, (name, hist, hello, _), tick in zip(sched, hosts, later, strict=True):
                s.run(name, hist, hello, tick)
        rows["all"][f"schedule_idle_us@{t}"] = round(
            1e6 * (time.process_time() - t0) / (200 * len(hosts)), 3)
    return {"bench": "detectors", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts, "reps": args.reps,
            "detectors": rows}


def alternate(rows: dict[str, dict[str, Any]], t: int, hosts: list[Any],
              limits: DetectorLimits, args: argparse.Namespace) -> None:
    """Before / after alternated ``--alternate`` times over the same histories: every
    detector's µs per host-sample (its runs spread over its period), summed."""
    pairs = []
    apart: dict[str, list[list[float]]] = {}
    before = session8_schedule() if args.session8 else (
        session6_schedule() if args.session6 else before_schedule())
    named = SESSION6 if args.session6 else (("detect_collective_hang",) if args.session8 else ())
    for _ in range(args.alternate):
        pair = []
        for k, schedule in enumerate((before, SCHEDULE)):
            total = 0.0
            for det, every in schedule:
                t0 = time.process_time()
                for _ in range(args.reps):
                    for name, hist, hello, sample in hosts:
                        det(name, hist, hello, sample, limits)
                hs = 1e6 * (time.process_time() - t0) / (args.reps * len(hosts)) / every
                total += hs
                if det.__name__ in named:
                    if k == 0:
                        apart.setdefault(det.__name__, []).append([round(hs, 2)])
                    else:
                        apart[det.__name__][-1].append(round(hs, 2))
            pair.append(round(total, 2))
        pairs.append(pair)
    ratios = sorted(b / a for b, a in pairs)
    rows.setdefault("alternated", {})[f"before_after_hs_us@{t}"] = pairs
    rows["alternated"][f"median_before_over_after@{t}"] = round(ratios[len(ratios) // 2], 3)
    for name, got in apart.items():
        rows["alternated"][f"{name}_before_after_hs_us@{t}"] = got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--at", default="60,180,600,1800")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--before", action="store_true",
                    help="main's detectors and schedule (tests/analysis/detectors_before.py)")
    ap.add_argument("--alternate", type=int, default=0,
                    help="only before/after pairs, this many, at each checkpoint")
    ap.add_argument("--session8", action="store_true",
                    help="with --alternate: collective-hang as before session 8")
    ap.add_argument("--session6", action="store_true",
                    help="with --alternate: before = main before session 6's change")
    out = run(ap.parse_args())
    print(json.dumps(out))
    for name, row in out["detectors"].items():
        print(f"{name:32s}", "  ".join(f"{k}={v}" for k, v in row.items() if k != "every_s"))


if __name__ == "__main__":
    main()
