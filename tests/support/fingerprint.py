"""A query's answer as text that compares equal exactly when its ``repr`` does, in a fraction
of the time: the equivalence tests compare histories' answers (hundreds of thousands of
floats a check) and ``repr`` of the floats was most of their cost (CI time, issue 38 s13).

``fingerprint(a) == fingerprint(b)`` if and only if ``repr(a) == repr(b)`` (up to a 128-bit
hash colliding), so a comparison keeps its meaning: NaN equal to NaN whatever its bits, but
−0.0 apart from 0.0, 1 apart from 1.0, a list apart from a tuple, a namedtuple apart from a
tuple and from another class's.  Every list, tuple (plain or named), dict and ``array`` is
walked and tagged by its type; a run of plain Python floats, or an ``array`` of them, is
hashed as its IEEE bytes with every NaN made one NaN (``repr`` prints any NaN as ``nan``
and every other float as its shortest exact text, so bytes equal ⟺ text equal); anything
else is left for ``repr`` as before.  ``tests/house/test_fingerprint.py`` holds it to
``repr`` over random and hostile structures.
"""

from __future__ import annotations

import collections
import hashlib
from array import array
from typing import Any

import numpy as np

_MIN_RUN = 4
"""Shorter float runs stay floats (``repr``: as cheap as hashing them)."""
_FLOAT_CODES = {"d": np.float64, "f": np.float32}
_NT_REPR = collections.namedtuple("_NT_REPR", "a").__repr__.__code__
"""Every namedtuple's ``__repr__`` runs this code (class name, field names, ``%r`` each)."""


_NAMED: dict[type, bool] = {}
_WALKED = (list, tuple, dict, array)


def _named(t: type) -> bool:
    """A namedtuple class whose ``repr`` is namedtuple's own (its name, fields, values)."""
    got = _NAMED.get(t)
    if got is None:
        got = _NAMED[t] = (issubclass(t, tuple) and hasattr(t, "_fields")
                           and getattr(t.__repr__, "__code__", None) is _NT_REPR)
    return got


def fingerprint(obj: object) -> str:
    """``obj`` as text that is equal where ``repr(obj)`` is (see the module's docstring)."""
    return repr(_canon(obj))


def _floats(values: Any, dtype: Any = np.float64) -> str:
    a = np.array(values, dtype=dtype)
    nan = np.isnan(a)
    if nan.any():
        a[nan] = np.nan  # one NaN: repr says ``nan`` for every NaN
    return hashlib.blake2b(a.tobytes(), digest_size=16).hexdigest()


def _seq(kind: str, items: Any) -> object:
    """A list's or tuple's items: a float run hashed, namedtuples of one class a column a
    field, leaves (no container among them) left for ``repr``, the rest one by one."""
    types = set(map(type, items))
    if types == {float}:
        if len(items) >= _MIN_RUN:
            return ("\x00floats", kind, len(items), _floats(items))
        return ("\x00" + kind, items)
    if all(_named(t) for t in types):  # told apart as repr tells them: name and fields
        names = {(t.__name__, t._fields) for t in types}  # type: ignore[attr-defined]
        if len(names) == 1 and items:
            ((name, fields),) = names
            return ("\x00nts", kind, name, fields, len(items),
                    [_seq("col", c) for c in zip(*items, strict=True)])
    if not any(issubclass(t, _WALKED) for t in types):
        return ("\x00" + kind, items)  # leaves only: their repr as before
    return ("\x00" + kind, [_canon(x) for x in items])


def _canon(o: object) -> object:
    t = type(o)
    if t is list:
        return _seq("list", o)
    if t is tuple:
        return _seq("tuple", o)
    if t is dict:
        assert isinstance(o, dict)
        return ("\x00dict", [(_canon(k), _canon(v)) for k, v in o.items()])
    if t is array:
        assert isinstance(o, array)
        code = o.typecode
        if code in _FLOAT_CODES:
            return ("\x00array", code, len(o), _floats(o, _FLOAT_CODES[code]))
        return ("\x00array", code, o.tobytes())
    if _named(t):  # repr: the class's name (not its module), its fields, their values
        return ("\x00nt", t.__name__, t._fields, _seq("fields", o))  # type: ignore[attr-defined]
    return o
