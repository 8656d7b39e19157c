"""What a host's fold costs per sample as the host ages (issue 38, session 9).

A few of the agent's simulated hosts (``probes.agent.simulator``: healthy, the demo's hung
collective ``nccl-timeout@1500``, an idle allocation (a job holding eight GPUs at 0 %),
throttling, leaking, a starved input) are replayed as wire v2 for ``--hours`` simulated hours
at ``--interval`` seconds, host by host, in process.  Each tick is decoded and added to the
host's one ``HostHistory``; then two folds judge it over that same history, alternating
which goes first tick by tick:

* ``before``: the detector schedule, idle allocations and per-sample judges as on main at
  session 9's start (``tests/analysis/detectors_before_s9.py``, ``spin_before_s9.py``,
  ``allocation_before_s9.py``, ``sample_judge_before_s9.py``);
* ``after``: today's (``probes.analysis``).

CPU (``process_time``) per sample, by hour of the host's age: the history's add (shared),
each detector (its runs spread over all the samples), the idle allocations, the per-sample
judges (idle allocations included), and the fold (add + schedule + judges) of each side.
With ``--check`` each tick's detected findings and judged findings of the two sides are
compared (codes, onsets, severities, text: the whole ``Finding``) and the first difference
stops the run.

    python tests/bench/bench_fold_age.py [--hours 6] [--interval 1] [--hosts hang,idle,...]
                                         [--check] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import agent
from probes.agent.output import CompactEncoder, compact_columns
from probes.agent.simulator import Simulator
from probes.analysis import detectors as det_now
from probes.analysis import sample_judge as judge_now
from probes.analysis.allocation import HoldTracker
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, HostSample
from tests.analysis import allocation_before_s9 as alloc_before
from tests.analysis import detectors_before_s9 as det_before
from tests.analysis import sample_judge_before_s9 as judge_before

T0 = 1_800_000_000.0


class IdleSimulator(Simulator):
    """A job holds every GPU and computes on none: utilisation 0 % (``gpu_idle``)."""

    def _util(self, t: float) -> float:
        return -10.0


class FlipSimulator(Simulator):
    """Busy, then idle for 40 min, then busy: an idle allocation found and dropped."""

    def _util(self, t: float) -> float:
        return -10.0 if (t // 2400) % 3 == 1 else 96.0


HOSTS: dict[str, tuple[str, type[Simulator]]] = {
    "healthy": ("healthy", Simulator),
    "hang": ("nccl-timeout@1500", Simulator),
    "idle": ("healthy", IdleSimulator),
    "flip": ("healthy", FlipSimulator),
    "throttle": ("throttle:5", Simulator),
    "leak": ("leak:3", Simulator),
    "starved": ("disk-saturated", Simulator),
}
"""Name → (simulator scenarios, simulator): the demo's gpu-b03 is ``hang``."""


def wire(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def stream(name: str, seconds: float, interval: float, seed: int = 1,
           sim: Simulator | None = None, gaps: float = 0.0) -> Iterator[bytes]:
    """The host's v2 hello, then its ticks, ``interval`` simulated seconds apart (``sim``:
    another simulator; ``gaps``: the chance a tick is followed by 20–900 s of silence, a
    third of them then by three ticks stamped 60–90 s before the time reached, as after a
    restart)."""
    if sim is None:
        scen, cls = HOSTS[name]
        sim = cls(agent.parse_scenarios(scen), seed, name)
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 2, "agent": "bench", "ts": T0, "host": facts,
                             "gpus": gpus, "probes": {"simulator": {"available": True}},
                             "simulated": [s["name"] for s in sim.scen],
                             "columns": compact_columns()}
    hello.update(sim.topology())
    yield wire(hello)
    encoder = CompactEncoder()
    rng = random.Random(seed)
    t, seq = 0.0, 0
    while t < seconds:
        g, h, disks = sim.sample(t)
        msg = {"type": "sample", "v": 1, "seq": seq, "ts": T0 + t, "gpus": g, "host": h,
               "disks": disks}
        yield b"".join(wire(m) for m in encoder.encode(msg))
        seq += 1
        t += interval
        if gaps and rng.random() < gaps:
            t += rng.uniform(20.0, 900.0)
            if rng.random() < 0.3:  # a restart: a few samples stamped before the newest
                for back in (90.0, 62.0, 60.0):
                    msg = dict(msg, seq=0, ts=T0 + t - back)
                    yield b"".join(wire(m) for m in encoder.encode(msg))


