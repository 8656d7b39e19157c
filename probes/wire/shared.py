"""One object for facts that many hosts send alike: a hello's PCIe links, ports, disks.

A thousand servers of one model send the same PCIe chains (the same addresses, speeds and
widths), the same NIC ports, block devices, software versions and ``nvidia-smi topo -m``
text; decoded per host, each is its own objects: about 20 KB of a hello's 24 KB per host
at 1024 hosts (issue 38, memory).  The decoded objects are frozen, so equal ones can be
one.  Equal means the same type and the same field values of the same types (``16`` is
not ``16.0``, ``-0.0`` not ``0.0``): what a reader sees never changes.
"""

from __future__ import annotations

import math
from typing import TypeVar

SHARED_MAX = 65536
"""Distinct objects kept for sharing; past it the table starts again (a fleet whose hosts
all differ gains nothing, and must not grow a table without bound)."""

T = TypeVar("T")
_table: dict[object, object] = {}
_epoch = [0]
"""How many times the table started again (``epoch``)."""


def _part(v: object) -> object:
    """A field value's part of the key: its type with it, a float's sign too."""
    if type(v) is float:
        return (float, v, math.copysign(1.0, v))
    if type(v) is tuple:
        return (tuple, tuple(_part(x) for x in v))
    return (type(v), v)


def shared(obj: T) -> T:
    """``obj``, or the equal object met before (a frozen dataclass of plain fields, a
    string, a tuple of strings); an object whose fields cannot be hashed comes back as
    it is."""
    fields = getattr(obj, "__dict__", None)
    key = (type(obj), tuple(_part(v) for v in fields.values())) if fields is not None \
        else _part(obj)
    try:
        seen = _table.get(key)
    except TypeError:  # a mapping or a list among its fields: not shared
        return obj
    if seen is not None:
        return seen  # type: ignore[return-value]
    if len(_table) >= SHARED_MAX:
        _table.clear()
        _known.clear()
        _epoch[0] += 1
    _table[key] = obj
    return obj


_known: dict[object, object] = {}
"""What ``shared`` returned, by a key its caller made (``known``/``remember``); emptied with
the table, so every object here is the one ``shared`` would return now."""


def known(key: object) -> object | None:
    """The object remembered under ``key`` (None: not met since the table started)."""
    return _known.get(key)


def remember(key: object, obj: T) -> T:
    """``shared(obj)``, remembered under ``key``: a key the caller makes at C speed that
    says no less than ``obj``'s fields with their types and signs (a typed struct's values
    where no float is zero), so that the next equal object skips ``shared``'s key walk."""
    got = shared(obj)
    if len(_known) >= SHARED_MAX:
        _known.clear()
    _known[key] = got
    return got


def epoch() -> int:
    """Which table is in use: a cache of objects ``shared`` returned holds them only while
    this is unchanged (after a new start ``shared`` returns other, equal objects)."""
    return _epoch[0]
