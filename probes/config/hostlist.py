"""Slurm-style host lists: ``gpu[001-064]``, ``gpu[001-004,010]``, ``rack[1-2]-node[01-16]``.

Commas outside brackets separate names (``gpu[1-2],login1``); brackets multiply out
in order (cartesian product, rightmost fastest).  The size is computed from the bounds
before anything is expanded, so a typo such as ``gpu[1-1000000000]`` is refused at once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from probes.errors import ConfigError

MAX_HOSTS = 10_000
"""Most names one host list may expand to: far past any real rack, well short of a hang."""

_ITEM = re.compile(r"(\d+)(?:-(\d+))?")

_Range = tuple[int, int, int]
"""(first, last, zero-padded width) of one bracket item."""


class HostlistError(ConfigError, ValueError):
    """A host list that cannot be expanded; the message says what is wrong and where."""

    title = "Host list error"


def _split_names(text: str) -> list[str]:
    """Split on commas outside brackets, checking that brackets pair up and do not nest."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise HostlistError(f"nested '[' in {text!r}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"unmatched ']' in {text!r}")
            depth = 0
        elif ch == "," and not depth:
            names.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise HostlistError(f"unclosed '[' in {text!r}")
    names.append(text[start:].strip())
    if not all(names):
        raise HostlistError(f"empty host name in {text!r}")
    return names


def _width(digits: str) -> int:
    return len(digits) if len(digits) > 1 and digits.startswith("0") else 0


def _ranges(body: str, name: str) -> list[_Range]:
    """``001-004,010`` -> [(1, 4, 3), (10, 10, 3)]; nothing is expanded yet."""
    if not body.strip():
        raise HostlistError(f"empty brackets in {name!r}")
    out = []
    for item in body.split(","):
        m = _ITEM.fullmatch(item.strip())
        if not m:
            raise HostlistError(f"malformed range {item.strip()!r} in {name!r} "
                                "(expected N or N-M)")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise HostlistError(f"empty range {item.strip()!r} in {name!r} (end before start)")
        out.append((lo, hi, _width(lo_text) or _width(hi_text)))
    return out


def _parse(name: str) -> tuple[list[str], list[list[_Range]]]:
    """A name as its literal pieces and, between them, its bracket ranges."""
    pieces = re.split(r"\[([^\[\]]*)\]", name)  # brackets never nest (_split_names)
    return pieces[0::2], [_ranges(body, name) for body in pieces[1::2]]


def _count(groups: list[list[_Range]]) -> int:
    total = 1
    for ranges in groups:
        total *= sum(hi - lo + 1 for lo, hi, _ in ranges)
    return total


def count_hostlist(text: str) -> int:
    """How many names ``text`` expands to, without expanding it.

    Raises:
        HostlistError: unbalanced or nested brackets, an empty or malformed range.
    """
    return sum(_count(_parse(name)[1]) for name in _split_names(text))


def _values(ranges: list[_Range]) -> Iterator[str]:
    for lo, hi, width in ranges:
        for i in range(lo, hi + 1):
            yield str(i).zfill(width)


def expand_hostlist(text: str, limit: int = MAX_HOSTS) -> list[str]:
    """Expand a Slurm-style host list into names, in order; zero padding follows the bounds.

    Args:
        text: one name, a bracketed pattern, or several separated by commas.
        limit: refuse lists longer than this (checked before expanding).

    Raises:
        HostlistError: unbalanced or nested brackets, an empty (``[5-3]``, ``[]``) or
            malformed range, or more than ``limit`` names.
    """
    parsed = [_parse(name) for name in _split_names(text)]
    total = sum(_count(groups) for _, groups in parsed)
    if total > limit:
        raise HostlistError(f"{text!r} expands to {total:,} hosts (at most {limit:,})")
    names = []
    for literals, groups in parsed:
        for combo in itertools.product(*(list(_values(r)) for r in groups)):
            parts = [literals[0]]
            for value, literal in zip(combo, literals[1:], strict=True):
                parts += [value, literal]
            names.append("".join(parts))
    return names
