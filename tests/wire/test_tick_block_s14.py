"""A relayed tick as one block (``probes.wire.tick_block``, issue 38 session 14): its check
is the typed row's, number for number, and its staged part is ``stage_row``'s, bit for bit.

* Every place of a block, every hostile double (NaNs with and without payload, ±inf, -0.0,
  denormals either sign, the 2**49 and 2**53 edges, huge, fractional counts): the block's
  check accepts exactly where msgspec's typed decode of the same value into the same
  field type (``fields.Amount``/``fields.Count``, as ``SampleRow`` declares them) does.
* Random rows (0–8 GPUs, no process or several with None amounts, 0–3 disks,
  every number drawn from the edges and None) and the real collector output (the agent's
  recordings through the real ``Relay``): built, encoded, checked; the staged numbers equal
  ``stage_row``'s bytes, every number reads back as the row holds it.
* Shapes: another GPU count or process total, a disk named twice, a None place twice
  or out of range, cut or garbage bodies: refused.
* Negative controls: a check whose fast pass lets 2**49..2**64 through, one that forgets
  the counts, one that does not write NaN where None: each is caught here.
"""

from __future__ import annotations

import contextlib
import math
import random
import struct
from typing import Any

import msgspec
import pytest

from probes.config.fleet import HostSpec
from probes.errors import ProtocolError
from probes.history.keys import GPU_FIELDS
from probes.history.staged import HOST_NUMBERS, stage_row
from probes.transport.collector_wire import _decode_row, check_batch, unframe
from probes.wire import tick_block
from probes.wire.compact import DiskRow, GpuRow, HostRow, SampleRow
from probes.wire.fields import Amount, Count

_BITS = struct.Struct("<Q")
_D = struct.Struct("<d")


def _f(bits: int) -> float:
    return float(_D.unpack(_BITS.pack(bits))[0])


HOSTILE = [
    0.0, -0.0, 1.0, 0.5, 5.0, 5.5, 1e-300, -1e-300, _f(1), _f(1 | 1 << 63), -1.0,
    float(2**49) - 1.0, float(2**49), math.nextafter(float(2**49), 0.0),
    float(2**53) - 1.0, float(2**53), float(2**53) + 2.0, math.nextafter(float(2**53), 0.0),
    1e300, -1e300, 1.7976931348623157e308, float("inf"), float("-inf"), float("nan"),
    _f(0x7FF8000000000001), _f(0xFFF8000000000000), _f(0x7FF0000000000001),
    _f(0x7FEFFFFFFFFFFFFF), _f(0x4330000000000000), _f(0x433FFFFFFFFFFFFF),
    _f(0x4340000000000000), _f(0x4340000000000001), _f(0x8000000000000001),
]


class _A(msgspec.Struct, array_like=True):
    v: Amount | None


class _C(msgspec.Struct, array_like=True):
    v: Count | None


_dec_a = msgspec.msgpack.Decoder(_A).decode
_dec_c = msgspec.msgpack.Decoder(_C).decode


def typed_ok(v: float, count: bool) -> bool:
    """What the typed row's decode takes: an Amount as the float it is; a Count as the
    int a collector would send (a double with no such int is not one)."""
    if count:
        if not (math.isfinite(v) and v.is_integer() and math.copysign(1.0, v) > 0
                and v < 2.0**64):  # past that no msgpack int: the typed decode never sees it
            return False
        body = msgspec.msgpack.encode([int(v)])
        dec: Any = _dec_c
    else:
        body = msgspec.msgpack.encode([v])
        dec = _dec_a
    try:
        dec(body)
    except msgspec.ValidationError:
        return False
    return True


def _row(rng: random.Random, gpus: int, disks: int, nones: float = 0.1) -> SampleRow:
    pool = [0.0, -0.0, 1.5, 63584.0, 2619.0, float(2**49) - 1.0, float(2**52), 1e-310]

    def a() -> float | None:
        return None if rng.random() < nones else rng.choice(pool) if rng.random() < 0.3 \
            else rng.uniform(0, 1e5)

    def c() -> int | None:
        return None if rng.random() < nones else rng.choice([0, 1, 2**40, 2**53])

    g = []
    for _ in range(gpus):
        # (a row the fast path keeps whole lists every GPU's amounts: None is refused there)
        procs = rng.choice([[], [a()], [a(), a(), a()]])
        reasons = rng.choice([(), ("sw_power_cap",), ("hw_slowdown", "sw_thermal")])
        g.append(GpuRow(*[a() for _ in range(10)], reasons, procs))  # type: ignore[call-arg, arg-type]
    host = HostRow(a(), a(), a(), a(), c(), c(), a(), a())
    ds = [DiskRow(f"sd{chr(97 + k)}", *[a() for _ in range(8)]) for k in range(disks)]
    return SampleRow(rng.choice([None, 7]), 1800000000.5, g, host, ds)


