"""A relayed v2 tick's numbers as ONE packed float64 block (issue 38, session 14): the
format and its checks, not yet what a collector relays.

Today a collector relays a tick as its typed row in msgpack (``collector_wire``); the
console decodes ~120 numbers into ~20 Structs and ~100 float objects, packs the history's
part of them again (``staged.stage_row``) and frees the rest a second later, cold.  Here a
tick is ``BlockTick``: the numbers as one ``bytes`` of little-endian doubles, laid out as
the history stages them (``staged.Staged.numbers``: the host's staged numbers, each GPU's,
the processes' amounts, 4 a disk) and then the rest (``BLOCK_REST``), with the texts beside
it.  None travels as 0.0 and is listed in ``nones`` (a None value's place, never a NaN in
the block: NaN bits could carry a payload, and the history stores what it is given).

``check`` holds a block exactly to the typed row's bounds (``fields.Amount``: a float in
[0, 2**53), -0.0 too; ``fields.Count``: an integer in [0, 2**53], as an int on the wire so
never -0.0): one C pass over the doubles' top bytes clears every number under 2**49 that
is not negative; any other number (or a block with one) is judged one by one
(``_exact``).  ``tests/wire/test_tick_block_s14.py`` holds it to msgspec's typed decode over
hostile values, and ``staged_numbers`` to ``stage_row``'s bytes.

Measured (tests/bench/bench_wire_s14.py, RESULTS.md "#38 a relayed tick as one block"):
what the console would save and what the collector would pay, before any reader is moved
to it.
"""

from __future__ import annotations

import math
import sys
from array import array
from itertools import chain
from operator import attrgetter
from struct import Struct
from typing import Any

import msgspec

from probes.errors import ProtocolError
from probes.wire import structs
from probes.wire.compact import GPU_ROW_FIELDS, HostRow, SampleRow
from probes.wire.structs import Seq, Stamp

HOST_STAGED = ("cpu_pct", "mem_used_bytes", "swap_in_pages_s", "swap_out_pages_s")
"""The host's numbers the history stages, in its order (``staged.HOST_NUMBERS``)."""
GPU_STAGED = ("mem_used_mib", "util_pct", "temp_c", "power_w", "sm_clock_mhz")
"""A GPU's numbers the history stages, in its order (``history.keys.GPU_FIELDS``)."""
DISK_STAGED = ("util", "r_await", "w_await", "aqu_sz")
"""A disk's numbers the history stages, in its order (``staged.StagedDisk``)."""
HOST_REST = tuple(f for f in HostRow.__struct_fields__ if f not in HOST_STAGED)
GPU_REST = tuple(f for f in GPU_ROW_FIELDS if f not in GPU_STAGED
                 and f not in ("clock_reasons", "processes"))
DISK_REST = ("r_s", "w_s", "rkb_s", "wkb_s")
BLOCK_REST = ("host", "gpus", "disks")
"""After the staged part: the host's other numbers, each GPU's, each disk's."""
COUNT_FIELDS = ("mem_used_bytes", "swap_used_bytes")
"""The host's ``Count`` fields (ints on the wire; a reader of the block gives them back as
``int``, exact: every one is at most 2**53); every other number is an ``Amount``."""

_H = attrgetter(*HOST_STAGED)
_HR = attrgetter(*HOST_REST)
_G = attrgetter(*GPU_STAGED)
_GR = attrgetter(*GPU_REST)
_DS = attrgetter(*DISK_STAGED)
_DR = attrgetter(*DISK_REST)
_PROCS = attrgetter("processes")
_REASONS = attrgetter("clock_reasons")
_NAME = attrgetter("name")
_chain = chain.from_iterable
_PACKS: dict[int, Any] = {}
_UNPACKS: dict[int, Any] = {}
_ONE = Struct("<d").unpack_from
_TOP_OK = bytes(range(0x43))
"""A little-endian double whose top byte is one of these is finite, not negative (no
sign bit) and under 2**49 (exponent under 0x430)."""
_LIMIT = float(2**53)
_NAN = float("nan")
_BIG = sys.byteorder != "little"


class BlockTick(msgspec.Struct, array_like=True, gc=False):
    """A v2 tick as the block relays it (msgpack)."""

    seq: Seq | None
    ts: Stamp
    block: bytes
    nones: list[int]
    """The places (in doubles) of the numbers not reported (0.0 in ``block``; whatever a
    place holds, it reads as None)."""
    reasons: list[tuple[str, ...]]
    """Each GPU's clock-event reasons, in the tick's GPU order."""
    names: list[str]
    """Each disk's name, in the tick's order."""
    pcie: structs.Chains | None = None


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(BlockTick).decode


def _pack(n: int) -> Any:
    pack = _PACKS.get(n)
    if pack is None:
        if len(_PACKS) >= 4096:  # bounded, whatever the hosts send
            _PACKS.clear()
        pack = _PACKS[n] = Struct(f"<{n}d").pack
    return pack


