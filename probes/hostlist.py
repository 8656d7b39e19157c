"""Slurm-style host lists: ``gpu[001-064]``, ``gpu[001-004,010]``, ``rack[1-2]-node[01-16]``."""

from __future__ import annotations

import itertools
import math
import re

MAX_HOSTS_PER_PATTERN = 10_000
_BRACKET = re.compile(r"\[([^\[\]]*)\]")


class HostlistError(ValueError):
    """A host pattern that cannot be expanded; the message says what is wrong."""


def _range_items(body: str) -> list[str]:
    """``001-004,010`` -> ['001', '002', '003', '004', '010'] (padding from the bounds)."""
    if not body.strip():
        raise HostlistError("empty range []")
    out: list[str] = []
    for part in body.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise HostlistError(f"malformed range item {part!r} (expected N or N-M)")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise HostlistError(f"empty range {part!r} (end before start)")
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        count = int(hi) - int(lo) + 1
        if count > MAX_HOSTS_PER_PATTERN:
            raise HostlistError(f"range {part!r} has {count} hosts (at most "
                                f"{MAX_HOSTS_PER_PATTERN})")
        out.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return out


def expand_hostlist(pattern: str) -> list[str]:
    """Expand every ``[...]`` group of a host pattern, in order (cartesian product).

    Raises:
        HostlistError: an empty, malformed or unbalanced range, or more than 10,000 hosts.
    """
    if pattern.count("[") != pattern.count("]"):
        raise HostlistError(f"unbalanced brackets in {pattern!r}")
    pieces = _BRACKET.split(pattern)
    literals, ranges = pieces[0::2], pieces[1::2]
    if any("[" in s or "]" in s for s in literals):
        raise HostlistError(f"nested or unbalanced brackets in {pattern!r}")
    expanded = [_range_items(body) for body in ranges]
    total = math.prod(len(e) for e in expanded)
    if total > MAX_HOSTS_PER_PATTERN:
        raise HostlistError(f"{pattern!r} expands to {total} hosts (at most "
                            f"{MAX_HOSTS_PER_PATTERN})")
    names = []
    for combo in itertools.product(*expanded):
        parts = [literals[0]]
        for value, literal in zip(combo, literals[1:], strict=True):
            parts += [value, literal]
        names.append("".join(parts))
    return names
