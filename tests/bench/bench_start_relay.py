"""A host's start through a collector and the console, in process (issue 38 item 5, session 11).

What each host sends as it connects (the agent's own recording, as ``standin_server`` replays
it: hello, fabric report, ``static``, then ticks) goes through the real collector side — its
sessions' reader and relay (``RelayReader``, ``Relay``: decode, check, frame) — and the real
console side — ``unframe``, ``CollectorBackend._fold`` (the relayed hello, the lines' decode,
the relayed ticks' samples) and ``FleetState.apply`` (the fold: the hello's layout, the fabric
report's findings, the first samples).  CPU (``process_time``) per host on each side, median
of ``--passes`` passes over ``--hosts`` hosts (``--ticks`` ticks each).

``--code A,B`` runs the passes from each checkout in turn, alternating (each a subprocess
with its own code on the same recording; the recording is made once, ``--recording``), so
before/after pairs share the machine's load.

    python tests/bench/bench_start_relay.py [--hosts 1024] [--passes 5] [--code A,B]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

ARGS = ("--wire", "2")
"""The wire options the console negotiates (the recording's key)."""


def recording(path: Path, templates: int = 8) -> list[Any]:
    """The agent's start-up lines (``standin_server.record``), made once into ``path``."""
    if path.exists():
        with path.open("rb") as f:
            return list(pickle.load(f))
    from tests.bench.standin_server import record

    got = record(ARGS, templates, 4)
    out = [(t.preamble, t.samples) for t in got]
    with path.open("wb") as f:
        pickle.dump(out, f)
    return out


def one_pass(hosts: int, ticks: int, tmpl: list[Any]) -> dict[str, float]:
    """Both sides' CPU per host (µs) for one pass over ``hosts`` fresh hosts."""
    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState
    from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
    from probes.transport.collector_wire import CollectorJob, check_batch, unframe
    from probes.transport.host_clock import clocked
    from probes.transport.relay import Relay
    from probes.wire.events import Connected

    specs = tuple(HostSpec(name=f"h{i:04d}") for i in range(hosts))
    job = CollectorJob(specs, 32, 0.05)
    frames: list[bytes] = []
    r, w = os.pipe()

    async def collector() -> float:
        relay = Relay(job, w)
        relay._send = frames.append  # type: ignore[method-assign,assignment]
        emit = clocked(relay.emit)
        t0 = time.process_time()
        for i, s in enumerate(specs):
            preamble, samples = tmpl[i % len(tmpl)]
            reader = relay.new_reader(s.name)
            emit(s.name, Connected(time.time()))
            lines = list(preamble) + [ln for tick in samples[:ticks] for ln in tick]
            for m in reader.feed(b"\n".join(lines) + b"\n"):
                emit(s.name, m)
            if i % 32 == 31:  # a frame per connect step, as the gate lets 32 through
                relay.flush()
        relay.flush()
        return time.process_time() - t0

    try:
        c_cpu = asyncio.run(collector())
    finally:
        os.close(r)
        os.close(w)
    fleet = FleetState(list(specs))

    def fold(host: str, item: Any) -> None:
        fleet.apply(host, item, time.time())

    async def console() -> float:
        shard = _Shard(1, job)
        slices = FoldSlices(budget_s=1e9)
        emit = clocked(fold)
        t0 = time.process_time()
        for f in frames:
            await CollectorBackend._fold(shard, check_batch(unframe(f[4:]), hosts), emit,
                                         slices)
        return time.process_time() - t0

    u_cpu = asyncio.run(console())
    assert all(h.last is not None for h in fleet.hosts.values())
    return {"collector_us": c_cpu / hosts * 1e6, "console_us": u_cpu / hosts * 1e6,
            "tree_us": (c_cpu + u_cpu) / hosts * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--ticks", type=int, default=1)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--code", help="checkouts to alternate, comma-separated")
    ap.add_argument("--recording", default=os.path.join(tempfile.gettempdir(),
                                                       "rigwatch-bench-start-relay.pkl"))
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    tmpl = recording(Path(args.recording))
    if args.one:
        print(json.dumps(one_pass(args.hosts, args.ticks, tmpl)))
        return
    codes = [Path(c).resolve() for c in args.code.split(",")] if args.code else [REPO]
    runs: list[dict[str, Any]] = []
    for p in range(args.passes):
        for code in codes if p % 2 == 0 else codes[::-1]:
            out = subprocess.run(
                [sys.executable, str(code / "tests/bench/bench_start_relay.py"), "--one",
                 "--hosts", str(args.hosts), "--ticks", str(args.ticks),
                 "--recording", args.recording],
                cwd=code, env=dict(os.environ, PYTHONPATH=str(code)), capture_output=True,
                check=True, text=True).stdout
            got = {"code": str(code), "pass": p, "load1": round(os.getloadavg()[0], 1),
                   **{k: round(v, 1) for k, v in json.loads(out).items()}}
            print(json.dumps(got), file=sys.stderr, flush=True)
            runs.append(got)
    print(json.dumps({"hosts": args.hosts, "ticks": args.ticks, "runs": runs, "median": {
        str(c): {k: statistics.median(r[k] for r in runs if r["code"] == str(c))
                 for k in ("collector_us", "console_us", "tree_us")} for c in codes}}))


if __name__ == "__main__":
    main()
