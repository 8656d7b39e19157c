"""Judgements recomputed only for what changed (issue 38 item 1, session 7).

``HostState`` judges a fabric report again only when its judged inputs moved
(``fabric.fabric_findings_changed``) and a tick's per-sample judges only when theirs did
(``sample_judge.SampleJudge``).  Held to the judging before (``judges_before_s7``: every
report and tick judged whole) on random streams through the console's own reader: the
agent's simulator with clock-event reasons, load, disks, swap and a stray process drawn
anew now and then (held for a few ticks in between), fabric reports that repeat, change,
flap, count errors and go back in time, the limits, the hello and the peers' GPU counts
changed mid-stream.  After every item the kept findings (current with onsets, sticky,
fabric, layout), their counters and the merged findings are equal field by field, types
included.  The negative controls drop one input from each key and must be caught.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import fields
from typing import Any

import pytest

from probes import agent
from probes.agent.output import CompactEncoder, compact_columns
from probes.analysis import fabric, sample_judge
from probes.analysis.findings import Finding
from probes.analysis.gpu_peers import PeerCounts
from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.fleet_state import HostState
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello
from tests.analysis.judges_before_s7 import HostStateBefore

T0 = 1_800_000_000.0
SCENARIOS = ("healthy", "throttle:2", "leak:3", "link-downgrade:1", "disk-saturated",
             "xid79:4@60", "ib-port-down:3@50", "no-environ", "train")
REASONS = ((), ("gpu_idle",), ("sw_power_cap",), ("sw_thermal_slowdown",),
           ("sw_power_cap", "hw_slowdown"))


def _wire(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _ports(rng: random.Random) -> list[dict[str, Any]]:
    """A host's eight ports, now and then one down, slow (typed int or float), erroring."""
    out = []
    for i in range(8):
        roll = rng.random()
        state = "DOWN" if roll < 0.08 else "ACTIVE"
        rate: float = rng.choice((200.0, 200, 100.0)) if 0.08 <= roll < 0.16 else 400.0
        errors = {}
        if rng.random() < 0.1:
            errors[rng.choice(("symbol_error", "link_downed", "port_xmit_discards",
                               "out_of_sequence"))] = rng.choice((1, 3, 9))
        out.append({"hca": f"mlx5_{i}", "port": 1, "state": state,
                    "phys_state": "Polling" if state == "DOWN" else "LinkUp",
                    "rate_gbs": rate, "link_layer": "InfiniBand", "errors": errors,
                    "rx_bytes_s": rng.uniform(0, 3e10), "tx_bytes_s": rng.uniform(0, 3e10)})
    return out


def _nvlinks(rng: random.Random) -> list[dict[str, Any]]:
    bad = rng.randrange(8) if rng.random() < 0.5 else None
    return [{"gpu": g, "links": [[k, 0 if g == bad and k == 5 else 1,
                                  20.0 if g == bad and k == 6 else 26.562,
                                  7 if g == bad and k == 7 else 0, 0, 0] for k in range(18)]}
            for g in range(8)]


def _tick_noise(rng: random.Random) -> dict[str, Any]:
    """What this stretch of ticks overrides: reasons, load, clocks, a disk, swap, a stray."""
    return {"reasons": {rng.randrange(8): rng.choice(REASONS) for _ in range(rng.randrange(3))},
            "util": {rng.randrange(8): rng.choice((20.0, 79.9, 80.0, 95.0))
                     for _ in range(rng.randrange(3))},
            "clock": rng.choice((None, 1410.4, 1410.6, 1700)),
            "disk": rng.choice((None, 50.0, 99.4, 99.6)),
            "swap": rng.choice((0.0, 0.0, 300.2, 300.7, 5000.0)),
            "stray": rng.choice((None, 100.0, 2048.5, 3000.0, 4096.0, 4096))}


