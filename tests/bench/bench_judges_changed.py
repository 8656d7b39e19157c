"""Judgements recomputed only for what changed (issue 38 item 1, session 7): the fold's
fabric reports and per-sample judges against judging every item, in one run.

Two fleets of ``--hosts`` hosts fold the same streams: **after** is ``HostState`` (a fabric
report judged again only when its ports, links, errors, hello or limits moved; a tick's
judges only when theirs did), **before** is ``tests.analysis.judges_before_s7`` (every
report and tick judged whole, main at ``8b3ea60``).  Host *i* replays
``bench_ingest``'s template *i mod 16* (wire v2: a quarter throttling, leaking or on an x8
link) and sends a ``fabric`` report every 30 s (staggered; the simulator's eight NDR ports
and 144 NVLinks, one template in 16 with a port going down).  Each chunk of
``--chunk`` simulated seconds is decoded (untimed, a reader per fleet), then folded by one
fleet and the other (alternating which goes first), second by second: the ticks timed apart
from the reports (``process_time``).  Per chunk pair: µs per tick and per report of each
fleet; printed, the medians over the pairs after ``--warm`` seconds and their ratios.

    python tests/bench/bench_judges_changed.py [--hosts 1024] [--seconds 240] [--chunk 30]
                                               [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import agent
from probes.analysis.allocation import HoldTracker
from probes.analysis.host_findings import HostFindings
from probes.analysis.item_findings import sample_judged
from probes.analysis.sample_judge import SampleJudge
from probes.config.fleet import HostSpec
from probes.fleet_state import HostState
from probes.wire.protocol import MessageReader
from probes.wire.samples import FabricSample, HostSample
from tests.analysis.judges_before_s7 import HostStateBefore
from tests.bench.bench_ingest import SCENARIOS, SIM_START_S, T0, TEMPLATES, template, wire
from tui.gc_policy import tune_for_streaming


def fabric_lines(k: int, seconds: int) -> tuple[list[bytes], set[int]]:
    """Template ``k``'s fabric as a report would say it at each second, and the seconds
    it changed (``ib-port-down`` on template 7: the agent sends those at once, else one
    report every 30 s)."""
    scen = "ib-port-down:3@120" if k % TEMPLATES == 7 else "healthy"
    sim = agent.Simulator(agent.parse_scenarios(scen), k + 1, f"t{k}")
    out, changed, last = [], set(), None
    for t in range(seconds):
        f = sim.fabric(SIM_START_S + t)
        if f is not None:
            if last is not None and f["ports"] != last["ports"]:
                changed.add(t)
            last = f
        assert last is not None
        out.append(wire(dict({"type": "fabric", "v": 1, "ts": T0 + t}, **last)))
    return out, changed


class Fleet:
    """One fleet of host states and their readers."""

    def __init__(self, cls: type[HostState], names: list[str], hellos: list[bytes]) -> None:
        self.states = [cls(HostSpec(name=n, expect_gpus=8)) for n in names]
        self.readers = [MessageReader() for _ in names]
        for state, reader, hello in zip(self.states, self.readers, hellos, strict=True):
            for msg in reader.feed(hello):
                state.apply(msg, T0)

    def decode(self, lines: list[list[bytes]]) -> list[list[tuple[HostState, Any]]]:
        """Each host's messages of each second, decoded by its own reader."""
        return [[(self.states[h], msg) for h, line in enumerate(second)
                 for msg in self.readers[h].feed(line)] for second in lines]

    @staticmethod
    def fold(seconds: list[list[tuple[HostState, Any]]]) -> tuple[float, int, float, int]:
        """(tick CPU s, ticks, report CPU s, reports)."""
        tick_s = report_s = 0.0
        ticks = reports = 0
        clock = time.process_time
        for items in seconds:
            samples = [(s, m) for s, m in items if isinstance(m, HostSample)]
            fabric = [(s, m) for s, m in items if isinstance(m, FabricSample)]
            t0 = clock()
            for state, msg in samples:
                state.apply(msg, msg.ts)
            t1 = clock()
            for state, msg in fabric:
                state.apply(msg, msg.ts)
            t2 = clock()
            tick_s += t1 - t0
            report_s += t2 - t1
            ticks += len(samples)
            reports += len(fabric)
        return tick_s, ticks, report_s, reports


PROFILED = frozenset({"_apply_sample", "fabric_findings_before", "sample_judged",
                      "fabric_findings_changed", "judged", "take_sample", "set_fabric"})
"""Functions whose cumulative time ``--profile`` sums (cProfile of the folds after the
warm-up, each fleet's chunk folded under it instead of timed)."""
JUDGED_HOSTS = 64
PASSES = 6


