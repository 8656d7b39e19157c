"""A row sample's ``host`` and ``disks`` are built when read, as its ``gpus`` are (issue 38,
session 12, lazy12): nothing observable may change.

The reference is ``CompactStream._sample`` as it was (tests/wire/compact_sample_before_s12.py:
``HostStats`` and ``DiskStats`` built at once).  Agent streams of several scenarios (v2; v1
for the same ticks), their ticks mutated (odd values, a disk named twice, cut rows), go
through both, and each pair of samples is compared after its fields are read in a random
order (or not at all): equality, ``repr``, every field's type and value in its objects' key
order, the sample's own key order, pickled bytes (of a sample read first and of one never
read), ``copy``/``deepcopy``, ``dataclasses.asdict``/``replace``, the snapshot's
``_plain`` (``explain --json``), the recorder's codec and ``columns.split`` frames, msgspec
JSON once read, and two threads reading one fresh sample at once.  Negative controls: a host
built over the wrong static half, disks in another order, a field kept at the end of the
sample's dict: each must be seen.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import random
import sys
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from probes.outputs.snapshot import _plain
from probes.store import codec, columns
from probes.wire import compact, samples
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.wire.compact_sample_before_s12 import sample_before
from tests.wire.test_decode_rows import _mutate, _shape
from tests.wire.test_wire_v2 import _agent, _stream

SCENARIOS = ("leak:3,link-downgrade:2", "throttle:2,xid79:6@20",
             "xid79:2@60,nccl-timeout@90,leak,throttle", "healthy")
FIELDS = ("gpus", "host", "disks")
LAZY_KEYS = ["ts", "seq", "pcie", "static_epoch", "wire_row"]


def _build(stream: compact.CompactStream, line: bytes, before: bool) -> object:
    """The tick's sample by the fast path, now or as before (an exception's name where it
    refuses the tick)."""
    real = compact.CompactStream._sample
    try:
        if before:
            compact.CompactStream._sample = sample_before  # type: ignore[method-assign]
        return stream._fast(line)
    except Exception as e:
        return type(e).__name__
    finally:
        compact.CompactStream._sample = real  # type: ignore[method-assign]


def _enc_hook(v: object) -> object:
    return repr(type(v))


def _pickled(s: HostSample) -> bytes:
    """The sample's pickled bytes, its static epoch left out: the epoch's own state (the
    last processes built, which a GPU build may share) depends on which sample was built
    last, not on this change; ``static_epoch`` is compared by identity instead."""
    return pickle.dumps({k: v for k, v in s.__getstate__().items() if k != "static_epoch"})


def _asdict(s: HostSample) -> dict[str, Any]:
    """``dataclasses.asdict`` less the epoch (deep-copied by it: a new object each time)."""
    return {k: v for k, v in dataclasses.asdict(s).items() if k != "static_epoch"}


def _view(s: HostSample, seen: dict[int, Any]) -> tuple[object, ...]:
    """Everything a reader can see of ``s`` (read in this order: builds every field)."""
    split = columns.split(s, seen)
    return (s, repr(s), _shape(s), list(vars(s)), _pickled(s), copy.copy(s),
            list(vars(copy.copy(s))), copy.deepcopy(s) == s, _asdict(s),
            dataclasses.replace(s), _plain(s), codec.encode(s),
            msgspec.json.encode(s, enc_hook=_enc_hook), split,
            None if split is None else columns.static_part(s))


def _differences(variants: int = 10, seed: int = 1200) -> dict[str, int]:
    """Counts: ticks whose samples differ, ticks the fast path took, lazy samples, refused.
    Each scenario's v2 stream is fed line by line (its ``static`` messages taken as they
    come); each tick is tried as sent and in ``variants - 1`` mutated copies first."""
    out = {"differ": 0, "taken": 0, "lazy": 0, "refused": 0}
    for k, scenario in enumerate(SCENARIOS):
        reader = MessageReader()
        rng = random.Random(seed + k)
        seen_new: dict[int, Any] = {}
        seen_old: dict[int, Any] = {}
        for raw in _agent(scenario, "--wire", "2", count=40).splitlines():
            stream = reader.compact
            if not raw.startswith(b"[") or stream is None:
                reader.feed(raw + b"\n")
                continue
            for n in range(variants):
                row = json.loads(raw)
                if n:
                    _mutate(row, rng)
                if n % 7 == 3 and isinstance(row[4], list) and row[4]:  # a disk named twice
                    row[4].append(copy.deepcopy(rng.choice(row[4])))
                line = json.dumps(row, separators=(",", ":")).encode()
                if n == 9:
                    line = line[:rng.randrange(len(line))]
                out_n = _compare(stream, line, rng, seen_new, seen_old)
                for key, v in out_n.items():
                    out[key] += v
            reader.feed(raw + b"\n")
    return out


def _compare(stream: compact.CompactStream, line: bytes, rng: random.Random,
             seen_new: dict[int, Any], seen_old: dict[int, Any]) -> dict[str, int]:
    new, old = _build(stream, line, False), _build(stream, line, True)
    if not isinstance(new, HostSample) or not isinstance(old, HostSample):
        return {"refused": 1, "differ": int(new != old or type(new) is not type(old))}
    lazy = new.wire_row is not None
    if lazy and list(vars(new)) != LAZY_KEYS:  # nothing built before a read
        return {"taken": 1, "lazy": 1, "differ": 1}
    fresh = _build(stream, line, False)
    assert isinstance(fresh, HostSample)
    for name in rng.sample(FIELDS, rng.randrange(4)):  # some read first, in any order
        getattr(new, name)
    same = _pickled(fresh) == _pickled(old)  # a sample never read
    same = same and _view(new, seen_new) == _view(old, seen_old)
    same = same and new.static_epoch is old.static_epoch and new.wire_row == old.wire_row
    return {"taken": 1, "lazy": int(lazy), "differ": int(not same)}


def test_lazy_samples_are_the_eager_ones() -> None:
    got = _differences()
    assert got["differ"] == 0, got
    assert got["taken"] > 500 and got["lazy"] > 500 and got["refused"] > 500, got


def test_v1_and_relayed_v2_ticks_agree() -> None:
    """The same agent ticks by v1's decoder and by v2's fast path (a collector's relayed
    tick is ``from_row`` of the decoded row: the same ``_fast_row``) are equal samples."""
    lazy = 0
    for scenario in SCENARIOS:
        v1 = [m for m in MessageReader().feed(_agent(scenario)) if isinstance(m, HostSample)]
        v2 = [m for m in MessageReader().feed(_agent(scenario, "--wire", "2"))
              if isinstance(m, HostSample)]
        assert len(v1) == len(v2)
        for a, b in zip(v1, v2, strict=True):
            lazy += b.wire_row is not None
            order = list(FIELDS)
            random.Random(len(v1) + lazy).shuffle(order)  # any field first, on a fresh sample
            assert [getattr(b, f) for f in order] == [getattr(a, f) for f in order]
            assert (b.seq, b.pcie) == (a.seq, a.pcie)
            b = dataclasses.replace(b, ts=0.0)  # two agent runs: other times
            a = dataclasses.replace(a, ts=0.0)
            assert b == a and _plain(b) == _plain(a) and codec.encode(b) == codec.encode(a)
    assert lazy > 100


def test_two_threads_reading_one_sample_build_equal_fields() -> None:
    stream, ticks = _stream(_agent("leak:3,link-downgrade:2", "--wire", "2"))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    lazy = 0
    try:
        for n in range(200):
            line = ticks[n % len(ticks)]
            s, old = _build(stream, line, False), _build(stream, line, True)
            if not isinstance(s, HostSample) or not isinstance(old, HostSample):
                assert s == old  # refused both ways (a tick after another ``static``)
                continue
            lazy += s.wire_row is not None
            got: list[tuple[object, ...]] = []

            def read(order: tuple[str, ...], s: HostSample = s,
                     got: list[tuple[object, ...]] = got) -> None:
                got.append(tuple(getattr(s, f) for f in order))

            threads = [threading.Thread(target=read, args=(o,))
                       for o in (FIELDS, FIELDS[::-1], ("disks", "gpus", "host"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(map(repr, got)) == sorted(
                repr(tuple(getattr(old, f) for f in o))
                for o in (FIELDS, FIELDS[::-1], ("disks", "gpus", "host")))
            assert list(vars(s)) == list(vars(old)) and _pickled(s) == _pickled(old)
    finally:
        sys.setswitchinterval(interval)
    assert lazy > 100


def _wrong_host_base(self: compact.StaticEpoch, row: Any) -> Any:
    stats = object.__new__(samples.HostStats)
    object.__setattr__(stats, "__dict__", compact._fill_host(
        {**self._host, "swap_total_bytes": 1}, row.host))
    return stats


def _disks_reversed(row: Any) -> Any:
    return tuple(reversed([compact._disk(d) for d in row.disks]))


def _kept_last(obj: HostSample) -> Any:
    """``samples._host_disks`` keeping the two at the dict's end."""
    d = obj.__dict__
    row = d.get("wire_row")
    if row is None:
        return None
    built = d["static_epoch"].row_host(row), d["static_epoch"].row_disks(row)
    d["host"], d["disks"] = built
    return built


MUTANTS: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "host": (compact.StaticEpoch, "row_host", _wrong_host_base),
    "disks": (compact.StaticEpoch, "row_disks", staticmethod(_disks_reversed)),
    "order": (samples, "_host_disks", _kept_last),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_negative_control_a_wrong_lazy_build_is_seen(monkeypatch: pytest.MonkeyPatch,
                                                      mutant: str) -> None:
    where, name, wrong = MUTANTS[mutant]
    monkeypatch.setattr(where, name, wrong)
    got = _differences(variants=2)
    assert got["differ"] > 100, got