def _noisy(gpus: list[dict[str, Any]], host: dict[str, Any], disks: dict[str, dict[str, Any]],
           noise: dict[str, Any]) -> None:
    for i, reasons in noise["reasons"].items():
        if i < len(gpus):
            gpus[i]["clock_reasons"] = list(reasons)
            if noise["clock"] is not None:
                gpus[i]["sm_clock_mhz"] = noise["clock"]
    for i, util in noise["util"].items():
        if i < len(gpus):
            gpus[i]["util_pct"] = util
    if noise["disk"] is not None and disks:
        next(iter(disks.values()))["util"] = noise["disk"]
    host["swap_in_pages_s"] = noise["swap"]
    if noise["stray"] is not None and gpus:
        gpus[-1]["processes"] = [*(gpus[-1].get("processes") or ()),
                                 {"pid": 777, "name": "stray", "user": "x",
                                  "used_mib": noise["stray"], "environ": True}]


Event = tuple[str, Any]


def stream(seed: int, ticks: int = 200) -> Iterator[Event]:
    """("bytes", a hello, tick or fabric line), ("limits", new detector limits) or
    ("peer", a GPU count another host of the model lists)."""
    rng = random.Random(seed)
    scen = ",".join(rng.sample(SCENARIOS, rng.randrange(1, 4)))
    sim = agent.Simulator(agent.parse_scenarios(scen), seed + 1, f"s{seed}")
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 2, "agent": "t", "ts": T0, "host": facts,
                             "gpus": gpus, "probes": {"simulator": {"available": True}},
                             "columns": compact_columns()}
    hello.update(sim.topology())
    yield "bytes", _wire(hello)
    encoder = CompactEncoder()
    noise = _tick_noise(rng)
    ports = _ports(rng)
    links: list[dict[str, Any]] | None = _nvlinks(rng)
    for t in range(ticks):
        if rng.random() < 0.3:  # one input at a time: a key missing it must show
            part = rng.choice(list(noise))
            noise[part] = _tick_noise(rng)[part]
        g, h, disks = sim.sample(3600.0 + t)
        _noisy(g, h, disks, noise)
        msg = {"type": "sample", "v": 1, "seq": t, "ts": T0 + t, "gpus": g, "host": h,
               "disks": disks}
        yield "bytes", b"".join(_wire(m) for m in encoder.encode(msg))
        if rng.random() < 0.3:  # a report: mostly the same, now and then changed or old
            if rng.random() < 0.25:
                ports = _ports(rng)
            if rng.random() < 0.1:
                links = _nvlinks(rng)
            ts = T0 + t - (rng.choice((700.0, 30.0)) if rng.random() < 0.05 else 0.0)
            report = {"type": "fabric", "v": 1, "ts": ts, "interval_s": 30.0,
                      "ports": [dict(p, rx_bytes_s=rng.uniform(0, 3e10)) for p in ports]}
            if links is not None and rng.random() < 0.5:
                report["nvlink"] = links
            yield "bytes", _wire(report)
            ports = [dict(p, errors={}) for p in ports]  # increases: counted once
        roll = rng.random()
        if roll < 0.03:
            yield "limits", DetectorLimits(
                power_cap_busy_util_pct=rng.choice((50.0, 80.0, 96.0)),
                disk_saturated_util_pct=rng.choice((90.0, 99.5)),
                stray_min_mib=rng.choice((64.0, 1024.0)),
                ib_errors_min=rng.choice((1, 10)),
                ib_errors_window_s=rng.choice((60.0, 600.0)))
        elif roll < 0.04:
            yield "bytes", _wire(hello)  # the hello again: a new object, the same facts
        elif roll < 0.06:
            yield "peer", rng.choice((7, 8, 9, 9))


def _typed(v: object) -> object:
    if isinstance(v, dict):
        return sorted(((k, _typed(x)) for k, x in v.items()), key=repr)
    if isinstance(v, list | tuple):
        return [type(v), *(_typed(x) for x in v)]
    return (type(v), v)


def _exact(found: Iterable[Finding]) -> list[list[object]]:
    return [[_typed(getattr(f, x.name)) for x in fields(Finding)] for f in found]