@dataclass
class Side:
    """One fold's judging state for one host, and what it cost, by hour of age."""

    name: str
    schedule: Any
    holds: Any
    judge: Any
    cost: dict[str, list[float]] = field(default_factory=dict)
    codes: Counter[str] = field(default_factory=Counter)
    """With ``check``: ticks at which each finding's code was detected or judged."""

    def add(self, what: str, hour: int, dt: float) -> None:
        row = self.cost.setdefault(what, [])
        while len(row) <= hour:
            row.append(0.0)
        row[hour] += dt


def timed(fn: Callable[..., Any], name: str, clock: list[Any]) -> Callable[..., Any]:
    """``fn`` that adds its CPU time to the side and hour ``clock`` names."""
    def run(*args: Any, **kw: Any) -> Any:
        t = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            side, hour = clock
            if side is not None:
                side.add(name, hour, time.process_time() - t)
    run.__name__ = getattr(fn, "__name__", name)
    return run


CLOCK: list[Any] = [None, 0]
"""(side, hour) the wrapped detectors and idle allocations charge."""


def instrument() -> None:
    """Wrap each module's detectors and idle allocations so that they charge ``CLOCK``."""
    for mod in (det_now, det_before):
        if getattr(mod, "_instrumented", False):
            continue
        wrapped = {d: timed(d, d.__name__.removeprefix("detect_"), CLOCK)
                   for d in mod.DETECTORS}
        mod.DETECTORS = tuple(wrapped[d] for d in mod.DETECTORS)  # type: ignore[attr-defined]
        mod.EVERY_S = {wrapped[d]: e for d, e in mod.EVERY_S.items()}  # type: ignore[attr-defined]
        mod._instrumented = True  # type: ignore[attr-defined]
    for jmod in (judge_now, judge_before):
        if not getattr(jmod, "_instrumented", False):
            jmod.idle_allocation_findings = timed(  # type: ignore[attr-defined]
                jmod.idle_allocation_findings, "idle_alloc", CLOCK)
            jmod._instrumented = True  # type: ignore[attr-defined]
    import probes.analysis.item_findings as items
    if not getattr(items, "_instrumented", False):
        items.idle_allocation_findings = timed(
            items.idle_allocation_findings, "idle_alloc", CLOCK)
        items._instrumented = True  # type: ignore[attr-defined]


def sides(limits: DetectorLimits) -> tuple[Side, Side]:
    return (Side("before", det_before.DetectorSchedule(limits), alloc_before.HoldTracker(),
                 judge_before.SampleJudge()),
            Side("after", det_now.DetectorSchedule(limits), HoldTracker(),
                 judge_now.SampleJudge()))


class Differs(AssertionError):
    pass


