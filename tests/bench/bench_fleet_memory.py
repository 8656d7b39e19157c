"""Where the console's memory goes at N hosts: the UI process's fleet state, fed in process.

``bench_fold``'s feed (the agent simulator's 16 templates over wire v2, host *i* replaying
template *i mod 16*) through ``MessageReader.feed`` and ``FleetState.apply`` for
``--seconds`` simulated seconds, then:

* ``rss_*_mb``: the process's RSS after imports, after the templates are made, after the
  hellos, and after the fold (``/proc/self/status``);
* ``per_host_kb``: for each attribute of a ``HostState`` (its hello first, then its
  history's, then the rest) and the host's ``MessageReader``, the bytes reachable from it
  and from nothing measured before it (``sys.getsizeof`` walk; what every host shares, the
  limits and the history's shared keys, is counted first and left out), averaged over the
  hosts;
* ``--trace N``: the N largest ``tracemalloc`` sites of what the fold allocated and kept.

    python tests/bench/bench_fleet_memory.py [--hosts 1024] [--seconds 90] [--trace 25]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _children(o: Any) -> list[Any]:
    return gc.get_referents(o)


SKIP_TYPES = (type, type(sys), type(len), type(rss_mb))


def deep_size(root: Any, seen: set[int]) -> int:
    """Bytes reachable from ``root`` not already in ``seen`` (modules, classes, functions
    and code are not followed: they are the program, not the data)."""
    total = 0
    stack = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, SKIP_TYPES):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        stack.extend(_children(o))
    return total


def walk(fleet: Any, names: list[str], readers: list[Any]) -> dict[str, float]:
    """Per-host bytes by attribute (KB, mean over the hosts)."""
    seen: set[int] = set()
    # what every host shares (limits, specs' defaults, interned strings) is counted first
    deep_size(fleet.limits, seen)
    from probes.history import keys
    deep_size(getattr(keys, "_shared", {}), seen)
    parts: dict[str, int] = {}
    for name in names:
        host = fleet.hosts[name]
        seen.add(id(host))
        if hasattr(host, "__dict__"):
            seen.add(id(host.__dict__))
        hist = host.history
        seen.add(id(hist))
        if hasattr(hist, "__dict__"):
            seen.add(id(hist.__dict__))
        items: list[tuple[str, Any]] = [
            (f"history.{k}", v) for k, v in (vars(hist).items() if hasattr(hist, "__dict__")
                                              else ((s, getattr(hist, s)) for s in hist.__slots__))]
        items.insert(0, ("hello", host.hello))
        items += [(k, v) for k, v in vars(host).items() if k not in ("history", "hello")]
        for key, value in items:
            parts[key] = parts.get(key, 0) + deep_size(value, seen)
    parts["reader"] = sum(deep_size(r, seen) for r in readers)
    n = max(len(names), 1)
    return {k: round(v / n / 1024, 2) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState
    from probes.wire.protocol import MessageReader
    from tests.bench.bench_ingest import T0, TEMPLATES, template
    from tui.gc_policy import tune_for_streaming

    out: dict[str, Any] = {"bench": "fleet_memory", "hosts": args.hosts,
                           "seconds": args.seconds, "date": time.strftime(
                               "%Y-%m-%d %H:%M UTC", time.gmtime())}
    out["rss_imports_mb"] = round(rss_mb(), 1)
    feed = [template(k, args.seconds)[1] for k in range(TEMPLATES)]
    out["rss_templates_mb"] = round(rss_mb(), 1)
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    if args.trace:
        tracemalloc.start(1)
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(feed[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)
    gc.collect()
    out["rss_hellos_mb"] = round(rss_mb(), 1)
    for t in range(args.seconds):
        for i, name in enumerate(names):
            for msg in readers[i].feed(feed[i % TEMPLATES][1][t]):
                fleet.apply(name, msg, T0 + t)
    gc.collect()
    out["rss_folded_mb"] = round(rss_mb(), 1)
    if args.trace:
        snap = tracemalloc.take_snapshot()
        tracemalloc.stop()
        stats = snap.statistics("lineno")
        out["traced_mb"] = round(sum(s.size for s in stats) / 2**20, 1)
        out["trace"] = [f"{s.size / 2**20:7.2f} MB {s.count:8d} "
                        f"{s.traceback[0].filename.rsplit('/', 3)[-1]}:{s.traceback[0].lineno}"
                        for s in stats[:args.trace]]
    out["per_host_kb"] = walk(fleet, names, readers)
    out["per_host_kb_total"] = round(sum(out["per_host_kb"].values()), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=90)
    ap.add_argument("--trace", type=int, default=0)
    args = ap.parse_args()
    out = run(args)
    trace = out.pop("trace", [])
    print(json.dumps(out))
    for line in trace:
        print(line)


if __name__ == "__main__":
    main()
