"""Bytes a fleet's histories hold, today's against the history before session 9's raw matrices
(issue 38): ``tracemalloc`` in process, the same simulated wire v2 ticks (``bench_ingest``
templates, the row path) folded into one ``HostHistory`` a host, each side built and
measured alone (the other let go first).  Prints one JSON line: bytes a host, each side, and
``nbytes()`` as the histories count it.

    python tests/bench/bench_history_memory.py [--hosts 64] [--seconds 1200] [--before s9|s10]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.history import HostHistory
from tests.bench.bench_ingest import TEMPLATES, template
from tests.bench.bench_row_fold import _samples
from tests.history.before_s9 import HostHistory as HostHistoryBeforeS9


def _held(streams: list[Any], cls: type[Any]) -> tuple[float, float]:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    hs = []
    for ss in streams:
        h = cls()
        for s in ss:
            h.add(s)
        hs.append(h)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return held / len(hs), sum(h.nbytes() for h in hs) / len(hs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=1200)
    ap.add_argument("--before", choices=("s9", "s10"), default="s9",
                    help="s10: the history before session 10 (tests/history/before_s10/)")
    args = ap.parse_args()
    before: type[Any] = HostHistoryBeforeS9
    if args.before == "s10":
        from tests.history.before_s10 import HostHistory as HostHistoryBeforeS10
        before = HostHistoryBeforeS10
    feeds = [template(k, args.seconds)[1] for k in range(TEMPLATES)]
    out: dict[str, Any] = {"bench": "history_memory", "hosts": args.hosts,
                           "seconds": args.seconds}
    for side, cls in (("before", before), ("after", HostHistory),
                      ("before2", before), ("after2", HostHistory)):
        streams = [_samples(*feeds[i % TEMPLATES]) for i in range(args.hosts)]
        held, nb = _held(streams, cls)
        del streams
        out[f"{side}_bytes_per_host"] = round(held)
        out[f"{side}_nbytes_per_host"] = round(nb)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
