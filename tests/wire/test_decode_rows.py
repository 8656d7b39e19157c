"""The v2 fast path builds each GPU's sample without a dict merge per GPU (issue 38).

``CompactStream._fast`` used to build a GPU's ``__dict__`` as ``base | asdict(row)``; it now
copies a base that already holds every key (the moving ones as placeholders) and stores the
row's values into it (``compact.row_filler``, written once from the field table).  The
samples must be the same as before: equal, and every field of every GPU, process, host and
disk the same value of the same type, in the same key order.  The old build is kept here as
the reference, and many mutated ticks of several agent streams go through both.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from msgspec.structs import asdict

from probes.wire import compact, structs
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, HostSample, HostStats
from tests.wire.test_wire_v2 import _agent, _stream, odd

_new = object.__new__
_set = object.__setattr__


def _old_proc(p: GpuProcess, mib: float | None) -> GpuProcess:
    obj = _new(GpuProcess)
    _set(obj, "__dict__", {**p.__dict__, "used_mib": mib})
    return obj


def _old_fast(self: compact.CompactStream, line: bytes) -> HostSample:
    """``CompactStream._fast`` as it was before (main at 9b8f24c), over the same state; a
    tick's PCIe chains as the fast path types them since (before: the checked path, which
    tests/transport/test_relay_rows.py holds them to)."""
    s = compact._DECODER.decode(line)
    if len(s.gpus) != len(self._gpu_base):
        raise structs.Refused("GPU count")
    gpus = []
    for i, (row, full) in enumerate(zip(s.gpus, self._gpu_base, strict=True)):
        if full is None:
            continue
        base = {k: full[k] for k in compact._STATIC_VALUES}
        values = base | asdict(row)
        procs = self._procs[i]
        mib = values["processes"]
        if procs is None:
            values["processes"] = None
        else:
            if mib is None or len(mib) != len(procs):
                raise structs.Refused("process count")
            values["processes"] = tuple(_old_proc(p, m)
                                        for p, m in zip(procs, mib, strict=True))
        obj = _new(GpuSample)
        _set(obj, "__dict__", values)
        gpus.append(obj)
    host = {k: self._host_base[k] for k in compact.HOST_STATIC} | asdict(s.host)
    stats = _new(HostStats)
    _set(stats, "__dict__", host)
    disks = []
    for d in s.disks:
        disk = _new(DiskStats)
        _set(disk, "__dict__", asdict(d))
        disks.append(disk)
    if len({d.name for d in s.disks}) != len(disks):
        raise structs.Refused("a disk named twice")
    return structs.sample(s.seq or 0, s.ts, tuple(gpus), stats, tuple(disks),
                          self._epoch, s if self._whole else None,
                          None if s.pcie is None else structs.chains(s.pcie))


def _items(obj: object) -> list[tuple[str, type, object]]:
    return [(k, type(v), v) for k, v in vars(obj).items()]


def _shape(s: HostSample) -> object:
    """Every field of the sample, with its type, in its objects' key order."""
    return ([(_items(g), [_items(p) for p in g.processes or ()]) for g in s.gpus],
            _items(s.host), [_items(d) for d in s.disks], s.seq, s.ts, s.pcie)


def _result(fn: Any, line: bytes) -> object:
    try:
        return fn(line)
    except Exception as e:
        return type(e).__name__


def _mutate(row: list[Any], rng: random.Random) -> None:
    for _ in range(rng.randint(0, 3)):
        where = rng.choice(("gpu", "gpu", "num", "num", "procs", "host", "disk"))
        gpus = row[2] if isinstance(row[2], list) else []
        g = gpus[rng.randrange(len(gpus))] if gpus else None
        if where in ("gpu", "procs") and isinstance(g, list) and g:
            g[-1 if where == "procs" else rng.randrange(len(g))] = odd(rng)
        elif where == "num" and isinstance(g, list) and len(g) > 2:
            # a believable number of either type: an int where a float was, and back
            g[rng.randrange(len(g) - 2)] = rng.choice((0, 1, 65, 65.0, 1.25, None, 300))
        elif where == "host" and isinstance(row[3], list) and row[3]:
            row[3][rng.randrange(len(row[3]))] = odd(rng, 3, 3.0)
        elif where == "disk" and isinstance(row[4], list) and row[4]:
            d = row[4][rng.randrange(len(row[4]))]
            if isinstance(d, list) and d:
                d[rng.randrange(len(d))] = odd(rng, 4, 4.0)


SCENARIOS = ("leak:3,link-downgrade:2", "throttle:2,xid79:6@20",
             "xid79:2@60,nccl-timeout@90,leak,throttle")


def _differences(rounds: int = 500) -> tuple[int, int]:
    """(ticks whose new sample differs from the old build's, ticks the fast path took)."""
    differ = taken = 0
    for k, scenario in enumerate(SCENARIOS):
        stream, ticks = _stream(_agent(scenario, "--wire", "2", count=40))
        rng = random.Random(3800 + k)
        for n in range(rounds):
            row = json.loads(ticks[n % len(ticks)])
            if n % 5:
                _mutate(row, rng)
            line = json.dumps(row, separators=(",", ":")).encode()
            new = _result(stream._fast, line)
            old = _result(lambda x, s=stream: _old_fast(s, x), line)
            if isinstance(new, HostSample) and isinstance(old, HostSample):
                taken += 1
                same = new == old and _shape(new) == _shape(old) \
                    and new.static_epoch is old.static_epoch and new.wire_row == old.wire_row
            else:
                same = new == old
            differ += not same
    return differ, taken


def test_each_gpu_is_built_as_the_merge_built_it() -> None:
    differ, taken = _differences()
    assert differ == 0
    assert taken > 250  # a fifth unmutated; mutated ones taken too (believable numbers)


def test_the_filler_follows_the_field_table() -> None:
    assert (*compact.GPU_MOVING[:-1], "processes") == compact.GPU_ROW_FIELDS
    base = dict.fromkeys(("a", "processes", "util_pct"))
    row = type("Row", (), {"util_pct": 3, "processes": [1.0]})()
    filled = compact.row_filler(("util_pct", "processes"), skip="processes")(base, row)
    assert filled == {"a": None, "processes": None, "util_pct": 3}
    with pytest.raises(ValueError):
        compact.row_filler(("x]; import os; d[0",))


@pytest.mark.parametrize("mutant", ["swapped", "retyped"])
def test_negative_control_a_wrong_filler_is_seen(monkeypatch: pytest.MonkeyPatch,
                                                 mutant: str) -> None:
    real = compact._fill_gpu

    def wrong(base: dict[str, Any], row: Any) -> dict[str, Any]:
        d = real(base, row)
        if mutant == "swapped":  # an index map off by one: two neighbours' values
            d["util_pct"], d["mem_util_pct"] = d["mem_util_pct"], d["util_pct"]
        else:  # the same number, another type (== holds): a whole float as an int
            for k in compact.GPU_ROW_FIELDS:
                v = d[k]
                if isinstance(v, float) and v.is_integer():
                    d[k] = int(v)
                    break
        return d

    monkeypatch.setattr(compact, "_fill_gpu", wrong)
    differ, _ = _differences(rounds=150)
    assert differ > 50
