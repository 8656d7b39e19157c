"""``tests.support.fingerprint`` compares equal exactly where ``repr`` does: the history's
equivalence tests compare their answers with it instead of ``repr`` (CI time, issue 38 s13),
so it must be neither looser nor stricter.

Held to ``repr`` over random pairs of structures, each a copy of the other with a few
changes (lists, tuples, dicts, ``array``s of floats and ints, namedtuples of two classes
alike in name and fields but not in module, another of another name, long float runs),
drawn from hostile values (NaNs of other bits and signs, ±0.0, ±inf, the smallest
subnormal, 1 beside 1.0 and True, numpy's floats, None, text), and over real answers: the
detectors' windows and every query of histories that differ and that do not, today's and
the copy before session 10 (its own classes, alike in name).  Negative controls: a
fingerprint blind to −0.0's sign, and one that keeps NaNs' own bits, are both caught.
"""

from __future__ import annotations

import collections
import functools
import math
import random
import struct
from array import array
from typing import Any

import numpy as np
import pytest

from tests.support import fingerprint as fp_mod
from tests.support.fingerprint import fingerprint


def _named(name: str, fields: str) -> Any:
    return collections.namedtuple(name, fields)


P = _named("P", "t v")
P2 = _named("P", "t v")  # another class: same name and fields (as a copy's)
Q = _named("Q", "t v")
R = _named("P", "t w")  # same name, other fields


def _nan(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


LEAVES: list[object] = [
    0.0, -0.0, 1.0, 1, True, 2.5, -2.5, math.inf, -math.inf, math.nan, _nan(0xFFF8000000000000),
    _nan(0x7FF0000000000001), 5e-324, 1e300, 1800000000.25, np.float64(1.0),
    np.float32(2.5), None, "x", "nan", b"\x00", 0, 7]
FLOATS = [x for x in LEAVES if type(x) is float]


def _leaf(rng: random.Random) -> object:
    return rng.choice(FLOATS if rng.random() < 0.6 else LEAVES)


def _make(rng: random.Random, depth: int = 0) -> object:
    r = rng.random()
    if depth > 3 or r < 0.25:
        return _leaf(rng)
    n = rng.choice([0, 1, 3, 4, 5, 9, 40])
    if r < 0.45:
        return [rng.choice(FLOATS) for _ in range(n)]  # a float run
    if r < 0.55:
        cls = rng.choice([P, P, P2, Q, R])
        return [cls(rng.choice(FLOATS), _leaf(rng)) for _ in range(n)]
    if r < 0.62:
        return rng.choice([P, P2, Q, R])(_make(rng, depth + 1), _leaf(rng))
    if r < 0.7:
        code = rng.choice("dfq")
        if code == "q":
            return array("q", [rng.randrange(-5, 5) for _ in range(n)])
        return array(code, [rng.choice(FLOATS) for _ in range(n)])
    if r < 0.78:
        return {rng.choice(["a", "b", 1, 1.0]): _make(rng, depth + 1) for _ in range(n % 4)}
    items = [_make(rng, depth + 1) for _ in range(n % 6)]
    return items if r < 0.9 else tuple(items)


def _mutate(rng: random.Random, o: object) -> object:
    """A copy of ``o``, now and then with one thing changed."""
    named = isinstance(o, P | P2 | Q | R)
    if isinstance(o, list | tuple) and not named and o and rng.random() < 0.8:
        items = list(o)
        i = rng.randrange(len(items))
        items[i] = _mutate(rng, items[i])
        return items if type(o) is list else tuple(items)
    if isinstance(o, P | P2 | Q | R) and rng.random() < 0.8:
        cls = rng.choice([type(o), type(o), P, P2, Q, R])
        return cls(_mutate(rng, o[0]), o[1])
    if isinstance(o, array) and len(o) and rng.random() < 0.8:
        a = array(o.typecode, o)
        a[rng.randrange(len(a))] = rng.choice(FLOATS) if o.typecode != "q" else rng.randrange(5)
        return a
    if isinstance(o, dict) and o and rng.random() < 0.8:
        k = rng.choice(list(o))
        return {**o, k: _mutate(rng, o[k])}
    if rng.random() < 0.5:
        return _make(rng, 2)
    return _leaf(rng) if not isinstance(o, list | tuple | dict | array) else o


@functools.cache
def _pairs(n: int = 3000) -> list[tuple[object, object]]:
    rng = random.Random(13)
    out = []
    for _ in range(n):
        a = _make(rng)
        out.append((a, _mutate(rng, a)))
    return out


def _disagreements(f: Any, first: bool = False) -> tuple[int, int, int]:
    """(pairs where ``f`` and ``repr`` disagree, pairs repr calls equal, pairs it doesn't);
    with ``first``, up to the first disagreement."""
    wrong = same = other = 0
    for a, b in _pairs():
        want = repr(a) == repr(b)
        same += want
        other += not want
        wrong += (f(a) == f(b)) != want
        if wrong and first:
            break
    return wrong, same, other


def test_fingerprint_is_equal_exactly_where_repr_is() -> None:
    wrong, same, other = _disagreements(fingerprint)
    assert same > 600 and other > 600  # both outcomes, often
    assert wrong == 0


def test_the_hostile_leaves_alone() -> None:
    for a in LEAVES:
        for b in LEAVES:
            for wrap in (lambda x: [x] * 5, lambda x: (x, x, x, x), lambda x: [P(x, x)] * 4,
                         lambda x: array("d", [x] * 4) if type(x) is float else x):
                assert (fingerprint(wrap(a)) == fingerprint(wrap(b))) == (
                    repr(wrap(a)) == repr(wrap(b))), (a, b)


def test_negative_control_a_fingerprint_blind_to_the_sign_of_zero_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = fp_mod._floats
    monkeypatch.setattr(fp_mod, "_floats", lambda v, dtype=np.float64: real(
        np.abs(np.array(v, dtype=dtype)), dtype))
    wrong, _, _ = _disagreements(fingerprint, first=True)
    assert wrong > 0


def test_negative_control_nans_by_their_bits_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def bits(values: Any, dtype: Any = np.float64) -> str:
        return np.array(values, dtype=dtype).tobytes().hex()

    monkeypatch.setattr(fp_mod, "_floats", bits)
    wrong, _, _ = _disagreements(fingerprint, first=True)
    assert wrong > 0


def test_real_answers_compare_as_their_repr() -> None:
    """Windows and every query of histories, today's and the copy before session 10 (its
    own ``Columns``/``Point`` classes), at moments where they agree and where they don't."""
    from probes.history import HostHistory
    from tests.history.before_s10 import HostHistory as HostHistoryBefore
    from tests.history.test_block_columns import _answers, _random_stream
    from tests.history.test_raw_matrix import _window_answers
    from tests.history.test_tier2_matrix import _odd

    samples = _odd(_random_stream(11, 700), 11)
    new, old = HostHistory(), HostHistoryBefore()
    answers: list[object] = []
    for n, s in enumerate(samples):
        new.add(s)
        old.add(s)
        if n % 173 == 172:
            for h in (new, old):
                answers += [_answers(h), _window_answers(h)]
    assert len(answers) == 16
    same = 0
    for i, a in enumerate(answers):
        for b in answers[i:i + 3]:
            want = repr(a) == repr(b)
            same += want
            assert (fingerprint(a) == fingerprint(b)) == want
    assert 16 < same < 48  # today's and before's alike; other moments not
