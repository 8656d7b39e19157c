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
    """:func:`values` for one host's rows, about three times cheaper (the writer packs a
    thousand rows a second).

    A host's rows keep their length and, mostly, which of their numbers are None (a GPU
    that does not report a field, a disk with no requests): so the packer keeps a
    ``struct`` for the length and the last row's None positions, sets those to NaN and
    packs; a row whose Nones moved fails to pack and is packed again after a full scan.
    ``numbers`` is changed in place (the writer's own list, made per sample).
    """

    __slots__ = ("_nulls", "_struct")

    def __init__(self) -> None:
        self._struct = struct.Struct("<0d")
        self._nulls: list[int] = []

    def pack(self, numbers: list[Any]) -> bytes:
        """``numbers`` as float64 bytes, NaN for None (what :func:`values` gives)."""
        st = self._struct
        if st.size == 8 * len(numbers):
            for k in self._nulls:
                if numbers[k] is None:
                    numbers[k] = _NAN
            try:
                return st.pack(*numbers)
            except struct.error:  # a None elsewhere (or not a number: values() says)
                pass
        nulls = [i for i, x in enumerate(numbers) if x is None]
        for k in nulls:
            numbers[k] = _NAN
        if st.size != 8 * len(numbers):
            self._struct = st = struct.Struct(f"<{len(numbers)}d")
        self._nulls = nulls
        try:
            return st.pack(*numbers)
        except (struct.error, OverflowError):
            return values(numbers)


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


def numbers_matrix(raws: Sequence[bytes], k: int) -> np.ndarray[Any, Any]:
    """Rows' numbers (each ``k`` float64) as an n × k matrix, NaN for None."""
    return np.frombuffer(b"".join(raws), "<f8").reshape(len(raws), k)