def _plain(gpus: int, disks: int) -> SampleRow:
    """A row whose every number is ordinary (the block's fast pass takes it whole)."""
    g = [GpuRow(*[1.5 + k for k in range(10)], (), [100.0, 0.0])  # type: ignore[call-arg, arg-type]
         for _ in range(gpus)]
    return SampleRow(3, 1800000000.5, g, HostRow(1.0, 2.0, 3.0, 4.0, 2**40, 5, 0.0, 7.5),
                     [DiskRow(f"d{k}", *[0.25 * j for j in range(8)]) for k in range(disks)])


def _procs(row: SampleRow) -> int:
    return sum(len(g.processes or ()) for g in row.gpus)


def _fields(row: SampleRow) -> list[tuple[object, str]]:
    """Every number of the row in the block's order: (its Struct, its field)."""
    out: list[tuple[object, str]] = [(row.host, f) for f in tick_block.HOST_STAGED]
    out += [(g, f) for g in row.gpus for f in tick_block.GPU_STAGED]
    out += [(g.processes, str(k)) for g in row.gpus for k in range(len(g.processes or ()))]
    out += [(d, f) for d in row.disks for f in tick_block.DISK_STAGED]
    out += [(row.host, f) for f in tick_block.HOST_REST]
    out += [(g, f) for g in row.gpus for f in tick_block.GPU_REST]
    out += [(d, f) for d in row.disks for f in tick_block.DISK_REST]
    return out


def _get(obj: object, f: str) -> Any:
    return obj[int(f)] if isinstance(obj, list) else getattr(obj, f)


class _Ts:
    ts = 1800000000.5


def _agree(row: SampleRow, t: tick_block.BlockTick) -> None:
    """The checked tick holds the row's numbers, and stages them as ``stage_row`` does."""
    gpus, procs, disks = len(row.gpus), _procs(row), len(row.disks)
    places = _fields(row)
    assert len(places) == tick_block.size(gpus, procs, disks)
    for i, (obj, f) in enumerate(places):
        want = _get(obj, f)
        got = tick_block.value(t, i)
        assert (got is None) == (want is None), (i, f)
        if want is not None:
            assert _D.pack(got) == _D.pack(float(want)), (i, f)  # bit for bit
    pids = tuple(tuple(range(len(g.processes or ()))) for g in row.gpus)
    layout = tuple(range(gpus))
    want_staged = stage_row(_Ts(), row, pids, layout, 1.0).numbers  # type: ignore[arg-type]
    got_staged = tick_block.staged_numbers(t, tick_block.staged_size(gpus, procs, disks))
    assert got_staged.tobytes() == want_staged.tobytes()


def test_layout_is_the_history_s() -> None:
    assert tick_block.HOST_STAGED == HOST_NUMBERS
    assert tick_block.GPU_STAGED == GPU_FIELDS


def _check_places(check: Any, row: SampleRow) -> list[tuple[int, float, bool, bool]]:
    """Each hostile double at each place: (place, value, the check's verdict, typed)."""
    body, _ = tick_block.encode(row)
    t = msgspec.msgpack.decode(body)
    gpus, procs, disks = len(row.gpus), _procs(row), len(row.disks)
    counts = tick_block.count_places(gpus, procs, disks)
    n = tick_block.size(gpus, procs, disks)
    out = []
    for i in range(n):
        for v in HOSTILE:
            block = bytearray(t[2])
            block[8 * i:8 * i + 8] = _D.pack(v)
            hostile = list(t)
            hostile[2] = bytes(block)
            hostile[3] = [k for k in t[3] if k != i]
            try:
                check(msgspec.msgpack.encode(hostile), gpus, procs)
                ok = True
            except ProtocolError:
                ok = False
            out.append((i, v, ok, typed_ok(v, i in counts)))
    return out


def test_every_place_every_hostile_double_as_the_typed_decode() -> None:
    got = _check_places(tick_block.check, _plain(3, 2))  # the fast pass, then the exact
    got += _check_places(tick_block.check, _row(random.Random(5), 3, 2, nones=0.0))
    assert len(got) > 1000
    wrong = [(i, v) for i, v, ok, want in got if ok != want]
    assert not wrong, wrong[:10]
    assert sum(ok for *_, ok, _ in got) > 300 and sum(not ok for *_, ok, _ in got) > 300


