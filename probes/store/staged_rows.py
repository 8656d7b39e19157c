"""A staged sample's row (the ``staging`` table's ``body``): binary since issue 25d.

A row is written for every sample each second and read back when its block is packed, a
minute later, so both ends must be cheap.  The layout::

    header  <BHId q>  tag 1, count of numbers, length of the JSON tail, ts, seq
    numbers float64 little-endian, NaN for None (the protocol refuses non-finite
            numbers, so NaN always means None, as in a packed block)
    tail    JSON: ``[reasons]`` or ``[reasons, pcie]``

Packing a block then takes the numbers as one matrix (:func:`numbers_matrix`), with no
parsing.  Rows written before (JSON ``[ts, seq, reasons, numbers(, pcie)]``, first byte
``[``) are still read (:func:`unpack`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from probes.errors import RigwatchError

TAG = 1
_HEAD = struct.Struct("<BHIdq")


class StagedRowError(RigwatchError, ValueError):
    """A staged row that does not parse (never ours: SQLite commits rows whole)."""

    title = "Recording staged row unreadable"


def values(numbers: Sequence[Any]) -> bytes:
    """A row's numbers as float64 bytes, NaN for None."""
    return np.array(numbers, dtype=np.float64).tobytes()


_NAN = float("nan")


class NumberPacker:
    """:func:`pack` for one host's rows, about three times cheaper (the writer stages a
    thousand rows a second).

    A host's rows keep their length and, mostly, which of their numbers are None (a GPU
    that does not report a field, a disk with no requests): so the packer keeps a
    ``struct`` of the whole header and numbers for the length and the last row's None
    positions, sets those to NaN and packs; a row whose Nones moved fails to pack and is
    packed again after a full scan.  ``numbers`` is changed in place (the writer's own
    list, made per sample).
    """

    __slots__ = ("_nulls", "_struct")

    def __init__(self) -> None:
        self._struct = _row_struct(0)
        self._nulls: list[int] = []

    def row(self, ts: float, seq: int, numbers: list[Any], tail: bytes
            ) -> tuple[bytes, memoryview]:
        """(the staged row, a view of its numbers' float64 bytes): what :func:`pack` and
        :func:`values` give."""
        st = self._struct
        k = len(numbers)
        if st.size == _HEAD.size + 8 * k:
            for i in self._nulls:
                if numbers[i] is None:
                    numbers[i] = _NAN
            try:
                body = st.pack(TAG, k, len(tail), ts, seq, *numbers) + tail
                return body, memoryview(body)[_HEAD.size:st.size]
            except struct.error:  # a None elsewhere (or not a number: values() says)
                pass
        nulls = [i for i, x in enumerate(numbers) if x is None]
        for i in nulls:
            numbers[i] = _NAN
        if st.size != _HEAD.size + 8 * k:
            self._struct = _row_struct(k)
        self._nulls = nulls
        try:
            body = self._struct.pack(TAG, k, len(tail), ts, seq, *numbers) + tail
        except (struct.error, OverflowError):
            body = pack(ts, seq, numbers, tail)
        return body, memoryview(body)[_HEAD.size:_HEAD.size + 8 * k]


def _row_struct(k: int) -> struct.Struct:
    return struct.Struct(f"{_HEAD.format}{k}d")


def join(ts: float, seq: int, raw: bytes, tail: bytes) -> bytes:
    """One row from its parts: ``raw`` from :func:`values`, ``tail`` from :func:`tail`."""
    return b"".join((_HEAD.pack(TAG, len(raw) // 8, len(tail), ts, seq), raw, tail))


def pack(ts: float, seq: int, numbers: Sequence[Any], tail: bytes) -> bytes:
    """One row; ``tail`` is :func:`tail`'s JSON for the sample's reasons (and PCIe)."""
    return join(ts, seq, values(numbers), tail)


def tail(reasons: Sequence[Sequence[str]], pcie: Any = None) -> bytes:
    """The JSON tail of a row (an exact-size copy: orjson's bytes keep their whole output
    buffer, tens of KB, and the writer keeps a host's last tail)."""
    return bytes(memoryview(orjson.dumps([reasons] if pcie is None else [reasons, pcie])))


def parts(body: bytes) -> tuple[float, int, bytes, bytes]:
    """(ts, seq, the numbers' bytes, the JSON tail) of a binary row.

    Raises:
        StagedRowError: not a binary row, or a damaged one.
    """
    try:
        tag, k, tlen, ts, seq = _HEAD.unpack_from(body)
    except struct.error:
        raise StagedRowError("short staged row") from None
    end = _HEAD.size + 8 * k
    if tag != TAG or len(body) != end + tlen:
        raise StagedRowError("damaged staged row")
    return ts, seq, body[_HEAD.size:end], body[end:]


def read_tail(text: bytes) -> tuple[list[list[str]], Any]:
    """(reasons, PCIe data or None) from a row's JSON tail.

    Raises:
        StagedRowError: damaged JSON.
    """
    try:
        reasons, *more = orjson.loads(text)
    except (orjson.JSONDecodeError, ValueError, TypeError):
        raise StagedRowError("damaged staged row") from None
    if not isinstance(reasons, list):
        raise StagedRowError("damaged staged row")
    return reasons, more[0] if more else None


def unpack(body: bytes) -> tuple[float, int, list[list[str]], list[Any], Any]:
    """(ts, seq, reasons, numbers with None, PCIe data) of a row, binary or JSON.

    Raises:
        StagedRowError: a damaged row.
    """
    if body[:1] == b"[":
        try:
            ts, seq, reasons, numbers, *more = orjson.loads(body)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            raise StagedRowError("damaged staged row") from None
        return ts, seq, reasons, numbers, more[0] if more else None
    ts, seq, raw, text = parts(body)
    reasons, pcie = read_tail(text)
    numbers = np.frombuffer(raw, "<f8").tolist()
    return ts, seq, reasons, [None if x != x else x for x in numbers], pcie


def numbers_matrix(raws: Sequence[bytes | memoryview], k: int) -> np.ndarray[Any, Any]:
    """Rows' numbers (each ``k`` float64) as an n × k matrix, NaN for None."""
    return np.frombuffer(b"".join(raws), "<f8").reshape(len(raws), k)