def build(row: SampleRow, kept: list[int] | None = None) -> tuple[bytes, list[int]]:
    """The collector's side: ``row``'s numbers as a block and the None places.

    ``kept``: the stream's last None places, tried first (a host's unreported fields are
    the same tick after tick): the values are copied once, those places set to 0.0 and
    packed; the pack refuses any other None, and then every place is searched."""
    gpus, disks, host = row.gpus, row.disks, row.host
    values = [*_H(host), *_chain(map(_G, gpus)), *_chain(filter(None, map(_PROCS, gpus))),
              *_chain(map(_DS, disks)), *_HR(host), *_chain(map(_GR, gpus)),
              *_chain(map(_DR, disks))]
    pack = _pack(len(values))
    if kept is not None:
        try:
            for i in kept:
                if values[i] is not None:
                    raise ValueError(i)
                values[i] = 0.0
            return pack(*values), kept
        except Exception:  # another None, or a kept place gone: search every place
            values = [*_H(host), *_chain(map(_G, gpus)),
                      *_chain(filter(None, map(_PROCS, gpus))), *_chain(map(_DS, disks)),
                      *_HR(host), *_chain(map(_GR, gpus)), *_chain(map(_DR, disks))]
    nones = [i for i, v in enumerate(values) if v is None]
    return pack(*[0.0 if v is None else v for v in values]), nones


def encode(row: SampleRow, kept: list[int] | None = None) -> tuple[bytes, list[int]]:
    """``row`` as a ``BlockTick`` in msgpack, and its None places (the next ``kept``)."""
    block, nones = build(row, kept)
    return _encode(BlockTick(row.seq, row.ts, block, nones, list(map(_REASONS, row.gpus)),
                             list(map(_NAME, row.disks)), row.pcie)), nones


def count_places(gpus: int, procs: int, disks: int) -> tuple[int, int]:
    """Where the host's ``Count`` fields sit in a block of that shape."""
    staged = len(HOST_STAGED) + len(GPU_STAGED) * gpus + procs + len(DISK_STAGED) * disks
    return HOST_STAGED.index("mem_used_bytes"), staged + HOST_REST.index("swap_used_bytes")


def size(gpus: int, procs: int, disks: int) -> int:
    """Doubles in a block of that shape."""
    return (len(HOST_STAGED) + len(HOST_REST) + (len(GPU_STAGED) + len(GPU_REST)) * gpus
            + procs + (len(DISK_STAGED) + len(DISK_REST)) * disks)


def staged_size(gpus: int, procs: int, disks: int) -> int:
    """Doubles of a block's staged part."""
    return len(HOST_STAGED) + len(GPU_STAGED) * gpus + procs + len(DISK_STAGED) * disks


def _exact(block: bytes, counts: tuple[int, ...]) -> bool:
    n = len(block) // 8
    unpack = _UNPACKS.get(n)
    if unpack is None:
        if len(_UNPACKS) >= 4096:
            _UNPACKS.clear()
        unpack = _UNPACKS[n] = Struct(f"<{n}d").unpack
    values = unpack(block)
    for i, v in enumerate(values):
        if not 0 <= v < _LIMIT and not (v == _LIMIT and i in counts):
            return False
    for i in counts:
        v = values[i]
        if not v.is_integer() or math.copysign(1.0, v) < 0:
            return False
    return True


def check(body: bytes, gpus: int, procs: int) -> BlockTick:
    """The tick of ``body`` where it fits a stream of ``gpus`` GPUs listing ``procs``
    processes in all, every number within its typed bounds, every None place a place
    once, no disk named twice; ProtocolError otherwise (the texts' printability is the caller's,
    as for a row)."""
    try:
        t = _decode(body)
    except msgspec.ValidationError as e:
        raise ProtocolError(f"a block tick: {e}") from None
    except msgspec.DecodeError as e:
        raise ProtocolError(f"a block tick: {e}") from None
    block, names = t.block, t.names
    disks = len(names)
    n = size(gpus, procs, disks)
    if len(t.reasons) != gpus or len(block) != 8 * n:
        raise ProtocolError("a block tick of another shape")
    if len(set(names)) != disks:
        raise ProtocolError("a disk named twice")
    counts = count_places(gpus, procs, disks)
    if block[7::8].translate(None, _TOP_OK):
        if not _exact(block, counts):
            raise ProtocolError("a block tick's number out of bounds")
    else:
        for i in counts:
            if not _ONE(block, 8 * i)[0].is_integer():
                raise ProtocolError("a block tick's count not an integer")
    nones = t.nones
    if nones and (min(nones) < 0 or max(nones) >= n or len(set(nones)) != len(nones)):
        raise ProtocolError("a block tick's None places are not its places")
    return t


def staged_numbers(t: BlockTick, staged: int) -> array[float]:
    """The history's staged numbers of a checked tick (``staged``: ``staged_size``): one
    copy of the block's first part, NaN where None (``staged.Staged.numbers``)."""
    nums = array("d")
    nums.frombytes(t.block[:8 * staged])
    if _BIG:
        nums.byteswap()
    for i in t.nones:
        if i < staged:
            nums[i] = _NAN
    return nums


def value(t: BlockTick, i: int) -> float | None:
    """Number ``i`` of a checked tick (None: not reported)."""
    if i in t.nones:
        return None
    return float(_ONE(t.block, 8 * i)[0])
