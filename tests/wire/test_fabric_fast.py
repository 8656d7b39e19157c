"""A ``fabric`` line decoded in one pass (``probes.wire.fabric_fast``) reads as the checked
decoder reads it (``decode_fields._decode_fabric``), field by field, value, type and sign.

The lines are the agent simulator's own fabric reports (eight ConnectX-7 NDR ports, a port
going down with its counters, 18 NVLinks a GPU on the first report), then the same lines
spoiled at random where a host could spoil them: a value of another type, a negative, a
float for a count, 2**60, a name past the cut, too many ports, counters or links, a short
or long link row, an ``up`` of 2 or true, a port without its HCA, a repeated key.
Negative control: a decoder that believes the values as they come is seen.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from typing import Any

import pytest

from probes import agent
from probes.wire import decode_fields, protocol
from probes.wire.samples import FabricSample, IbPortSample, NvLinkSample

ODD: tuple[Any, ...] = (None, -1, 1.5, 1.0, "x", True, 2**60, 0, -0.0, [], {}, "y" * 80)


def _reports() -> list[dict[str, Any]]:
    """The simulator's fabric reports: the first with NVLinks, one with a port down."""
    out = []
    for seed, scen in ((1, "healthy"), (2, "ib-port-down@3")):
        sim = agent.Simulator(agent.parse_scenarios(scen), seed, f"sim-{seed}")
        for t in range(0, 70):
            body = sim.fabric(3600.0 + t)
            if body is not None:
                out.append({"type": "fabric", "v": 1, "ts": 1.8e9 + t, **body})
    assert any("nvlink" in r for r in out) and any(
        p["state"] == "DOWN" for r in out for p in r["ports"])
    return out


def _spoil(msg: dict[str, Any], rng: random.Random) -> None:
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(("port", "port", "errors", "unknown", "link", "rows", "top"))
        ports = msg.get("ports") if isinstance(msg.get("ports"), list) else []
        p = rng.choice(ports) if ports else None
        p = p if isinstance(p, dict) else None
        gpus = [g for g in msg.get("nvlink") or () if isinstance(g, dict)] \
            if isinstance(msg.get("nvlink"), list) else []
        if where == "port" and p is not None:
            p[rng.choice([*p, "hca"])] = rng.choice(ODD)
        elif where == "errors" and p is not None:
            p["errors"] = {f"c{k}" if k % 7 else "z" * 70: rng.choice((1, 2, *ODD))
                           for k in range(rng.choice((1, 5, 40)))}
        elif where == "unknown" and p is not None:
            p["unknown"] = [rng.choice(("rx", "z" * 70, 3, None))
                            for _ in range(rng.choice((1, 40)))]
        elif where == "link" and gpus:
            g = rng.choice(gpus)
            if isinstance(g.get("links"), list) and g["links"]:
                row = rng.choice(g["links"])
                if isinstance(row, list) and len(row) > 1:  # ``up`` half the time
                    at = rng.choice((1, rng.randrange(len(row))))
                    row[at] = rng.choice((*ODD, 2))
            if rng.random() < 0.3:
                g["gpu"] = rng.choice(ODD)
        elif where == "rows" and gpus:
            g = rng.choice(gpus)
            g["links"] = rng.choice(([[1, 1, 2.0, 0, 0]], [[1, 0, 2.0, 0, 0, 0, 9]],
                                     [[k, 1, 1.0, 0, 0, 0] for k in range(70)], "x", None))
        elif where == "top":
            key = rng.choice(("ts", "interval_s", "ports", "nvlink", "nvlink_text"))
            msg[key] = rng.choice((*ODD, [{"hca": "mlx5_0"}] * 70, "topo"))


def _typed(v: Any) -> Any:
    """A value with every leaf's type beside it (``==`` takes 16 for 16.0, 0.0 for -0.0)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, [(f.name, _typed(getattr(v, f.name)))
                                   for f in dataclasses.fields(v)])
    if isinstance(v, dict):
        return ("dict", [(k, _typed(x)) for k, x in v.items()])
    if isinstance(v, list | tuple):
        return (type(v).__name__, [_typed(x) for x in v])
    if isinstance(v, float):
        return ("float", v.hex())
    return (type(v).__name__, v)


def _checked(line: bytes) -> object:
    try:
        obj, _ = protocol._loads(line)
        return decode_fields._decode_fabric(obj)
    except Exception as e:
        return type(e).__name__


def _fast(line: bytes) -> object:
    try:
        return protocol.decode_line(line)
    except Exception as e:
        return type(e).__name__


def _mismatches(seed: int) -> tuple[int, int]:
    """(spoiled and clean reports whose two decodes differ, reports the fast path took)."""
    rng = random.Random(seed)
    reports = _reports()
    bad = taken = 0
    for n in range(600):
        msg = copy.deepcopy(reports[n % len(reports)])
        if n % 2:  # NVLinks in half the reports (the agent: every tenth)
            msg.setdefault("nvlink", copy.deepcopy(reports[0]["nvlink"]))
        if n % 4:
            _spoil(msg, rng)
        line = json.dumps(msg, separators=(",", ":")).encode()
        fast, checked = _fast(line), _checked(line)
        if isinstance(fast, FabricSample):
            taken += _takes(line)
            bad += _typed(fast) != _typed(checked)
        else:  # the checked path refused it too (a garbled line either way)
            bad += isinstance(checked, FabricSample)
    return bad, taken


def _takes(line: bytes) -> bool:
    try:
        protocol.decode_fabric(line)
    except Exception:
        return False
    return True


def test_a_fabric_line_reads_the_same_on_either_path() -> None:
    bad, taken = _mismatches(38)
    assert bad == 0
    assert taken > 150  # a quarter unspoiled, and spoiled ones the bounds still take


def test_the_comparison_sees_a_decoder_that_believes_what_comes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def believing(line: bytes) -> FabricSample:
        obj = json.loads(line)
        return FabricSample(
            ts=obj["ts"], interval_s=obj.get("interval_s"),
            ports=tuple(IbPortSample(**p) for p in obj.get("ports") or ()),
            nvlinks=None if obj.get("nvlink") is None else tuple(
                NvLinkSample(g["gpu"], r[0], bool(r[1]), *r[2:6])
                for g in obj["nvlink"] for r in g["links"]),
            nvlink_text=obj.get("nvlink_text"))

    monkeypatch.setattr(protocol, "decode_fabric", believing)
    bad, _ = _mismatches(39)
    assert bad > 50
