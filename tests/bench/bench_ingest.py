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

Each fleet runs three ways over the same agent ticks: ``hosts_N`` is today's console (v1
lines, the one-pass msgspec decode of ``probes.wire.structs``), ``hosts_N_v1_old`` the same
lines through the decoder before it (orjson + ``Filler``), and ``hosts_N_v2`` the compact
protocol v2 (``probes.wire.compact``) the shipped agent speaks.  ``wire`` gives the bytes
per 8-GPU tick on each protocol and decode alone, µs per tick, on each path.

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
from probes.agent.output import CompactEncoder, compact_columns
from probes.analysis.detectors import DEFAULT_LIMITS, DETECTORS, EVERY_S, run_detectors
from probes.analysis.findings import host_findings, sample_findings
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.history import HostHistory
from probes.wire import protocol, structs
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


Template = tuple[bytes, list[bytes]]


def template(k: int, seconds: int) -> tuple[Template, Template]:
    """Hello and ``seconds`` ticks of simulated host ``k`` at 1 Hz, as v1 and as v2 (a v2
    tick's bytes hold the ``static`` message too, on the ticks that send one)."""
    sim = agent.Simulator(agent.parse_scenarios(SCENARIOS[k % len(SCENARIOS)]), k + 1, f"t{k}")
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 1, "agent": "bench", "ts": T0, "host": facts,
                             "gpus": gpus, "probes": {"simulator": {"available": True}},
                             "simulated": [s["name"] for s in sim.scen]}
    hello.update(sim.topology())
    hello2 = dict(hello, v=2, columns=compact_columns())
    encoder = CompactEncoder()
    lines, lines2 = [], []
    for seq in range(seconds):
        g, h, disks = sim.sample(SIM_START_S + seq)
        msg = {"type": "sample", "v": 1, "seq": seq, "ts": T0 + seq, "gpus": g, "host": h,
               "disks": disks}
        lines.append(wire(msg))
        lines2.append(b"".join(wire(m) for m in encoder.encode(msg)))
    return (wire(hello), lines), (wire(hello2), lines2)


def _refuse(line: bytes) -> HostSample:
    raise structs.Refused("the old decoder, for comparison")


class OldDecoder:
    """``decode_line`` as it was before the one-pass tier (orjson + ``Filler``)."""

    def __enter__(self) -> None:
        self.saved = structs.decode_sample
        structs.decode_sample = _refuse

    def __exit__(self, *exc: object) -> None:
        structs.decode_sample = self.saved


def wire_figures(tmpl: list[Template], tmpl2: list[Template]) -> dict[str, Any]:
    """Bytes per 8-GPU tick and decode alone, µs per tick, on each protocol and path."""
    v1 = [line for _, ls in tmpl for line in ls]
    ticks2 = [line for _, ls in tmpl2 for chunk in ls for line in chunk.splitlines()
              if line.startswith(b"[")]
    loads = protocol._loads
    parse = cpu(lambda: [loads(line) for line in v1]) / len(v1)
    new = cpu(lambda: [decode_line(line) for line in v1]) / len(v1)
    with OldDecoder():
        old = cpu(lambda: [decode_line(line) for line in v1]) / len(v1)
    streams = []
    for hello, ls in tmpl2:
        r = MessageReader()
        r.feed(hello + ls[0])
        assert r.compact is not None and r.compact.known
        streams.append((r.compact, [x for c in ls for x in c.splitlines() if x[:1] == b"["]))

    def v2() -> None:
        for stream, ticks in streams:
            for t in ticks:
                stream.sample(t, lambda: None)  # every agent tick takes the one-pass path

    v2_us = cpu(v2) / len(ticks2)
    return {"v1_bytes": round(sum(map(len, v1)) / len(v1)),
            "v2_tick_bytes": round(sum(map(len, ticks2)) / len(ticks2)),
            "v2_bytes_with_static": round(sum(len(c) for _, ls in tmpl2 for c in ls)
                                          / len(ticks2)),
            "orjson_parse_us": round(1e6 * parse, 1), "v1_old_decode_us": round(1e6 * old, 1),
            "v1_decode_us": round(1e6 * new, 1), "v2_decode_us": round(1e6 * v2_us, 1),
            "v1_speedup": round(old / new, 2), "v2_speedup_over_v1_old": round(old / v2_us, 2)}


def cpu(fn: Any, *args: Any, collect: bool = True) -> float:
    if collect:
        gc.collect()
    t0 = time.process_time()
    fn(*args)
    return time.process_time() - t0


def fleet_run(hosts: int, seconds: int, tmpl: list[Template],
              feed: list[Template] | None = None) -> dict[str, Any]:
    """One fleet end to end on ``feed`` (default ``tmpl``); the parts and the baseline
    always on the v1 lines of ``tmpl``."""
    feed = feed or tmpl
    names = [f"h{i:04d}" for i in range(hosts)]
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    readers = [MessageReader() for _ in names]
    for i, name in enumerate(names):
        for msg in readers[i].feed(feed[i % TEMPLATES][0]):
            fleet.apply(name, msg, T0)
    feeds = [(name, readers[i], feed[i % TEMPLATES][1]) for i, name in enumerate(names)]

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
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
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
    both = [template(k, seconds) for k in range(TEMPLATES)]
    tmpl, tmpl2 = [b[0] for b in both], [b[1] for b in both]
    results: dict[str, Any] = {}
    if not args.quick:
        # The largest fleet once more under CPython's default collector, for comparison.
        results[f"hosts_{sizes[-1]}_default_gc"] = fleet_run(sizes[-1], seconds, tmpl)
    before = tune_for_streaming()
    for n in sizes:
        results[f"hosts_{n}"] = fleet_run(n, seconds, tmpl)
        with OldDecoder():
            results[f"hosts_{n}_v1_old"] = fleet_run(n, seconds, tmpl)
        results[f"hosts_{n}_v2"] = fleet_run(n, seconds, tmpl, tmpl2)
    results["wire"] = wire_figures(tmpl, tmpl2)
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
    w = results["wire"]
    print(f"ingest: {parts}; 24 h detectors {day['ms_all_detectors']} ms/host run "
          f"(+{day['amortised_us_per_host_sample']} µs/host-sample); wire: v1 {w['v1_bytes']} B, "
          f"v2 {w['v2_tick_bytes']} B per tick; decode v1 old {w['v1_old_decode_us']} µs, "
          f"v1 {w['v1_decode_us']} µs, v2 {w['v2_decode_us']} µs "
          f"(orjson parse alone {w['orjson_parse_us']} µs)")


if __name__ == "__main__":
    main()
