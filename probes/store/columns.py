"""Columnar blocks: a host's samples as static facts once and moving numbers by column.

Most of an 8-GPU sample never changes from one tick to the next (uuids, limits, max
clocks, ECC counters, the processes' owners); what moves is about a hundred numbers.  So a
sample is split (:func:`split`) into a *signature* of everything static and a row of
numbers, in the wire v2's column order (``probes.wire.compact``).  Samples of one host with
one signature form a block; the first sample of the block is kept whole (its *template*,
stored once) and the rest is a matrix with one row per sample (:func:`encode_block`):

* each column is scaled to integers by the smallest power of ten that gives every value
  back exactly (``97.7`` -> ``977``; a column that has none keeps its float's bits),
* then differenced along time and zigzagged, so a slow value is a few small integers,
* then stored by byte plane, as narrow as the column's largest step needs, and deflated.

A decoded sample equals the one recorded (``==`` on the dataclasses): the template gives
every static field, the columns every moving one, ``None`` comes back from a null mask and
integer fields as ``int``; a tick's PCIe chains (every 30th tick) ride in the block's header.
A sample that does not fit (a value of an unexpected type) is not split: the recorder
stores it whole, as before.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import orjson
from msgspec.structs import astuple

from probes.errors import RigwatchError
from probes.store import codec
from probes.store.bounded import DataTooLarge, inflate_more
from probes.wire import fields
from probes.wire.compact import DISK_COLUMNS, HOST_MOVING, DiskRow, GpuRow, HostRow
from probes.wire.decode_fields import MAX_TS
from probes.wire.fields import Type
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, HostSample, HostStats, PcieLink
from probes.wire.sanitize import TooDeep, clean_json, may_need_cleaning

_MOVING = fields.moving_specs(fields.GPU_TABLE)
GPU_NUMBERS = fields.moving_numbers(fields.GPU_TABLE)
"""A GPU's moving numbers (the wire v2's ``gpu`` columns less the reasons and processes),
from the one table: every moving field of a number type is a column, so none is stored
as static by being left out of a list here."""
LEGACY_GPU_NUMBERS = ("mem_used_mib", "util_pct", "mem_util_pct", "temp_c", "power_w",
                      "sm_clock_mhz", "temp_mem_c", "mem_clock_mhz", "pcie_tx_kbs", "pcie_rx_kbs")
"""The GPU columns of a recording that does not name its own (meta ``gpu_numbers``): every
recording made before the table did.  Never changes."""
MAX_RECORDED_COLUMNS = 256
HOST_NUMBERS = HOST_MOVING
DISK_NUMBERS = DISK_COLUMNS[1:]
HOST_INTS = frozenset(i for i, k in enumerate(HOST_NUMBERS) if k.endswith("_bytes"))
"""Positions in ``HOST_NUMBERS`` of integer fields (they come back as ``int``)."""

_GPU_STATIC = itemgetter(*[s.name for s in fields.static_specs(fields.GPU_TABLE)
                           if s.type is not Type.PROCESSES])
_PROC_STATIC = itemgetter(*[f.name for f in dataclasses.fields(GpuProcess)
                            if f.name != "used_mib"])
_HOST_STATIC = itemgetter(*[f.name for f in dataclasses.fields(HostStats)
                            if f.name not in HOST_NUMBERS])
_GPU_NUM = itemgetter(*GPU_NUMBERS)
_USED = itemgetter("used_mib")
_REASONS = itemgetter("clock_reasons")
_NAME = itemgetter("name")
_TUPLE = frozenset({tuple})
_HOST_NUM = itemgetter(*HOST_NUMBERS)
_DISK_NUM = itemgetter(*DISK_NUMBERS)
_NUMBER_TYPES = frozenset({float, int, type(None)})
_EXACT_INT = 2 ** 53
"""Integers up to this survive a trip through a float64 (the matrix's type)."""
_ROW_NUMBERS = itemgetter(*[i for i, s in enumerate(_MOVING) if s.type in fields.NUMBERS])
_ROW_REASONS = itemgetter(*[i for i, s in enumerate(_MOVING) if s.type is Type.REASONS])
_ROW_PROCS = itemgetter(*[i for i, s in enumerate(_MOVING) if s.type is Type.PROCESS_MIB])
"""Where a wire row (``GpuRow``, built from the same table) holds a frame's numbers, each
GPU's reasons and its processes' memory."""
_ROWS_FIT = (tuple(GpuRow.__struct_fields__) == tuple(s.name for s in _MOVING)
             and len(GPU_NUMBERS) > 1
             and HostRow.__struct_fields__ == HOST_NUMBERS
             and DiskRow.__struct_fields__ == ("name", *DISK_NUMBERS))
"""The wire's rows hold a frame's numbers in its order (else ``wire_row`` is not used)."""
_MAX_DECIMALS = 6
_POWERS = [10.0 ** d for d in range(_MAX_DECIMALS + 1)]
_WIDE = (np.uint64(1 << 8), np.uint64(1 << 16), np.uint64(1 << 32))
"""A column's zigzagged steps below these fit 1, 2 or 4 bytes."""
_MAGIC = b"RWB1"
_HEAD = struct.Struct("<4sIII")
"""magic, rows, columns, length of the JSON part."""

Signature = tuple[Any, ...]
"""Everything static in a sample: two samples with equal signatures share a template."""


class BlockError(RigwatchError, ValueError):
    """A block that cannot be decoded (damaged, or from a newer rigwatch)."""

    title = "Recording block unreadable"


class Frame(NamedTuple):
    """One sample split: its static signature and its moving values (a tuple: the writer
    makes one per sample, a thousand a second)."""

    signature: Signature
    ts: float
    seq: int
    reasons: tuple[tuple[str, ...], ...]
    """Each GPU's clock reasons (text, kept as a per-block table of distinct tuples)."""
    numbers: list[float | int | None]
    pcie: dict[str, list[dict[str, Any]]] | None = None
    """The tick's PCIe chains as JSON-able data, on the ticks that carry them."""


def split(s: HostSample, seen: dict[int, tuple[Any, ...]] | None = None) -> Frame | None:
    """The sample as signature and numbers; None when it must be stored whole.

    Written for speed (the recorder's writer calls it for every sample): the dataclasses'
    ``__dict__`` read through ``itemgetter`` and ``map``, no per-field Python code.
    ``seen`` (one per host, kept by the caller) remembers each GPU's last process tuple
    with its static part and amounts: the wire's decoder hands the same tuple on while the
    amounts stay, so most ticks skip the processes' seventeen fields.  It also remembers
    the last signature with the wire's static epoch (``static_epoch``): a sample of the
    same epoch with the same disks has the same signature (the same object), which is then
    neither built nor compared field by field.  Such a sample's numbers are read from the
    wire's decoded row when it carries one (``wire_row``, :func:`_from_row`).
    """
    ts, seq = s.ts, s.seq
    if type(ts) is not float or type(seq) is not int:
        return None
    pcie = None
    if s.pcie is not None:
        try:
            pcie = {str(bus): [codec.encode_dataclass(link) for link in links]
                    for bus, links in s.pcie.items()}
        except (codec.CodecError, TypeError, AttributeError):
            return None
    if seen is None:
        seen = {}
    row = s.wire_row
    if row is not None and pcie is None and _ROWS_FIT:
        memo = seen.get(-1)
        if memo is not None and memo[0] is s.static_epoch:
            frame = _from_row(row, ts, seq, memo)
            if frame is not None:
                return frame
    try:
        gd = [g.__dict__ for g in s.gpus]
        nums: list[Any] = []
        more = nums.extend
        procs_static: list[Any] = []
        for i, d in enumerate(gd):
            procs = d["processes"]
            if procs is None:
                procs_static.append(None)
            else:
                last = seen.get(i)
                if last is None or last[0] is not procs:
                    pd = [p.__dict__ for p in procs]
                    last = seen[i] = (procs, tuple(map(_PROC_STATIC, pd)), list(map(_USED, pd)))
                procs_static.append(last[1])
                more(last[2])
            more(_GPU_NUM(d))
        reasons = tuple(map(_REASONS, gd))
        h = s.host.__dict__
        host = _HOST_NUM(h)
        for k in HOST_INTS:
            v = host[k]
            if v is not None and (type(v) is not int or not -_EXACT_INT < v < _EXACT_INT):
                return None
        more(host)
        dd = [d.__dict__ for d in s.disks]
        names = tuple(map(_NAME, dd))
        for d in dd:
            more(_DISK_NUM(d))
        epoch = s.static_epoch
        memo = seen.get(-1)
        if epoch is not None and memo is not None and memo[0] is epoch and memo[1] == names:
            # The wire's fast path typed every number (msgspec: float, int or None) and
            # every GPU's reasons (a tuple of str): nothing below to check.
            return Frame(memo[2], ts, seq, reasons, nums, pcie)
        sig: list[Any] = list(map(_GPU_STATIC, gd))
        sig += procs_static
        sig.append(_HOST_STATIC(h))
        sig += names
        sig.append((len(gd), len(dd)))
        signature = tuple(sig)
    except (AttributeError, KeyError):  # not the dataclasses this module knows
        return None
    if not set(map(type, nums)) <= _NUMBER_TYPES or not set(map(type, reasons)) <= _TUPLE:
        return None
    if epoch is not None:
        seen[-1] = (epoch, names, signature)
    return Frame(signature, ts, seq, reasons, nums, pcie)


def _from_row(row: Any, ts: float, seq: int, memo: tuple[Any, ...]) -> Frame | None:
    """:func:`split`'s frame from the wire's decoded row (``wire_row``) of a sample whose
    static facts are the remembered signature's (``memo``: epoch, disk names, signature);
    None when its disks differ.  The rows' values are the sample's own objects, typed by
    msgspec: each GPU's processes' amounts, its numbers; the host's; each disk's."""
    nums: list[Any] = []
    more = nums.extend
    reasons = []
    for g in row.gpus:
        t = astuple(g)
        more(_ROW_PROCS(t))
        more(_ROW_NUMBERS(t))
        reasons.append(_ROW_REASONS(t))
    host = astuple(row.host)
    for k in HOST_INTS:
        v = host[k]
        if v is not None and not -_EXACT_INT < v < _EXACT_INT:
            return None
    more(host)
    names = []
    for d in row.disks:
        t = astuple(d)
        names.append(t[0])
        more(t[1:])
    if tuple(names) != memo[1]:
        return None
    return Frame(memo[2], ts, seq, tuple(reasons), nums, None)


def recorded_layout(text: str | None) -> tuple[str, ...]:
    """A recording's GPU columns from its meta ``gpu_numbers`` (a JSON list; None: an older
    recording's :data:`LEGACY_GPU_NUMBERS`).  ``GPU_NUMBERS`` itself when they are this
    table's (the reader then takes the fast path).

    Raises:
        BlockError: not a list of names (the file may be someone else's).
    """
    if text is None:
        names: Any = LEGACY_GPU_NUMBERS
    else:
        try:
            names = orjson.loads(text)
        except orjson.JSONDecodeError:
            names = None
        if not (isinstance(names, list) and 0 < len(names) <= MAX_RECORDED_COLUMNS
                and all(isinstance(n, str) and n.isidentifier() for n in names)
                and len(set(names)) == len(names)):
            raise BlockError("the recording's GPU column list is unreadable")
    names = tuple(names)
    return GPU_NUMBERS if names == GPU_NUMBERS else names


def _relayout(names: tuple[str, ...]) -> tuple[dict[str, None], tuple[str, ...]]:
    """For a recording whose GPU columns are ``names``: this table's columns it lacks (read
    as None) and its columns this table has no more (dropped)."""
    return dict.fromkeys(n for n in GPU_NUMBERS if n not in names), \
        tuple(n for n in names if n not in GPU_NUMBERS)


def _int_columns(template: HostSample, names: tuple[str, ...] = GPU_NUMBERS) -> list[int]:
    """Positions in a frame's numbers of the integer fields, for the template's layout."""
    out = []
    k = 0
    for g in template.gpus:
        k += len(g.processes or ()) + len(names)
    out += [k + i for i in sorted(HOST_INTS)]
    return out


Row = tuple[float, float, int, Sequence[Sequence[str]], Sequence[Any], Any]
"""(recording time, the sample's own ts, seq, each GPU's reasons, numbers, PCIe chains as
data or None)."""


def encode_block(rows: Sequence[Row], level: int = 6) -> bytes:
    """Rows of one signature as one compressed block.

    ``reasons`` may be lists (a row read back from the staging table's JSON).
    """
    table: dict[tuple[str, ...], int] = {}
    matrix: list[list[Any]] = []
    chains: dict[str, Any] = {}
    last: Any = None
    codes: list[int] = []
    for i, (rts, ts, seq, reasons, numbers, pcie) in enumerate(rows):
        if pcie is not None:
            chains[str(i)] = pcie
        if reasons != last:  # they seldom change from one tick to the next
            codes = [table.setdefault(tuple(r), len(table)) for r in reasons]
            last = reasons
        matrix.append([rts, ts, seq, *codes, *numbers])
    try:  # None becomes NaN: the protocol refuses non-finite numbers, so NaN means None
        values: np.ndarray[Any, Any] = np.array(matrix, dtype=np.float64)
    except ValueError:
        raise BlockError("rows of different lengths in one block") from None
    if values.ndim != 2:
        raise BlockError("rows of different lengths in one block")
    return _encode_values(values, list(table), len(rows[0][3]) if rows else 0, chains, level)


def encode_arrays(rts: Sequence[float], ts: Sequence[float], seq: Sequence[int],
                  codes: Sequence[Sequence[int]], numbers: np.ndarray[Any, Any],
                  table: Sequence[tuple[str, ...]], chains: dict[str, Any],
                  level: int = 6) -> bytes:
    """What :func:`encode_block` makes of the same rows, from their parts as arrays:
    ``codes`` each row's reasons as indexes into ``table``, ``numbers`` an n × k float64
    matrix with NaN for None (staged rows, :mod:`probes.store.staged_rows`)."""
    n, k = numbers.shape
    c = len(codes[0]) if n else 0
    values = np.empty((n, 3 + c + k), dtype=np.float64)
    values[:, 0] = rts
    values[:, 1] = ts
    values[:, 2] = seq
    if c:
        values[:, 3:3 + c] = codes
    values[:, 3 + c:] = numbers
    return _encode_values(values, table, c, chains, level)


def _encode_values(values: np.ndarray[Any, Any], table: Sequence[Sequence[str]], ngpus: int,
                   chains: dict[str, Any], level: int) -> bytes:
    # Called once per closed block (a thousand hosts close about 17 a second): written to
    # make few numpy calls, each column leaving the search for its scale once it has one.
    nulls = np.isnan(values)
    has_nulls = bool(nulls.any())
    if has_nulls:
        values[nulls] = 0.0
    n, c = values.shape
    ints: np.ndarray[Any, Any] = np.empty((n, c), dtype=np.int64)
    decimals = np.full(c, -1, dtype=np.int8)
    todo = np.arange(c)
    v = values
    with np.errstate(invalid="ignore", over="ignore"):
        for d, p in enumerate(_POWERS):
            r = np.round(v * p) if d else np.round(v)
            ok = ((r / p == v) & (np.abs(r) < _EXACT_INT)).all(axis=0)
            if ok.all():
                ints[:, todo] = r
                decimals[todo] = d
                todo = todo[:0]
                break
            if ok.any():
                cols = todo[ok]
                ints[:, cols] = r[:, ok]
                decimals[cols] = d
                keep = ~ok
                todo = todo[keep]
                v = v[:, keep]
    if len(todo):  # no power of ten gives these back: their float's bits
        ints[:, todo] = values[:, todo].view(np.int64)
    steps = ints.copy()
    steps[1:] -= ints[:-1]
    zz = ((steps << 1) ^ (steps >> 63)).view(np.uint64)
    top = zz.max(axis=0) if n else np.zeros(c, dtype=np.uint64)
    widths = np.where(top < _WIDE[0], 1, np.where(top < _WIDE[1], 2,
                                                    np.where(top < _WIDE[2], 4, 8))).astype(np.int8)
    by_column = zz.T
    planes = []
    for w in (1, 2, 4, 8):
        cols = np.flatnonzero(widths == w)
        if len(cols):
            part = by_column[cols].astype(f"<u{w}")
            planes.append(part.view(np.uint8).reshape(-1, w).T.tobytes())
    head = {"reasons": [list(r) for r in table], "nulls": has_nulls, "gpus": ngpus,
            "pcie": chains}
    text = orjson.dumps(head)
    parts = [_HEAD.pack(_MAGIC, n, c, len(text)), text, decimals.tobytes(), widths.tobytes()]
    if has_nulls:
        parts.append(np.packbits(nulls.T).tobytes())
    parts += planes
    return zlib.compress(b"".join(parts), level)


class Block:
    """A decoded block, its rows built on demand (a block holds minutes of samples and a
    reader may hold one per host at once: numbers stay in arrays until asked for)."""

    def __init__(self, values: np.ndarray[Any, Any], ints: np.ndarray[Any, Any],
                 nulls: np.ndarray[Any, Any] | None, ncodes: int, table: list[tuple[str, ...]],
                 int_columns: Sequence[int], pcie: Any = None) -> None:
        self._values = values
        self._ints = ints
        self._nulls = nulls
        self._ncodes = ncodes
        self._table = table
        self._pcie = pcie if isinstance(pcie, dict) else {}
        self._int_cols = [3 + ncodes + i for i in int_columns if 3 + ncodes + i < values.shape[1]]
        self.rts: list[float] = values[:, 0].tolist()
        """Each row's recording time."""

    def __len__(self) -> int:
        return len(self.rts)

    def row(self, i: int) -> tuple[float, int, tuple[tuple[str, ...], ...], list[Any], Any]:
        """(the sample's ts, seq, each GPU's reasons, numbers, PCIe data) of row ``i``.

        Raises:
            BlockError: a reason code out of range (a damaged block).
        """
        c = self._ncodes
        row: list[Any] = self._values[i].tolist()
        ints = self._ints[i]
        for k in self._int_cols:
            row[k] = int(ints[k])
        if self._nulls is not None:
            for k in np.flatnonzero(self._nulls[i]).tolist():
                row[k] = None
        try:
            reasons = tuple(self._table[int(ints[3 + j])] for j in range(c))
        except IndexError:
            raise BlockError("damaged block: clock reasons out of range") from None
        return row[1], int(ints[2]), reasons, row[3 + c:], self._pcie.get(str(i))


def decode_block(body: bytes, int_columns: Sequence[int] = ()) -> Block:
    """The rows :func:`encode_block` packed; ``int_columns`` (positions in the numbers)
    come back as ``int``.

    A block may come from a file someone else made: it is inflated no further than its
    header allows (``MAX_BLOCK_*``), and its counts must match its length exactly before
    any matrix is allocated.  A number that is not finite or lies beyond ±2**53 reads as
    None, as the wire reads it.

    Raises:
        BlockError: damaged, hostile or unknown data.
    """
    try:
        data = _inflate_block(body)
        _magic, n, c, tlen = _HEAD.unpack_from(data)
        pos = _HEAD.size
        head = orjson.loads(data[pos:pos + tlen])
        if may_need_cleaning(data[pos:pos + tlen]):  # reasons and PCIe text, once a block
            head = clean_json(head)
        pos += tlen
        decimals = np.frombuffer(data, np.int8, c, pos)
        pos += c
        widths = np.frombuffer(data, np.int8, c, pos)
        pos += c
        if not isinstance(head, dict) or not np.isin(widths, (1, 2, 4, 8)).all():
            raise BlockError("damaged block: bad column widths")
        size = (n * c + 7) // 8 if head.get("nulls") else 0
        if pos + size + n * int(widths.astype(np.int64).sum()) != len(data):
            raise BlockError("block length does not match its header")
        nulls = None
        if size:
            bits = np.unpackbits(np.frombuffer(data, np.uint8, size, pos))[:n * c]
            nulls = bits.reshape(c, n).T.astype(bool)
            pos += size
        zz = np.zeros((n, c), dtype=np.uint64)
        for w in (1, 2, 4, 8):
            cols = np.flatnonzero(widths == w)
            if not len(cols):
                continue
            size = n * len(cols) * w
            plane = np.frombuffer(data, np.uint8, size, pos).reshape(w, -1).T.copy()
            zz[:, cols] = plane.view(f"<u{w}").reshape(len(cols), n).T
            pos += size
        table = [tuple(str(x) for x in r) for r in head.get("reasons", [])]
    except (zlib.error, struct.error, ValueError, TypeError, KeyError, TooDeep) as e:
        raise BlockError(f"damaged block: {e}") from None
    zzi = zz.view(np.int64)
    steps = (zz >> np.uint64(1)).view(np.int64) ^ -(zzi & 1)
    ints = np.cumsum(steps, axis=0)
    values = ints.astype(np.float64)
    for d in np.unique(decimals):
        cols = np.flatnonzero(decimals == d)
        if d < 0:
            values[:, cols] = ints[:, cols].view(np.float64)
        elif d > 0:
            values[:, cols] = ints[:, cols] / (10.0 ** int(d))
    with np.errstate(invalid="ignore"):
        wild = ~(np.abs(values) <= _EXACT_INT)  # NaN, ±Inf, beyond what a float holds
        if wild.any():
            nulls = wild if nulls is None else nulls | wild
        rts = values[:, 0]
        rts[~((rts >= 0) & (rts <= MAX_TS))] = np.nan  # a time no recording has: unread
    return Block(values, ints, nulls, _codes_count(head, c), table, int_columns,
                 head.get("pcie"))


MAX_BLOCK_ROWS = 1 << 16
"""More rows than a block is ever written with: 240 whole samples, or one host's five-minute
buckets of 240 four-hour groups (11,520)."""
MAX_BLOCK_CELLS = 1 << 23
"""Rows × columns: an 8-GPU host has 131 columns, so its largest block is 1.5 M cells.
Decoding a block holds about five matrices of this many 8-byte cells."""
MAX_BLOCK_HEAD = 4 << 20
"""The JSON part (clock-reason table, PCIe chains): tens of KB in a real block."""
MAX_BLOCK_BYTES = 32 << 20
"""A whole block inflated: the largest real one (11,520 rows × 131 columns at 8 bytes) is
12 MB; so a block refused costs at most about 15 ms of inflating."""


def _inflate_block(body: bytes) -> bytes:
    """A block's bytes, inflated no further than its header's counts allow.

    Raises:
        BlockError: not a block, counts beyond a block's, or more data than they say.
    """
    d = zlib.decompressobj()
    head = d.decompress(body, _HEAD.size)
    magic, n, c, tlen = _HEAD.unpack_from(head)
    if magic != _MAGIC:
        raise BlockError("not a rigwatch block")
    if n > MAX_BLOCK_ROWS or n * c > MAX_BLOCK_CELLS or tlen > MAX_BLOCK_HEAD:
        raise BlockError(f"a block header claims {n} rows of {c} columns: more than a "
                         "block holds")
    most = min(tlen + 2 * c + (n * c + 7) // 8 + 8 * n * c, MAX_BLOCK_BYTES)
    try:
        return head + inflate_more(d, most, "block")
    except DataTooLarge as e:
        raise BlockError(str(e)) from None


def _codes_count(head: dict[str, Any], c: int) -> int:
    n = head.get("gpus")
    return int(n) if isinstance(n, int) and 0 <= n <= c - 3 else 0


def int_columns(template: HostSample, names: tuple[str, ...] = GPU_NUMBERS) -> list[int]:
    """Positions in a frame's numbers of the integer fields, for the template's layout
    (``names``: the recording's GPU columns, :func:`recorded_layout`)."""
    return _int_columns(template, names)


_new = object.__new__
_set = object.__setattr__


def static_part(s: HostSample) -> HostSample:
    """The sample with its moving values blanked (None, no clock reasons, no PCIe chains):
    what a block's template is stored as.

    :func:`rebuild` takes every moving value from the block's rows, so the template's own
    numbers were a second copy of its block's first row; blanked, a template deflates to
    about two thirds (747 -> 503 B for a simulated 8-GPU host).  Templates stored whole
    before still read: their numbers are overwritten as before.
    """
    gpus = []
    for g in s.gpus:
        d = dict(g.__dict__)
        d.update(dict.fromkeys(GPU_NUMBERS))
        d["clock_reasons"] = ()
        if g.processes is not None:
            d["processes"] = tuple([_with_used(p, None) for p in g.processes])
        obj = _new(GpuSample)
        _set(obj, "__dict__", d)
        gpus.append(obj)
    h = dict(s.host.__dict__)
    h.update(dict.fromkeys(HOST_NUMBERS))
    host = _new(HostStats)
    _set(host, "__dict__", h)
    disks = []
    for disk in s.disks:
        obj_d = _new(DiskStats)
        _set(obj_d, "__dict__", {"name": disk.name, **dict.fromkeys(DISK_NUMBERS)})
        disks.append(obj_d)
    out = _new(HostSample)
    _set(out, "__dict__", {"ts": s.ts, "seq": s.seq, "gpus": tuple(gpus), "host": host,
                           "disks": tuple(disks), "pcie": None})
    return out


def rebuild(template: HostSample, ts: float, seq: int, reasons: tuple[tuple[str, ...], ...],
            numbers: Sequence[Any], pcie: Any = None,
            names: tuple[str, ...] = GPU_NUMBERS) -> HostSample:
    """The sample a row stands for: the template's static fields, the row's numbers
    (each GPU's in ``names``: the recording's columns, :func:`recorded_layout`).

    Built as the compact wire reader builds samples (``__dict__`` filled at once): the
    values were checked when the template and the numbers were recorded.
    """
    k = 0
    gpus = []
    ng = len(names)
    fix = None if names is GPU_NUMBERS else _relayout(names)
    for g, why in zip(template.gpus, reasons, strict=True):
        d = dict(g.__dict__)
        procs = g.processes
        if procs is not None:
            np_ = len(procs)
            d["processes"] = tuple([_with_used(p, m) for p, m
                                    in zip(procs, numbers[k:k + np_], strict=True)])
            k += np_
        d.update(zip(names, numbers[k:k + ng], strict=True))
        if fix is not None:
            d.update(fix[0])
            for gone in fix[1]:
                del d[gone]
        k += ng
        d["clock_reasons"] = why
        obj = _new(GpuSample)
        _set(obj, "__dict__", d)
        gpus.append(obj)
    h = dict(template.host.__dict__)
    nh = len(HOST_NUMBERS)
    h.update(zip(HOST_NUMBERS, numbers[k:k + nh], strict=True))
    k += nh
    host = _new(HostStats)
    _set(host, "__dict__", h)
    disks = []
    nd = len(DISK_NUMBERS)
    for disk in template.disks:
        dd = {"name": disk.name}
        dd.update(zip(DISK_NUMBERS, numbers[k:k + nd], strict=True))
        k += nd
        obj_d = _new(DiskStats)
        _set(obj_d, "__dict__", dd)
        disks.append(obj_d)
    if k != len(numbers):
        raise BlockError(f"a row of {len(numbers)} numbers for a template of {k}")
    chains = None
    if pcie is not None:
        if not isinstance(pcie, dict):
            raise BlockError("damaged PCIe chains")
        try:
            chains = {str(bus): tuple(codec.decode_dataclass(PcieLink, x) for x in links)
                      for bus, links in pcie.items()}
        except (codec.CodecError, TypeError):
            raise BlockError("damaged PCIe chains") from None
    out = _new(HostSample)
    _set(out, "__dict__", {"ts": ts, "seq": seq, "gpus": tuple(gpus), "host": host,
                           "disks": tuple(disks), "pcie": chains})
    return out


def _with_used(p: GpuProcess, mib: Any) -> GpuProcess:
    obj = _new(GpuProcess)
    _set(obj, "__dict__", {**p.__dict__, "used_mib": mib})
    return obj
