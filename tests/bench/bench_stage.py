"""The history's staging of a sample, packed (session 7) against the staging before (issue 38).

The same simulated wire v2 ticks as ``bench_history_flush`` (``bench_ingest.template``,
decoded as the console decodes them, so ``HostHistory.add`` takes the row path), in one
process, alternating pass by pass:

* ``stage``: ``stage_row`` alone, called with the arguments ``HostHistory.add`` gives it, for
  every sample of every host: today's (``after``) against main's before the pack
  (``tests/history/test_stage_pack.py``'s ``_old_stage_row``: ``before``);
* ``add``: ``HostHistory.add`` of every sample (flushes, tiers and all), with today's staging
  and with the staging before put in its place (as ``test_stage_pack`` does).

CPU (``process_time``) per host-sample; prints one JSON line: medians, mins and the median of
the per-pass ratios after/before.

    python tests/bench/bench_stage.py [--hosts 256] [--seconds 300] [--passes 5]
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

from probes.history import HostHistory
from probes.history import host as history_host
from probes.history.staged import stage_row
from probes.wire.compact import StaticEpoch
from probes.wire.samples import HostSample
from tests.bench.bench_ingest import TEMPLATES, template
from tests.bench.bench_row_fold import _samples
from tests.history.test_stage_pack import _old_stage, _old_stage_row


def _old_row(s: HostSample, row: Any, pids: Any, layout: tuple[int, ...], ok: float,
             lens: Any = None) -> Any:
    return _old_stage_row(s, row, pids, layout, ok)


def _stage_args(streams: list[list[HostSample]]) -> list[tuple[Any, ...]]:
    """``stage_row``'s arguments for every row sample, as ``HostHistory.add`` makes them."""
    out: list[tuple[Any, ...]] = []
    for ss in streams:
        h = HostHistory()
        for s in ss:
            h.add(s)
            epoch = s.static_epoch
            if s.wire_row is not None and isinstance(epoch, StaticEpoch) \
                    and epoch is h._pids_epoch:
                out.append((s, s.wire_row, h._pids, h._gpu_steps.layout,
                            h._staged_counts[-1] if h._staged_counts else 0.0, h._pid_lens))
    return out


def _stage(calls: list[tuple[Any, ...]], new: bool) -> float:
    gc.collect()
    t0 = time.process_time()
    if new:
        for c in calls:
            stage_row(*c)
    else:
        for c in calls:
            _old_stage_row(*c[:5])
    return time.process_time() - t0


def _add(streams: list[list[HostSample]], new: bool) -> float:
    saved = history_host.stage, history_host.stage_row
    if not new:
        history_host.stage, history_host.stage_row = _old_stage, _old_row  # type: ignore[assignment]
    try:
        gc.collect()
        t0 = time.process_time()
        for ss in streams:
            h = HostHistory()
            for s in ss:
                h.add(s)
        return time.process_time() - t0
    finally:
        history_host.stage, history_host.stage_row = saved


def run(args: argparse.Namespace) -> dict[str, Any]:
    feeds = [template(k, args.seconds)[1] for k in range(TEMPLATES)]
    streams = [_samples(*feeds[i % TEMPLATES]) for i in range(args.hosts)]
    n = sum(map(len, streams))
    calls = _stage_args(streams)
    out: dict[str, Any] = {"bench": "stage", "hosts": args.hosts, "seconds": args.seconds,
                           "passes": args.passes, "staged_rows": len(calls),
                           "load1_before": round(os.getloadavg()[0], 2)}
    for name, fn, count in (("stage", lambda new: _stage(calls, new), len(calls)),
                            ("add", lambda new: _add(streams, new), n)):
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.passes):
            for side in ("before", "after"):
                times[side].append(1e6 * fn(side == "after") / count)
        for side, ts in times.items():
            out[f"{name}_{side}_us"] = {"min": round(min(ts), 2),
                                        "median": round(statistics.median(ts), 2)}
        out[f"{name}_ratio_median"] = round(statistics.median(
            [a / b for a, b in zip(times["after"], times["before"], strict=True)]), 3)
    out["load1_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--passes", type=int, default=5)
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