def _seen(state: HostState) -> tuple[object, ...]:
    kept = state.findings_kept
    return (_exact(kept.current), dict(kept.since), _exact(kept.sticky.values()),
            _exact(kept.fabric), _exact(kept.layout), _exact(kept.detected), kept.content,
            kept.revision, state.quiet, _exact(state.findings()))


def _host(cls: type[HostState], peers: PeerCounts) -> HostState:
    return cls(HostSpec(name="h"), peers=peers)


def first_difference(seed: int) -> str | None:
    """Both folds over one random stream; where they first differ (None: nowhere)."""
    sides = [(_host(c, PeerCounts()), MessageReader()) for c in (HostState, HostStateBefore)]
    n = 0
    for kind, what in stream(seed):
        for state, reader in sides:
            if kind == "limits":
                state.limits = dataclasses.replace(state.limits, detectors=what)
            elif kind == "peer":
                n += 1
                hello = state.hello
                assert hello is not None and state.peers is not None
                gpus = (hello.facts.gpus * 2)[:what]
                state.peers.add(f"peer{n % 4}", dataclasses.replace(
                    hello, facts=dataclasses.replace(hello.facts, gpus=gpus)))
            else:
                for item in reader.feed(what):
                    if isinstance(item, Hello) and state.peers is not None:
                        state.peers.add(state.name, item)
                    state.apply(item, getattr(item, "ts", T0))
        new, old = (_seen(s) for s, _ in sides)
        if new != old:
            return f"seed {seed}, after {kind} {str(what)[:80]}"
    return None


SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_findings_are_those_of_judging_every_item(seed: int) -> None:
    assert first_difference(seed) is None


def test_the_keys_skip_most_items() -> None:
    """Not vacuous: most ticks and reports are answered "unchanged"."""
    judged = {"ticks": 0, "reports": 0}
    tick, report = sample_judge.SampleJudge.judged, fabric._judged

    def count_ticks(self: sample_judge.SampleJudge, *a: Any) -> Any:
        out = tick(self, *a)
        judged["ticks"] += out is not None
        return out

    def count_reports(*a: Any) -> Any:
        judged["reports"] += 1
        return report(*a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_judge.SampleJudge, "judged", count_ticks)
        mp.setattr(fabric, "_judged", count_reports)
        state, reader = _host(HostState, PeerCounts()), MessageReader()
        reports = 0
        for kind, what in stream(3, ticks=300):
            if kind == "bytes":
                for item in reader.feed(what):
                    reports += type(item).__name__ == "FabricSample"
                    state.apply(item, getattr(item, "ts", T0))
    assert judged["ticks"] < 300 / 2 and judged["reports"] < reports / 2, (judged, reports)


FABRIC_INPUTS = {"limits": 2, "ports": 3, "links": 4, "errors": 5}
"""Places in ``fabric.judged_inputs``."""
TICK_INPUTS = {"limits": 3, "gpus": 5, "disks": 6, "swap": 7, "strays": 8, "peers": 11}
"""Places in ``sample_judge.tick_inputs``."""


@pytest.mark.parametrize("broken", [*(f"fabric {k}" for k in FABRIC_INPUTS),
                                    *(f"tick {k}" for k in TICK_INPUTS)])
def test_negative_control_a_key_missing_an_input_is_caught(
        monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    kind, name = broken.split()
    module: Any = fabric if kind == "fabric" else sample_judge
    attr = "judged_inputs" if kind == "fabric" else "tick_inputs"
    keyed = getattr(module, attr)
    drop = (FABRIC_INPUTS if kind == "fabric" else TICK_INPUTS)[name]
    blank = () if broken == "fabric links" else None

    def blind(*a: Any) -> Any:
        got = keyed(*a)
        return None if got is None else (*got[:drop], blank, *got[drop + 1:])

    monkeypatch.setattr(module, attr, blind)
    assert any(first_difference(seed) is not None for seed in SEEDS)
