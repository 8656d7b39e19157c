"""``stage_row`` against a copy that reads the tick's row only, alternating (issue 38, s9).

The simulator's wire v2 ticks (``bench_ingest.template``, host *i* replays template *i mod
16*), decoded as the console decodes them; ``stage_row``'s arguments taken inside
``HostHistory.add`` (``bench_stage._stage_args``).  In one process, each pass walks the
calls in chunks of 128, every stager running each chunk in a rotating order, so load from
other processes falls on all of them alike.  ``--cold``: each stager gets its own decoded
copy of the streams (its chunk is not in cache from the stager before it); otherwise all
share one (hot).  Wall-clock µs per staged sample: each pass's figures, medians, and the
median of each pass's ratio to today's ``stage_row``.

    python tests/bench/bench_stage9.py [--hosts 64] [--seconds 120] [--passes 9] [--cold]
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

from probes.history.staged import stage_row
from tests.bench.bench_ingest import TEMPLATES, template
from tests.bench.bench_row_fold import _samples
from tests.bench.bench_stage import _stage_args
from tests.history.stage9_candidate import stage_row_rows

STAGERS: dict[str, Any] = {"today": stage_row, "rows": stage_row_rows}
CHUNK = 128


def run(args: argparse.Namespace) -> dict[str, Any]:
    feeds = [template(k, args.seconds)[1] for k in range(TEMPLATES)]

    def calls() -> list[tuple[Any, ...]]:
        return _stage_args([_samples(*feeds[i % TEMPLATES]) for i in range(args.hosts)])

    shared = None if args.cold else calls()
    mine = {k: calls() if shared is None else shared for k in STAGERS}
    names = list(STAGERS)
    n = len(mine[names[0]])
    pc = time.perf_counter
    res: dict[str, list[float]] = {k: [] for k in names}
    out: dict[str, Any] = {"bench": "stage9", "hosts": args.hosts, "seconds": args.seconds,
                           "cold": args.cold, "calls": n,
                           "load1_before": round(os.getloadavg()[0], 2)}
    for _ in range(args.passes):
        gc.collect()
        tot = dict.fromkeys(names, 0.0)
        for c, j in enumerate(range(0, n, CHUNK)):
            r = c % len(names)
            for k in names[r:] + names[:r]:
                f, chunk = STAGERS[k], mine[k][j:j + CHUNK]
                t0 = pc()
                for a in chunk:
                    f(*a)
                tot[k] += pc() - t0
        for k in names:
            res[k].append(round(1e6 * tot[k] / n, 3))
    for k in names:
        out[f"{k}_us"] = res[k]
        out[f"{k}_median_us"] = round(statistics.median(res[k]), 3)
        out[f"{k}_ratio_median"] = round(statistics.median(
            [a / b for a, b in zip(res[k], res["today"], strict=True)]), 3)
        out[f"{k}_passes_lower"] = sum(a < b for a, b in zip(res[k], res["today"], strict=True))
    out["load1_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--passes", type=int, default=9)
    ap.add_argument("--cold", action="store_true")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