def replay(name: str, hours: float, interval: float, *, check: bool = False,
           limits: DetectorLimits = DEFAULT_LIMITS, seed: int = 1,
           measure: bool = True, sim: Simulator | None = None, gaps: float = 0.0
           ) -> tuple[Side, Side, dict[str, list[float]], list[int]]:
    """Replay one host; returns both sides, the shared costs and samples per hour."""
    before, after = sides(limits)
    shared: dict[str, list[float]] = {"add": []}
    counts: list[int] = []
    readers = (MessageReader(), MessageReader())
    history = HostHistory()
    hello: Hello | None = None
    first: float | None = None
    pt = time.process_time
    for i, chunk in enumerate(stream(name, hours * 3600.0, interval, seed, sim, gaps)):
        # each side decodes its own samples: the judges cache on a sample's static epoch
        for msg, mine in zip(readers[0].feed(chunk), readers[1].feed(chunk), strict=True):
            if isinstance(msg, Hello):
                hello = msg
                continue
            if not isinstance(msg, HostSample):
                continue
            first = msg.ts if first is None else first
            hour = int((msg.ts - first) // 3600.0)
            while len(counts) <= hour:
                counts.append(0)
                shared["add"].append(0.0)
            counts[hour] += 1
            t = pt()
            history.add(msg)
            shared["add"][hour] += pt() - t
            got = []
            for side, sample in ((before, msg), (after, mine)) if i % 2 else \
                    ((after, mine), (before, msg)):
                CLOCK[0], CLOCK[1] = (side if measure else None), hour
                t = pt()
                found = side.schedule.run(name, history, hello, sample)
                t1 = pt()
                side.holds.update(sample)
                judged = side.judge.judged(name, hello, sample, history, side.holds, limits,
                                           None, None)
                t2 = pt()
                side.add("detectors", hour, t1 - t)
                side.add("judges", hour, t2 - t1)
                got.append((side.name, found, judged))
            CLOCK[0] = None
            if check:
                a, b = sorted(got, key=lambda g: g[0])
                if a[1] != b[1] or a[2] != b[2]:
                    raise Differs(f"{name} at {msg.ts - first:.0f} s: detected "
                                  f"{a[1]!r} / {b[1]!r}; judged {a[2]!r} / {b[2]!r}")
                for f in (*(a[1] or ()), *(a[2] or ())):
                    after.codes[str(f.code)] += 1
    return before, after, shared, counts


def per_sample(row: list[float], counts: list[int]) -> list[float]:
    return [round(1e6 * v / n, 2) if n else 0.0 for v, n in zip(row, counts, strict=False)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--hosts", default="healthy,hang,idle")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    instrument()
    out: dict[str, Any] = {"hours": args.hours, "interval_s": args.interval,
                           "load1": os.getloadavg()[0], "hosts": {}}
    for name in args.hosts.split(","):
        before, after, shared, counts = replay(name, args.hours, args.interval,
                                               check=args.check)
        rows: dict[str, Any] = {"samples": counts, "add": per_sample(shared["add"], counts)}
        for side in (before, after):
            fold = [a + d + j for a, d, j in zip(shared["add"], side.cost["detectors"],
                                                 side.cost["judges"], strict=False)]
            rows[side.name] = {"fold": per_sample(fold, counts),
                               **{k: per_sample(v, counts) for k, v in side.cost.items()}}
        out["hosts"][name] = rows
        if not args.json:
            print(f"== {name} ({HOSTS[name][0]}), µs per sample by hour of age "
                  f"({args.interval:g} s ticks)")
            main3 = ("fold", "detectors", "judges")
            keys = [*main3, *sorted(k for k in after.cost if k not in main3)]
            print(f"  {'add (shared)':28s} " + " ".join(f"{v:7.1f}" for v in rows["add"]))
            for k in keys:
                b = rows["before"].get(k, [])
                a = rows["after"].get(k, [])
                if not any(b) and not any(a):
                    continue
                print(f"  {k:18s} before " + " ".join(f"{v:7.1f}" for v in b))
                print(f"  {'':18s} after  " + " ".join(f"{v:7.1f}" for v in a))
        b, a = rows["before"]["fold"], rows["after"]["fold"]
        steady = list(range(1, len(counts))) or [0]  # past the first hour: windows full
        rows["summary"] = {
            "fold_before_median": sorted(b[h] for h in steady)[len(steady) // 2],
            "fold_after_median": sorted(a[h] for h in steady)[len(steady) // 2],
            "hours_lower": sum(a[h] < b[h] for h in range(len(counts))),
            "hours": len(counts),
            "after_first_to_last": [a[0], a[-1]], "before_first_to_last": [b[0], b[-1]]}
        if not args.json:
            sm = rows["summary"]
            print(f"  fold past hour 1, median: {sm['fold_before_median']:.1f} → "
                  f"{sm['fold_after_median']:.1f} µs; after lower in {sm['hours_lower']} of "
                  f"{sm['hours']} hours")
    out["load1_end"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out))
    else:
        print(f"load1 {out['load1']:.2f} → {out['load1_end']:.2f}"
              + ("; findings identical at every tick" if args.check else ""))


if __name__ == "__main__":
    main()
