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

    python tests/bench/bench_detectors.py [--hosts 32] [--at 60,180,600,1800] [--reps 3]
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    limits = DetectorLimits()
    at = [int(x) for x in args.at.split(",")]
    rows: dict[str, dict[str, Any]] = {}
    for t, hosts in hosts_at(args.hosts, at):
        total = 0.0
        for det, every in SCHEDULE:
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
        sched = [DetectorSchedule(limits) for _ in hosts]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--at", default="60,180,600,1800")
    ap.add_argument("--reps", type=int, default=3)
    out = run(ap.parse_args())
    print(json.dumps(out))
    for name, row in out["detectors"].items():
        print(f"{name:32s}", "  ".join(f"{k}={v}" for k, v in row.items() if k != "every_s"))


if __name__ == "__main__":
    main()
