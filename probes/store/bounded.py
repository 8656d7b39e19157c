"""Inflating what a recording file holds, within a cap: a few bytes must not become gigabytes.

Deflate packs a run of one byte about a thousand to one, so a 2 MB row of a shared
recording can inflate to 2 GiB (the security review's R3; R4 did it to a block).  Every
row and block is therefore inflated with ``max_length``: the output stops at the cap, and
a row that would go past it is refused as damaged, after the work of the cap and no more.
The caps are far above what rigwatch ever writes, so a real recording never meets them.
"""

from __future__ import annotations

import zlib

from probes.errors import RigwatchError

MAX_ROW_BYTES = 8 << 20
"""The most one item's JSON may inflate to: 32 times the longest wire line an agent may
send (``probes.wire.protocol.MAX_LINE_BYTES``, 256 KiB), which an item is decoded from."""


class DataTooLarge(RigwatchError, ValueError):
    """A row or block that inflates past its cap (a decompression bomb, never ours)."""

    title = "Recording row too large"


def inflate(data: bytes, cap: int, wbits: int = zlib.MAX_WBITS, zdict: bytes = b"",
            what: str = "row") -> bytes:
    """``data`` inflated, at most ``cap`` bytes of it.

    Raises:
        DataTooLarge: it would inflate to more than ``cap`` bytes.
        zlib.error: not deflate data.
    """
    d = zlib.decompressobj(wbits, zdict=zdict) if zdict else zlib.decompressobj(wbits)
    out = d.decompress(data, cap + 1)
    if len(out) > cap or d.unconsumed_tail:
        raise DataTooLarge(f"a {what} inflates to more than {cap} bytes")
    # With room left under max_length, decompress has given every byte the input holds;
    # flush() would add nothing (and takes no cap).
    return out


def inflate_more(d: zlib._Decompress, cap: int, what: str) -> bytes:
    """The rest of a stream begun with ``d.decompress(data, n)``, at most ``cap`` bytes.

    Raises:
        DataTooLarge: the rest is longer than ``cap``.
    """
    out = d.decompress(d.unconsumed_tail, cap + 1)
    if len(out) > cap or d.unconsumed_tail:
        raise DataTooLarge(f"a {what} inflates to more than its header says")
    return out
