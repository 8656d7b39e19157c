"""Decode + fold of wire v2 ticks against the floor of a Python fold, in one run (issue 38).

The agent's own simulator makes 16 hosts' hello and ticks (``bench_ingest.template``: a
quarter of them throttling, leaking or on an x8 link); host *i* replays template *i mod 16*.
Every simulated second each host's v2 bytes go through the console's path:
``MessageReader.feed`` (split + typed decode) and ``FleetState.apply`` (history, detectors,
findings).  Measured, CPU (``process_time``) per host-sample, over the same ticks:

* ``fold_us``: feed + apply, after a warm-up of ``--warm`` simulated seconds (start-up:
  the first detector runs, tiers filling) which is reported apart as ``warm_us``;
* ``decode_us``: feed alone (a fresh reader per host, the same bytes);
  ``collector_reader_us`` the same with a collector's reader, which checks each tick and
  builds no sample (``builds_ticks``; before issue 38 item 2 it decoded as the console);
* ``floor_us``: each tick decoded once into the console's typed rows (``SampleRow``) and
  every GPU's moving numbers appended to a per-GPU, per-field column (``bench_fleet``'s
  ``fold_floor_us_per_hs``), host by host as a fleet sends them;
* ``ratio``: ``fold_us / floor_us``;
* ``findings_us`` / ``findings_whole_us``: the per-tick findings alone (``sample_findings``
  and ``stray_process_findings``, the static half judged once per static epoch) against
  judging every field each tick (``judge_whole_sample``, the strays of a copy without its
  epoch), over the same decoded steady ticks of the first 32 hosts, 5 passes;
* ``judges_us`` / ``judges_whole_us``: every per-tick judge of ``HostState._apply_sample``
  (``HoldTracker.update``, ``sample_findings``, ``host_findings``,
  ``idle_allocation_findings``, ``stray_process_findings``) on the same ticks as decoded
  (a fast-path tick's row and static epoch: ``tick_gpus``), and on copies without row or
  epoch (the sample's GPUs, everything judged each tick), a fresh ``HoldTracker`` per host
  and pass, the host's own history;
* ``findings_gpus_us`` / ``judges_gpus_us``: the same on copies that keep the static epoch
  but not the row (the judges read ``sample.gpus``, as before they read the row); the
  three ways alternate pass by pass.

``--profile N``: cProfile of the steady fold, the N largest cumulative and self entries.

    python tests/bench/bench_fold.py [--hosts 256] [--seconds 120] [--warm 60] [--profile 25]
                                     [--history now|before_s9|before_s10|before_s12|before_s13]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import io
import json
import os
import platform
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgspec

from probes.analysis.allocation import (
    HoldTracker,
    idle_allocation_findings,
    stray_process_findings,
)
from probes.analysis.findings import host_findings, judge_whole_sample, sample_findings
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.compact import SampleRow
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tui.gc_policy import tune_for_streaming


class _Checking(MessageReader):
    builds_ticks = False  # as the collector's ``RelayReader``


def floor(ticks: list[list[bytes]], hosts: int, seconds: range) -> float:
    """CPU seconds of the floor: typed decode and a per-field column append."""
    decode = msgspec.json.Decoder(SampleRow).decode
    astuple = msgspec.structs.astuple
    columns: list[dict[tuple[int, int], list[object]]] = [{} for _ in range(hosts)]
    t0 = time.process_time()
    for t in seconds:
        for h in range(hosts):
            cols = columns[h]
            for line in ticks[h % TEMPLATES][t]:
                for i, gpu in enumerate(decode(line).gpus):
                    for k, v in enumerate(astuple(gpu)[:10]):
                        col = cols.get((i, k))
                        if col is None:
                            col = cols[(i, k)] = []
                        col.append(v)
    return time.process_time() - t0


def _rowless(sample: HostSample) -> HostSample:
    """The sample with its static epoch but no row: the judges read its GPUs (as before
    issue 38's judges-read-the-row)."""
    out = object.__new__(HostSample)  # its GPUs built here (a row sample's are lazy)
    object.__setattr__(out, "__dict__", {**sample.__dict__, "gpus": sample.gpus,
                                         "wire_row": None})
    return out


def findings_alone(fleet: FleetState, names: list[str], feed: list[Any], steady: range
                   ) -> dict[str, float]:
    """µs per host-sample: the findings judged per static epoch (``findings``), the same on
    the samples' GPUs instead of their rows (``findings_gpus``), and judged whole; every
    per-tick judge (``judges``) the same three ways.  The ways alternate pass by pass."""
    work = []
    for i, name in enumerate(names):
        reader = MessageReader()
        reader.feed(feed[i % TEMPLATES][0])
        host = fleet.hosts[name]
        for t in range(steady.stop):
            for msg in reader.feed(feed[i % TEMPLATES][1][t]):
                if isinstance(msg, HostSample) and t >= steady.start:
                    work.append((name, host.hello, {"": msg, "_gpus": _rowless(msg),
                                                    "_whole": dataclasses.replace(msg)},
                                 host.limits.detectors))
    spent: dict[str, float] = {}

    def findings(way: str) -> None:
        judge = judge_whole_sample if way == "_whole" else sample_findings
        t0 = time.process_time()
        for name, hello, samples, limits in work:
            s = samples[way]
            judge(name, hello, s, limits)
            stray_process_findings(name, s, limits)
        spent["findings" + way] = spent.get("findings" + way, 0.0) + time.process_time() - t0

    def judges(way: str) -> None:
        holds = {name: HoldTracker() for name in names}
        t0 = time.process_time()
        for name, hello, samples, limits in work:
            s = samples[way]
            held, history = holds[name], fleet.hosts[name].history
            held.update(s)
            (sample_findings(name, hello, s, limits) + host_findings(name, s)
             + idle_allocation_findings(name, history, s, held, limits)
             + stray_process_findings(name, s, limits))
        spent["judges" + way] = spent.get("judges" + way, 0.0) + time.process_time() - t0

    for _ in range(5):
        for way in ("", "_gpus", "_whole"):
            findings(way)
            judges(way)
    return {k + "_us": round(1e6 * v / (5 * max(len(work), 1)), 2) for k, v in spent.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.warm + args.seconds
    both = [template(k, total) for k in range(TEMPLATES)]
    feed = [b[1] for b in both]  # v2: (hello, [tick bytes with any static message])
    ticks = [[[ln for ln in chunk.splitlines() if ln.startswith(b"[")] for chunk in ls]
             for _, ls in feed]
    names = [f"h{i:04d}" for i in range(args.hosts)]
    tune_for_streaming()
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(feed[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)
    hosts = [(name, readers[i], feed[i % TEMPLATES][1]) for i, name in enumerate(names)]

    def fold(seconds: range) -> float:
        t0 = time.process_time()
        for t in seconds:
            now = T0 + t
            for name, reader, lines in hosts:
                for msg in reader.feed(lines[t]):
                    fleet.apply(name, msg, now)
        return time.process_time() - t0

    gc.collect()
    warm = fold(range(args.warm))
    steady = range(args.warm, total)
    prof = None
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
    folded = fold(steady)
    if prof is not None:
        prof.disable()
    # Decode alone: fresh readers over the same bytes; and a collector's reader (checks
    # each tick, builds no sample: the console decodes it).
    def decode_all(reader: type[MessageReader]) -> float:
        dreaders = [reader() for _ in names]
        for i in range(args.hosts):
            dreaders[i].feed(feed[i % TEMPLATES][0])
        t0 = time.process_time()
        for t in range(total):
            for i in range(args.hosts):
                dreaders[i].feed(feed[i % TEMPLATES][1][t])
        return time.process_time() - t0

    decode = decode_all(MessageReader)
    judged = findings_alone(fleet, names[:32], feed, steady)
    check = decode_all(_Checking)
    base = floor(ticks, args.hosts, steady)
    n = args.hosts * args.seconds
    out: dict[str, Any] = {
        "bench": "fold", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()}-core {platform.machine()}, python "
                   f"{platform.python_version()}", "load1": round(os.getloadavg()[0], 2),
        "hosts": args.hosts, "history": getattr(args, "history", "now"),
        "seconds": args.seconds, "warm_s": args.warm,
        "warm_us": round(1e6 * warm / max(args.hosts * args.warm, 1), 1),
        "fold_us": round(1e6 * folded / n, 1),
        "decode_us": round(1e6 * decode / (args.hosts * total), 1),
        "collector_reader_us": round(1e6 * check / (args.hosts * total), 1),
        "floor_us": round(1e6 * base / n, 1),
        "findings": sum(len(h.findings()) for h in fleet.hosts.values()),
    }
    out["ratio"] = round(out["fold_us"] / out["floor_us"], 2)
    out.update(judged)
    if prof is not None:
        for sort in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(sort).print_stats(args.profile)
            out[f"profile_{sort}"] = buf.getvalue()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--warm", type=int, default=60)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--history", choices=("now", "before_s9", "before_s10", "before_s12",
                                               "before_s13"),
                    default="now",
                    help="before_s9: the fleet's hosts keep the history before session 9's "
                         "raw matrices (tests/history/before_s9/), to alternate in one tree; "
                         "before_s10: the history before session 10 (before_s10/); before_s12: "
                         "before session 12 (before_s12/); before_s13: before session 13 "
                         "(before_s13/)")
    args = ap.parse_args()
    if args.history == "before_s9":
        import probes.fleet_state
        from tests.history.before_s9 import HostHistory as HostHistoryBeforeS9
        probes.fleet_state.HostHistory = HostHistoryBeforeS9  # type: ignore[misc,assignment]
    elif args.history == "before_s10":
        import probes.fleet_state
        from tests.history.before_s10 import HostHistory as HostHistoryBeforeS10
        probes.fleet_state.HostHistory = HostHistoryBeforeS10  # type: ignore[misc,assignment]
    elif args.history == "before_s12":
        import probes.fleet_state
        from tests.history.before_s12 import HostHistory as HostHistoryBeforeS12
        probes.fleet_state.HostHistory = HostHistoryBeforeS12  # type: ignore[misc,assignment]
    elif args.history == "before_s13":
        import probes.fleet_state
        from tests.history.before_s13 import HostHistory as HostHistoryBeforeS13
        probes.fleet_state.HostHistory = HostHistoryBeforeS13  # type: ignore[misc,assignment]
    out = run(args)
    profiles = {k: out.pop(k) for k in list(out) if k.startswith("profile_")}
    print(json.dumps(out))
    for text in profiles.values():
        print(text)


if __name__ == "__main__":
    main()
