"""The fleet rows' cost per 1 Hz redraw at N hosts, in process (issue 38, the UI process).

A fleet of N hosts replays the agent simulator's v2 templates (``bench_ingest.template``:
16 hosts' hello and ticks, a quarter throttling, leaking or on an x8 link) through the
console's decoder and fold (``MessageReader.feed``, ``FleetState.apply``), one tick per host
per simulated second; then, as the console's redraw does, ``FleetState.tick`` and the
console's rows and totals (``tui.views.fleet_rows.FleetRows``) with ``--focus`` hosts on
screen (their rows built every second, the others' at their refresh slot).  Measured, CPU
(``process_time``), after ``--warm`` simulated seconds:

* ``rows_ms``: ``FleetRows.rows`` + ``totals`` per redraw, after ``FleetState.tick``
  (median, mean, p90 over the seconds); ``row_builds``: rows built in full per redraw;
* ``fold_us``: feed + apply per host-sample (the same in both checkouts: a control).

``--unread``: the screen's order and filter read no off-screen numbers (inventory, worst
or name order, no filter: ``FleetRows.numbers_read`` False), as the fleet screen starts.

``--order``: a numeric order, no filter (``FleetRows.only_numbers_read``: an off-screen row
due at its slot takes fresh numbers, not a full build); ``renumbers``: those a redraw.

``--silent N``: the last N hosts fall silent halfway through the warm-up (stale: their kept
rows carry ages, re-stamped every redraw).

The code measured is the checkout the script lies in: copy it into a worktree of another
commit and run both, alternating, for a before/after.

    python tests/bench/bench_fleet_rows.py [--hosts 1024] [--seconds 60] [--warm 30]
        [--focus 40] [--silent 0] [--unread] [--order] [--profile 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.protocol import MessageReader
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tui.gc_policy import tune_for_streaming
from tui.views.fleet_rows import FleetRows

ROOT = Path(__file__).resolve().parents[2]


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.warm + args.seconds
    feed = [template(k, total)[1] for k in range(TEMPLATES)]  # v2: (hello, [tick bytes])
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(feed[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)
    view = FleetRows(fleet)
    view.focus = frozenset(names[:args.focus])
    view.numbers_read = args.numbers_read  # an attribute nothing reads in older checkouts
    view.only_numbers_read = args.order  # likewise
    hosts = [(name, readers[i], feed[i % TEMPLATES][1]) for i, name in enumerate(names)]
    talking = hosts[:args.hosts - args.silent]
    rows_s: list[float] = []
    builds: list[int] = []
    renumbers: list[int] = []
    fold_s = 0.0
    prof = cProfile.Profile() if args.profile else None
    for t in range(total):
        now = T0 + t
        t0 = time.process_time()
        for name, reader, lines in (hosts if t < args.warm // 2 else talking):
            for msg in reader.feed(lines[t]):
                fleet.apply(name, msg, now)
        t1 = time.process_time()
        steady = t >= args.warm
        if steady and prof is not None:
            prof.enable()
        fleet.tick(now + 0.5)
        t2 = time.process_time()
        built = view.row_builds
        renumbered = getattr(view, "row_renumbers", 0)
        view.rows(now + 0.5)
        view.totals(now + 0.5)
        t3 = time.process_time()
        if prof is not None:
            prof.disable()
        if steady:
            fold_s += t1 - t0
            rows_s.append(t3 - t2)
            builds.append(view.row_builds - built)
            renumbers.append(getattr(view, "row_renumbers", 0) - renumbered)
    ms = sorted(1e3 * r for r in rows_s)
    out: dict[str, Any] = {
        "bench": "fleet_rows", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": _commit(), "machine": f"{os.cpu_count()}-core {platform.machine()}, "
        f"python {platform.python_version()}", "load1": round(os.getloadavg()[0], 2),
        "hosts": args.hosts, "focus": args.focus, "seconds": args.seconds, "warm_s": args.warm,
        "rows_ms_median": round(statistics.median(ms), 2),
        "rows_ms_mean": round(statistics.fmean(ms), 2),
        "rows_ms_p90": round(ms[int(0.9 * (len(ms) - 1))], 2),
        "row_builds": round(statistics.fmean(builds), 1),
        "renumbers": round(statistics.fmean(renumbers), 1), "order": args.order,
        "silent": args.silent, "numbers_read": args.numbers_read,
        "fold_us": round(1e6 * fold_s / (len(talking) * args.seconds), 1),
    }
    if prof is not None:
        for sort in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(sort).print_stats(args.profile)
            out[f"profile_{sort}"] = buf.getvalue()
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--focus", type=int, default=40)
    ap.add_argument("--silent", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--unread", dest="numbers_read", action="store_false",
                    help="no order or filter reads off-screen numbers (the default view)")
    ap.add_argument("--order", action="store_true",
                    help="a numeric order, no filter: only numbers read off screen")
    args = ap.parse_args()
    out = run(args)
    profiles = {k: out.pop(k) for k in list(out) if k.startswith("profile_")}
    print(json.dumps(out))
    for text in profiles.values():
        print(text)


if __name__ == "__main__":
    main()
