"""A wire v2 tick kept as its row against the eager sample, in one process (issue 38 item 1).

The same simulated ticks as ``bench_fold`` (``bench_ingest.template``), every pass over them
alternating the two ways, CPU (``process_time``) per host-sample:

* ``decode``: ``MessageReader.feed`` with the GPUs built on first read (``lazy``) against
  the eager build every GPU had before (``eager``: ``CompactStream._fast`` as it was, kept
  in ``tests/history/test_row_fold.py``);
* ``add``: ``HostHistory.add`` of the row samples (``lazy``: staged and folded from the row)
  against ``dataclasses.replace`` copies of the eager ones (``eager``: no row, the path
  every sample took before);
* ``decode_add_read``: feed + add + one read of ``sample.gpus`` (what the console pays while
  its per-tick judges still read the GPUs) against eager feed + add.

    python tests/bench/bench_row_fold.py [--hosts 64] [--seconds 120] [--passes 7] [--only add]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.history import HostHistory
from probes.wire import compact
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.bench.bench_ingest import TEMPLATES, template
from tests.history.test_row_fold import _eager_fast
from tui.gc_policy import tune_for_streaming


def _samples(hello: bytes, chunks: list[bytes]) -> list[HostSample]:
    reader = MessageReader()
    reader.feed(hello)
    return [m for c in chunks for m in reader.feed(c) if isinstance(m, HostSample)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    feeds = [template(k, args.seconds)[1] for k in range(TEMPLATES)]
    hosts = [feeds[i % TEMPLATES] for i in range(args.hosts)]
    n = args.hosts * args.seconds
    real = compact.CompactStream._fast
    tune_for_streaming()

    def eager(on: bool) -> None:
        compact.CompactStream._fast = _eager_fast if on else real  # type: ignore[method-assign]

    def decode(lazy: bool) -> float:
        eager(not lazy)
        readers = [MessageReader() for _ in hosts]
        for r, (hello, _) in zip(readers, hosts, strict=True):
            r.feed(hello)
        t0 = time.process_time()
        for r, (_, chunks) in zip(readers, hosts, strict=True):
            for c in chunks:
                r.feed(c)
        t = time.process_time() - t0
        eager(False)
        return t

    def add(lazy: bool) -> float:
        eager(not lazy)
        streams = [_samples(h, c) for h, c in hosts]
        eager(False)
        if not lazy:
            streams = [[dataclasses.replace(s) for s in ss] for ss in streams]
        gc.collect()
        t0 = time.process_time()
        for ss in streams:
            h = HostHistory()
            for s in ss:
                h.add(s)
        return time.process_time() - t0

    def decode_add_read(lazy: bool) -> float:
        eager(not lazy)
        readers = [MessageReader() for _ in hosts]
        for r, (hello, _) in zip(readers, hosts, strict=True):
            r.feed(hello)
        t0 = time.process_time()
        for r, (_, chunks) in zip(readers, hosts, strict=True):
            h = HostHistory()
            for c in chunks:
                for m in r.feed(c):
                    if isinstance(m, HostSample):
                        h.add(m)
                        m.gpus  # noqa: B018 (the judges' read)
        t = time.process_time() - t0
        eager(False)
        return t

    out: dict[str, Any] = {"bench": "row_fold", "hosts": args.hosts, "seconds": args.seconds,
                           "passes": args.passes, "load1_before": round(os.getloadavg()[0], 2)}
    parts: dict[str, Callable[[bool], float]] = {
        "decode": decode, "add": add, "decode_add_read": decode_add_read}
    for name, fn in parts.items():
        if args.only and name not in args.only:
            continue
        times: dict[str, list[float]] = {"eager": [], "lazy": []}
        for _ in range(args.passes):
            for side in ("eager", "lazy"):
                times[side].append(1e6 * fn(side == "lazy") / n)
        for side, ts in times.items():
            out[f"{name}_{side}_us"] = {"min": round(min(ts), 1),
                                        "median": round(statistics.median(ts), 1)}
        out[f"{name}_ratio_median"] = round(statistics.median(
            [a / b for a, b in zip(times["lazy"], times["eager"], strict=True)]), 3)
    out["load1_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=[], help="some of: decode add decode_add_read")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