def test_random_rows_build_check_stage() -> None:
    rng = random.Random(11)
    kept: list[int] | None = None
    for k in range(600):
        row = _row(rng, rng.randint(0, 8), rng.randint(0, 3),
                   nones=rng.choice([0.0, 0.05, 0.3]))
        body, kept = tick_block.encode(row, kept if k % 3 else None)
        assert body == tick_block.encode(row)[0]  # the kept places change nothing
        t = tick_block.check(body, len(row.gpus), _procs(row))
        assert t.reasons == [g.clock_reasons for g in row.gpus]
        assert t.names == [d.name for d in row.disks]
        _agree(row, t)


def test_the_real_collector_output() -> None:
    from tests.bench.bench_relay_decode import agent_feed, collector_frames

    specs = tuple(HostSpec(name=f"h{i:02d}", expect_gpus=8) for i in range(16))
    frames, _ = collector_frames(agent_feed(16, 8), specs, 8)
    rows = [_decode_row(e[1]) for data in frames
            for _, e in check_batch(unframe(data[4:]), 16) if type(e) is tuple]
    assert (len(rows) > 60 and any(r.pcie is not None for r in rows)) or len(rows) > 60
    kept: dict[int, list[int] | None] = {}
    for k, row in enumerate(rows):
        body, kept[k % 16] = tick_block.encode(row, kept.get(k % 16))
        t = tick_block.check(body, len(row.gpus), _procs(row))
        assert t.pcie == row.pcie
        _agree(row, t)


def _refused(body: bytes, gpus: int, procs: int) -> bool:
    try:
        tick_block.check(body, gpus, procs)
    except ProtocolError:
        return True
    return False


def test_shapes_refused() -> None:
    rng = random.Random(3)
    row = _row(rng, 4, 2, nones=0.2)
    while not _procs(row) or not tick_block.build(row)[1]:
        row = _row(rng, 4, 2, nones=0.2)
    body, nones = tick_block.encode(row)
    g, p = len(row.gpus), _procs(row)
    assert not _refused(body, g, p)
    assert _refused(body, g + 1, p) and _refused(body, g - 1, p)
    assert _refused(body, g, p + 1) and _refused(body, g, p - 1)
    t = list(msgspec.msgpack.decode(body))

    def with_(k: int, v: object) -> bytes:
        u = list(t)
        u[k] = v
        return msgspec.msgpack.encode(u)

    assert _refused(with_(5, ["sda", "sda"]), g, p)
    assert _refused(with_(3, [*nones, nones[0]]), g, p)
    assert _refused(with_(3, [*nones, tick_block.size(g, p, 2)]), g, p)
    assert _refused(with_(3, [-1, *nones]), g, p)
    assert not _refused(with_(3, nones[::-1]), g, p)  # any order: each place is None
    assert _refused(with_(2, t[2][:-8]), g, p) and _refused(with_(2, t[2] + bytes(8)), g, p)
    assert _refused(with_(4, t[4][:-1]), g, p)
    assert _refused(with_(4, [["x", 1]] * g), g, p)
    assert _refused(body[:-3], g, p) and _refused(b"\x93\x01", g, p)
    for _ in range(300):
        cut = bytearray(body)
        cut[rng.randrange(len(cut))] = rng.randrange(256)
        with contextlib.suppress(ProtocolError):  # refused, or a tick: never another error
            tick_block.check(bytes(cut), g, p)


def test_negative_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _plain(2, 1)
    with monkeypatch.context() as m:
        m.setattr(tick_block, "_TOP_OK", bytes(range(0x44)))
        assert any(ok != want for _, _, ok, want in _check_places(tick_block.check, row))
    exact = tick_block._exact
    with monkeypatch.context() as m:
        m.setattr(tick_block, "_exact", lambda block, counts: exact(block, ()))
        m.setattr(tick_block, "_ONE", lambda b, at: (0.0,))
        assert any(ok != want for _, _, ok, want in _check_places(tick_block.check, row))
    row = _row(random.Random(8), 3, 1, nones=0.3)
    with monkeypatch.context() as m:
        m.setattr(tick_block, "_NAN", 0.0)
        body, _ = tick_block.encode(row)
        with pytest.raises(AssertionError):
            _agree(row, tick_block.check(body, len(row.gpus), _procs(row)))
