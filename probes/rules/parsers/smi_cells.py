"""The one cell rule every column-shaped nvidia-smi output shares (``--query-*`` CSV, ``dmon``,
``pmon``), so a reading means the same JSON value whichever of them printed it.

A cell is trimmed; a trailing unit (``81559 MiB``, ``100.00 %``, ``0 us``) is removed only when
what is left is a plain decimal number, which then becomes an int (no point) or a float.
Anything else stays the string exactly as printed: identifiers (``P0``, ``0x0B``, ``590.48.01``,
bus ids, UUIDs) and words that are real values (``None``, ``No``, ``Disabled``).  Markers of an
unavailable reading (``N/A``, ``[Not Supported]``, any ``[…]`` error marker, an empty cell)
read as None.  ``-`` is pmon/dmon's "no value" and only reads as None where the caller says so:
in CSV nvidia-smi never prints a bare ``-``, so there it stays a string.
"""

from __future__ import annotations

import re

Cell = float | int | str | None
"""A parsed cell: a JSON number, the printed string, or None for "unavailable"."""

UNIT_NAMES: tuple[str, ...] = (
    "W", "mW", "MiB", "KiB", "GiB", "MB", "KB", "GB", "MHz", "%", "us", "ms", "s", "C",
    "KB/s", "MB/s", "mJ", "J",
)
"""Units nvidia-smi prints after a number (`` W``, `` MiB``, `` MHz``, `` %``, `` us``, `` C``,
`` KB/s`` and their kin), always after one space."""

UNAVAILABLE_WORDS: frozenset[str] = frozenset({
    "n/a", "not supported", "unknown error", "gpu is lost", "insufficient permissions",
    "not found", "requested functionality has been deprecated",
})
"""Markers of a reading NVML could not give, compared without case and brackets."""

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_WITH_UNIT = re.compile(
    r"^(?P<num>-?\d+(?:\.\d+)?) (?:" + "|".join(re.escape(u) for u in UNIT_NAMES) + r")$")
_BRACKETED = re.compile(r"^\[[^\[\]]*\]$")


def is_unavailable(text: str, *, dash_is_null: bool = False) -> bool:
    """Whether a trimmed cell is a marker of "no reading" rather than a value.

    Every bracketed cell counts: nvidia-smi brackets exactly its error markers
    (``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``, ``[GPU is lost]``,
    ``[Insufficient Permissions]`` …), never a value.
    """
    t = text.strip()
    if not t or _BRACKETED.match(t):
        return True
    if dash_is_null and t == "-":
        return True
    return t.lower() in UNAVAILABLE_WORDS


MAX_DIGITS = 24
"""A longer "number" is text, not a reading (a 64-bit counter has 20 digits): ``int()`` of a
hostile run of thousands of digits raises, and costs the square of the run."""


def to_number(text: str) -> int | float | None:
    """``81559`` → 81559, ``71.42 W`` → 71.42, ``9.0`` → 9.0; None for anything else."""
    t = text.strip()
    m = _WITH_UNIT.match(t)
    num = m.group("num") if m else t
    if not _NUMBER.match(num) or len(num) > MAX_DIGITS:
        return None
    if "." in num:
        return float(num)
    return int(num)


def cell_value(text: str, *, dash_is_null: bool = False) -> Cell:
    """The JSON value of one printed cell, by the shared rule (see the module docstring).

    Args:
        text: the cell as printed (surrounding whitespace allowed).
        dash_is_null: read a bare ``-`` as None (dmon/pmon print it for "no value").

    Returns:
        An int or float for a plain decimal number (unit removed), None for an unavailable
        marker or empty cell, else the trimmed string as printed.
    """
    t = text.strip()
    if is_unavailable(t, dash_is_null=dash_is_null):
        return None
    n = to_number(t)
    return t if n is None else n


__all__ = ["UNAVAILABLE_WORDS", "UNIT_NAMES", "Cell", "cell_value", "is_unavailable",
           "to_number"]
