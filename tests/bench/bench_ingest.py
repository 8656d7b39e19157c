"""Ingest: decode + store + detectors per host-sample (8 GPUs), as fast as the CPU allows.

Prints one JSON object and one summary line.  Wire lines come from the agent's own
simulator (16 distinct hosts, a quarter of them throttling, leaking or on an x8 link),
serialised as the agent serialises them; host *i* replays template *i mod 16* under its
own name, so 1024 hosts need no 1024 simulators.  Every second each host's line goes
through the console's path: ``MessageReader.feed`` (split + parse + typed decode) and
``FleetState.apply`` (history, detector schedule, findings).  CPU is ``process_time``.

Measured per fleet size, each over the same lines:

* ``end_to_end``: feed + apply; the headline ``host_samples_per_cpu_s``.
* the parts: ``parse_us`` (the JSON parser alone), ``decode_us`` (``decode_line``, which
  includes the parse), ``apply_us`` (``FleetState.apply`` of decoded samples), and inside
  it ``history_add_us`` and ``findings_us`` (per-sample findings).
* ``baseline_us``: what a first-cut monitor does with the same line: ``json.loads`` and
  append the dict to a per-host ``deque``.  ``over_baseline`` is end-to-end / baseline.

The fleets run under the console's collector settings (``tui.gc_policy``); the full
run also feeds the largest fleet first under CPython's defaults (``…_default_gc``).

``day_detectors``: every detector over one host's 24 h history at 1 Hz (what each run
costs once a soak is long), and that cost spread over the samples between runs.

    python tests/bench/bench_ingest.py [--quick] [--hosts 64,256,1024] [--seconds 300]

``--quick``: 16 and 64 hosts for 60 s, the 24 h history at 10 s steps (seconds in all).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import agent
from probes.analysis.detectors import DEFAULT_LIMITS, DETECTORS, EVERY_S, run_detectors
from probes.analysis.findings import host_findings, sample_findings
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.history import HostHistory
from probes.wire import protocol
from probes.wire.protocol import MessageReader, decode_line
from probes.wire.samples import Hello, HostSample
from tui.gc_policy import STREAMING_THRESHOLDS, tune_for_streaming

T0 = 1_800_000_000.0
TEMPLATES = 16
SCENARIOS = ("healthy", "throttle:5", "leak:3", "link-downgrade:2")
SIM_START_S = 3600.0
"""Template streams start an hour into the simulated run, so the scenarios show."""


def wire(obj: dict[str, Any]) -> bytes:
    """One line exactly as the agent writes it."""
    return (json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n").encode()


def template(k: int, seconds: int) -> tuple[bytes, list[bytes]]:
    """Hello and ``seconds`` sample lines of simulated host ``k`` at 1 Hz."""
    sim = agent.Simulator(agent.parse_scenarios(SCENARIOS[k % len(SCENARIOS)]), k + 1, f"t{k}")
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 1, "agent": "bench", "ts": T0, "host": facts,
                             "gpus": gpus, "probes": {"simulator": {"available": True}},
                             "simulated": [s["name"] for s in sim.scen]}
    hello.update(sim.topology())
    lines = []
    for seq in range(seconds):
        g, h, disks = sim.sample(SIM_START_S + seq)
        lines.append(wire({"type": "sample", "v": 1, "seq": seq, "ts": T0 + seq, "gpus": g,
                           "host": h, "disks": disks}))
    return wire(hello), lines


def cpu(fn: Any, *args: Any, collect: bool = True) -> float:
    if collect:
        gc.collect()
    t0 = time.process_time()
    fn(*args)
    return time.process_time() - t0


def fleet_run(hosts: int, seconds: int, tmpl: list[tuple[bytes, list[bytes]]]
              ) -> dict[str, Any]:
    names = [f"h{i:04d}" for i in range(hosts)]
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(tmpl[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)
    feeds = [(name, readers[i], tmpl[i % TEMPLATES][1]) for i, name in enumerate(names)]

    def end_to_end() -> None:
        for t in range(seconds):
            now = T0 + t
            for name, reader, lines in feeds:
                for msg in reader.feed(lines[t]):
                    fleet.apply(name, msg, now)

    collections = [0, 0, 0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections[info["generation"]] += 1

    gc.collect()
    gc.callbacks.append(count)
    try:
        e2e = cpu(end_to_end, collect=False)
    finally:
        gc.callbacks.remove(count)
    n = hosts * seconds
    applied = sum(len(h.history.series_keys()) > 0 for h in fleet.hosts.values())
    findings = sum(len(h.findings()) for h in fleet.hosts.values())
    runs = sum(len(h.detectors._due) for h in fleet.hosts.values())

    # The parts, over the templates' lines (decoded objects are immutable, so shared).
    lines = [line for _, ls in tmpl for line in ls[:seconds]]
    decoded = [[decode_line(line) for line in ls[:seconds]] for _, ls in tmpl]
    loads = protocol._loads
    parse = cpu(lambda: [loads(line) for line in lines]) / len(lines)
    dec = cpu(lambda: [decode_line(line) for line in lines]) / len(lines)
    part_hosts = min(hosts, 64)
    part = FleetState([HostSpec(name=f"p{i}", expect_gpus=8) for i in range(part_hosts)])
    for i in range(part_hosts):
        part.apply(f"p{i}", decode_line(tmpl[i % TEMPLATES][0]), T0)

    def apply_all() -> None:
        for t in range(seconds):
            for i in range(part_hosts):
                part.apply(f"p{i}", decoded[i % TEMPLATES][t], T0 + t)

    apply = cpu(apply_all) / (part_hosts * seconds)
    histories = [HostHistory() for _ in range(part_hosts)]

    def add_all() -> None:
        for t in range(seconds):
            for i, h in enumerate(histories):
                h.add(decoded[i % TEMPLATES][t])  # type: ignore[arg-type]

    add = cpu(add_all) / (part_hosts * seconds)
    hellos = [decode_line(h) for h, _ in tmpl]

    def find_all() -> None:
        for k, ds in enumerate(decoded):
            for s in ds:
                sample_findings("h", hellos[k], s)  # type: ignore[arg-type]
                host_findings("h", s)  # type: ignore[arg-type]

    find = cpu(find_all) / len(lines)
    stores: list[deque[Any]] = [deque(maxlen=3600) for _ in names]

    def baseline() -> None:
        for t in range(seconds):
            for i, store in enumerate(stores):
                store.append(json.loads(tmpl[i % TEMPLATES][1][t]))

    base = cpu(baseline) / n
    us = 1e6 * e2e / n
    return {
        "hosts": hosts, "seconds": seconds, "host_samples": n,
        "gc_thresholds": list(gc.get_threshold()), "gc_collections": collections,
        "hosts_with_history": applied, "findings_at_end": findings,
        "detector_schedule_entries": runs,
        "host_samples_per_cpu_s": round(n / e2e) if e2e else None,
        "us_per_host_sample": round(us, 1),
        "parse_us": round(1e6 * parse, 1), "decode_us": round(1e6 * dec, 1),
        "apply_us": round(1e6 * apply, 1), "history_add_us": round(1e6 * add, 1),
        "findings_us": round(1e6 * find, 1),
        "baseline_us": round(1e6 * base, 1),
        "over_baseline": round(us / (1e6 * base), 2) if base else None,
    }


def day_detectors(step_s: int) -> dict[str, Any]:
    """Every detector over a 24 h history of one troubled host (leak and throttling)."""
    sim = agent.Simulator(agent.parse_scenarios("leak:3,throttle:5"), 7, "day")
    facts, gpus = sim.facts()
    hello = decode_line(wire({"type": "hello", "v": 1, "agent": "bench", "ts": T0,
                              "host": facts, "gpus": gpus, "probes": {}}))
    assert isinstance(hello, Hello)
    h = HostHistory()
    last: HostSample | None = None
    for i, t in enumerate(range(0, 86400, step_s)):
        g, host, disks = sim.sample(float(t))
        s = decode_line(wire({"type": "sample", "v": 1, "seq": i, "ts": T0 + t, "gpus": g,
                              "host": host, "disks": disks}))
        assert isinstance(s, HostSample)
        h.add(s)
        last = s
    calls = 5
    found: list[Any] = []

    def run() -> None:
        nonlocal found
        for _ in range(calls):
            found = run_detectors("day", h, hello, last)

    per_call = cpu(run) / calls
    # Each detector runs every EVERY_S agent seconds; a 1 Hz host sends that many samples.
    each = {det.__name__: cpu(lambda d=det: [d("day", h, hello, last, DEFAULT_LIMITS)
                                             for _ in range(calls)]) / calls
            for det in DETECTORS}
    amortised = sum(1e6 * each[det.__name__] / EVERY_S[det] for det in DETECTORS)
    return {"step_s": step_s, "ms_all_detectors": round(1e3 * per_call, 2),
            "ms_each": {k: round(1e3 * v, 3) for k, v in each.items()},
            "findings": len(found), "amortised_us_per_host_sample": round(amortised, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--hosts", default="64,256,1024")
    ap.add_argument("--seconds", type=int, default=300)
    args = ap.parse_args()
    sizes = [16, 64] if args.quick else [int(x) for x in args.hosts.split(",")]
    seconds = 60 if args.quick else args.seconds
    tmpl = [template(k, seconds) for k in range(TEMPLATES)]
    results: dict[str, Any] = {}
    if not args.quick:
        # The largest fleet once more under CPython's default collector, for comparison.
        results[f"hosts_{sizes[-1]}_default_gc"] = fleet_run(sizes[-1], seconds, tmpl)
    before = tune_for_streaming()
    results.update({f"hosts_{n}": fleet_run(n, seconds, tmpl) for n in sizes})
    results["day_detectors"] = day_detectors(10 if args.quick else 1)
    out = {"bench": "ingest", "date": time.strftime("%Y-%m-%d"),
           "machine": f"{os.cpu_count()}-core {platform.machine()}, "
                      f"python {platform.python_version()}",
           "json_parser": "orjson" if protocol._orjson is not None else "json",
           "gc": {"default": list(before), "console": list(STREAMING_THRESHOLDS)},
           "line_bytes": len(tmpl[0][1][0]), "results": results}
    print(json.dumps(out))
    parts = ", ".join(f"{k.removeprefix('hosts_')} hosts {r['host_samples_per_cpu_s']}/CPU-s "
                      f"({r['us_per_host_sample']} µs, {r['over_baseline']}x baseline)"
                      for k, r in results.items() if "hosts" in r)
    day = results["day_detectors"]
    print(f"ingest: {parts}; 24 h detectors {day['ms_all_detectors']} ms/host run "
          f"(+{day['amortised_us_per_host_sample']} µs/host-sample)")


if __name__ == "__main__":
    main()
