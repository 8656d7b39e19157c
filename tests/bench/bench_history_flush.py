"""The history's part of the fold, before and after its flush was cut as one block (issue 38).

The same simulated wire v2 ticks as ``bench_row_fold`` (``bench_ingest.template``, decoded by
``MessageReader`` as the console decodes them, so ``HostHistory.add`` takes the row path and
``stage_row``), folded by today's ``HostHistory`` (``after``) and by the code before
(``tests/history/history_before.py``: ``before``), alternating, pass by pass; CPU
(``process_time``) per host-sample, and the per-sample reads the detectors make of the
staged samples (``latest`` of each GPU's processes and each disk's util, ``processes`` and
``disks``, once per sample: ``read``).  Prints one JSON line: medians, mins and the median of
the per-pass ratios after/before.

``--before s8``: the "before" is today's history on main's tiers before session 8
(``tiers_before_s8.py``: tier-2 buckets folded series by series).

    python tests/bench/bench_history_flush.py [--hosts 256] [--seconds 300] [--passes 5]
                                              [--before block|s8|s9|s10|s12|s13]
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

from probes.history import HostHistory, disk_key
from probes.history.keys import proc_key
from probes.wire.samples import HostSample
from tests.bench.bench_ingest import TEMPLATES, template
from tests.bench.bench_row_fold import _samples
from tests.history.history_before import HostHistoryBefore


def _add(streams: list[list[HostSample]], cls: type[Any]) -> float:
    gc.collect()
    t0 = time.process_time()
    for ss in streams:
        h = cls()
        for s in ss:
            h.add(s)
    return time.process_time() - t0



def _flush_only(streams: list[list[HostSample]], cls: type[Any]) -> float:
    """``_add``, counting only the time in ``_flush`` (the raw write and the tiers)."""
    real = cls._flush
    spent = 0.0

    def timed(self: Any) -> None:
        nonlocal spent
        t0 = time.process_time()
        real(self)
        spent += time.process_time() - t0

    cls._flush = timed
    try:
        _add(streams, cls)
    finally:
        cls._flush = real
    return spent


def _part_only(streams: list[list[HostSample]], cls: type[Any], part: str) -> float:
    """``_add``, counting only the time in one part: ``build`` (``TierSet.build``, the
    coarse tiers) or ``stage`` (``stage_row``, a row sample staged) of ``cls``'s modules."""
    mod = sys.modules[cls.__module__]
    if part == "build":
        owner: Any = sys.modules[mod.TierSet.__module__].TierSet
        name = "build"
    else:
        owner, name = mod, "stage_row"
    real = getattr(owner, name)
    spent = 0.0

    def timed(*a: Any) -> Any:
        nonlocal spent
        t0 = time.process_time()
        got = real(*a)
        spent += time.process_time() - t0
        return got

    setattr(owner, name, timed)
    try:
        _add(streams, cls)
    finally:
        setattr(owner, name, real)
    return spent


def _add_read(streams: list[list[HostSample]], cls: type[Any]) -> float:
    """Add, and after each sample the reads a detector pass makes of what is staged."""
    gc.collect()
    t0 = time.process_time()
    for ss in streams:
        h = cls()
        for s in ss:
            h.add(s)
            for g in h.gpu_indices():
                for pid in h.processes(g):
                    ser = h.series(proc_key(g, pid))
                    if ser is not None:
                        ser.latest()
            for name in h.disks():
                ser = h.series(disk_key(name, "util"))
                if ser is not None:
                    ser.latest()
    return time.process_time() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    feeds = [template(k, args.seconds)[1] for k in range(TEMPLATES)]
    streams = [_samples(*feeds[i % TEMPLATES]) for i in range(args.hosts)]
    n = sum(map(len, streams))
    before: type[Any] = HostHistoryBefore
    if args.before == "s8":
        from tests.history.tiers_before_s8 import HostHistoryBeforeS8
        before = HostHistoryBeforeS8
    elif args.before == "s9":
        from tests.history.before_s9 import HostHistory as HostHistoryBeforeS9
        before = HostHistoryBeforeS9
    elif args.before == "s10":
        from tests.history.before_s10 import HostHistory as HostHistoryBeforeS10
        before = HostHistoryBeforeS10
    elif args.before == "s12":
        from tests.history.before_s12 import HostHistory as HostHistoryBeforeS12
        before = HostHistoryBeforeS12
    elif args.before == "s13":
        from tests.history.before_s13 import HostHistory as HostHistoryBeforeS13
        before = HostHistoryBeforeS13
    out: dict[str, Any] = {"bench": "history_flush", "hosts": args.hosts,
                           "seconds": args.seconds, "passes": args.passes,
                           "load1_before": round(os.getloadavg()[0], 2)}
    parts: tuple[tuple[str, Any], ...] = (
        ("add", _add), ("read", _add_read), ("flush", _flush_only),
        ("build", lambda st, c: _part_only(st, c, "build")),
        ("stage", lambda st, c: _part_only(st, c, "stage")))
    for name, fn in parts:
        if args.only and name not in args.only:
            continue
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.passes):
            for side, cls in (("before", before), ("after", HostHistory)):
                times[side].append(1e6 * fn(streams, cls) / n)
        for side, ts in times.items():
            out[f"{name}_{side}_us"] = {"min": round(min(ts), 1),
                                        "median": round(statistics.median(ts), 1)}
        out[f"{name}_pairs"] = [[round(b, 1), round(a, 1)] for b, a in
                                zip(times["before"], times["after"], strict=True)]
        out[f"{name}_ratio_median"] = round(statistics.median(
            [a / b for a, b in zip(times["after"], times["before"], strict=True)]), 3)
    out["load1_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--before", choices=("block", "s8", "s9", "s10", "s12", "s13"), default="block",
                    help="block: the history before its block cut (history_before.py); s8: "
                         "today's history on the tiers before session 8 (tiers_before_s8.py); "
                         "s9: the history before session 9's raw matrices (before_s9/); s10: "
                         "the history before session 10 (before_s10/); s12: before session 12 "
                         "(before_s12/); s13: before session 13 (before_s13/)")
    ap.add_argument("--only", nargs="*", default=[], help="some of: add read flush (add's "
                    "time in _flush alone) build (in TierSet.build alone) stage (in "
                    "stage_row alone)")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