def judges_alone(hosts: list[tuple[HostState, list[Any]]]) -> dict[str, float]:
    """µs per tick of the per-sample judges and ``take_sample`` alone over the steady ticks
    of the first ``JUDGED_HOSTS`` hosts (the after fleet's decode; each host's own history),
    a fresh ``HoldTracker`` and ``HostFindings`` per host and pass: ``sample_judged`` every
    tick (before) against ``SampleJudge`` (after), the ways alternating pass by pass; the
    median pass of each, over all those hosts and per template scenario."""
    spent: dict[str, list[float]] = {}
    groups: dict[str, list[tuple[HostState, list[Any]]]] = {"": hosts}
    for state, samples in hosts:
        scenario = SCENARIOS[int(state.name[1:]) % TEMPLATES % len(SCENARIOS)]
        groups.setdefault("_" + scenario.split(":")[0], []).append((state, samples))
    for p in range(PASSES):
        for way in (("before", "after") if p % 2 == 0 else ("after", "before")):
            for group, members in groups.items():
                n = sum(len(samples) for _, samples in members)
                t0 = time.process_time()
                for state, samples in members:
                    holds, kept, judge = HoldTracker(), HostFindings(), SampleJudge()
                    name, hello, history = state.name, state.hello, state.history
                    limits, expect, peers = state.limits.detectors, state.spec.expect_gpus, None
                    for s in samples:
                        holds.update(s)
                        found = sample_judged(name, hello, s, history, holds, limits, expect,
                                              peers) if way == "before" else \
                            judge.judged(name, hello, s, history, holds, limits, expect, peers)
                        kept.take_sample(found, s.ts)
                spent.setdefault(f"{way}_judges{group}_us", []).append(
                    1e6 * (time.process_time() - t0) / max(n, 1))
    return {k: round(statistics.median(v), 2) for k, v in spent.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.warm + args.seconds
    ticks = [template(k, total)[1] for k in range(TEMPLATES)]  # v2: (hello, [tick bytes])
    reports = [fabric_lines(k, total) for k in range(TEMPLATES)]
    names = [f"h{i:04d}" for i in range(args.hosts)]
    hellos = [ticks[i % TEMPLATES][0] for i in range(args.hosts)]
    tune_for_streaming()
    fleets = {"before": Fleet(HostStateBefore, names, hellos),
              "after": Fleet(HostState, names, hellos)}

    def lines(t: int) -> list[bytes]:
        """Every host's bytes of second ``t``: its tick, and its report every 30 s (host
        *i* at seconds ``30n - i``: the fleet's reports spread) or on a change."""
        out = []
        for i in range(args.hosts):
            k = i % TEMPLATES
            line = ticks[k][1][t]
            if (t + i) % 30 == 0 or t in reports[k][1]:
                line += reports[k][0][t]
            out.append(line)
        return out

    pairs: list[dict[str, float]] = []
    kept: dict[str, tuple[HostState, list[Any]]] = {}
    profiled: dict[str, dict[str, float]] = {}
    gc.collect()
    for n, start in enumerate(range(0, total, args.chunk)):
        chunk = [lines(t) for t in range(start, min(start + args.chunk, total))]
        order = ("before", "after") if n % 2 == 0 else ("after", "before")
        got: dict[str, float] = {}
        for side in order:
            decoded = fleets[side].decode(chunk)
            if args.profile and start >= args.warm:
                prof = cProfile.Profile()
                prof.runcall(Fleet.fold, decoded)
                spent = profiled.setdefault(side, {})
                for (path, _, fn), row in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
                    if fn in PROFILED and (fn != "judged" or path.endswith("sample_judge.py")):
                        spent[fn] = round(spent.get(fn, 0.0) + row[3], 3)
                spent["all"] = round(spent.get("all", 0.0) + pstats.Stats(prof).total_tt, 3)  # type: ignore[attr-defined]
                continue
            if side == "after" and start >= args.warm:
                for items in decoded:
                    for state, msg in items:
                        if isinstance(msg, HostSample) and (
                                len(kept) < JUDGED_HOSTS or state.name in kept):
                            kept.setdefault(state.name, (state, []))[1].append(msg)
            tick_s, nt, report_s, nr = Fleet.fold(decoded)
            got[f"{side}_tick_us"] = 1e6 * tick_s / max(nt, 1)
            got[f"{side}_report_us"] = 1e6 * report_s / max(nr, 1)
            got["reports"] = nr
        if start >= args.warm and not args.profile:
            pairs.append(got)
    if args.profile:
        return {"bench": "judges_changed", "profile": True, "hosts": args.hosts,
                "load1": round(os.getloadavg()[0], 2), "cumulative_s": profiled}
    med = {k: round(statistics.median(p[k] for p in pairs), 2) for k in pairs[0]}
    judges = judges_alone(list(kept.values()))
    return {
        "bench": "judges_changed",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()}-core {platform.machine()}, python "
                   f"{platform.python_version()}", "load1": round(os.getloadavg()[0], 2),
        "hosts": args.hosts, "seconds": args.seconds, "warm_s": args.warm, "pairs": len(pairs),
        **{f"median_{k}": v for k, v in med.items()},
        "tick_ratio": round(med["before_tick_us"] / med["after_tick_us"], 2),
        "report_ratio": round(med["before_report_us"] / med["after_report_us"], 2),
        **judges,
        "judges_ratio": round(judges["before_judges_us"] / judges["after_judges_us"], 2),
        "per_pair": [{k: round(v, 1) for k, v in p.items()} for p in pairs],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=240)
    ap.add_argument("--warm", type=int, default=60)
    ap.add_argument("--chunk", type=int, default=30)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the folds instead: cumulative s of the judging functions")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
