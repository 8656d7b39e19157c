"""Reading ``tests/fixtures/samples`` and comparing against their ``.expect.json``.

The rules are the fixtures README's: the input is what follows the first ``# ---`` line;
``parsed`` is a subset match (lists equal in length and order, objects list only checked
keys); numbers compare numerically with a small tolerance; findings are the set of
distinct (step, code, xid).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

HEADER_END = b"# ---"


def fixture_input(path: Path) -> bytes:
    """The sample's input bytes, exactly as stored, after its three header lines."""
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        if line.rstrip(b"\r") == HEADER_END:
            return b"\n".join(lines[i + 1:])
    raise AssertionError(f"{path}: no '# ---' header line")


def expectation(path: Path) -> dict[str, Any]:
    """The ``.expect.json`` next to a sample."""
    with open(path.with_suffix(".expect.json"), encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.005, abs_tol=0.01)


def subset_mismatches(expected: Any, actual: Any, where: str = "parsed") -> list[str]:
    """Every place where ``actual`` fails to contain ``expected``; empty when it does."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        out = []
        for key, value in expected.items():
            if key not in actual:
                out.append(f"{where}.{key}: missing")
            else:
                out.extend(subset_mismatches(value, actual[key], f"{where}.{key}"))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {len(expected)} items, got {actual!r}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(subset_mismatches(e, a, f"{where}[{i}]"))
        return out
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        return [] if actual == expected and type(actual) is type(expected) else [
            f"{where}: expected {expected!r}, got {actual!r}"]
    if isinstance(expected, int | float):
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            return [f"{where}: expected number {expected!r}, got {actual!r}"]
        return [] if _close(float(expected), float(actual)) else [
            f"{where}: expected {expected!r}, got {actual!r}"]
    return [f"{where}: unexpected expectation {expected!r}"]


def finding_set(findings: list[dict[str, Any]]) -> set[tuple[str, str, int | None]]:
    """The distinct (step, code, xid) of a findings list."""
    return {(f["step"], f["code"], f.get("xid")) for f in findings}


def garble(rng: random.Random, lines: list[str], alphabet: str,
           max_junk: int = 120) -> list[str]:
    """A copy of ``lines`` with 1–6 bursts of junk spliced into lines or inserted between
    them: what a fuzz test feeds a parser, which must never raise on it."""
    out = list(lines)
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(out) + 1)
        junk = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_junk)))
        if rng.random() < 0.5 and out:
            j = rng.randrange(len(out))
            pos = rng.randint(0, len(out[j]))
            out[j] = out[j][:pos] + junk + out[j][pos:]
        else:
            out.insert(i, junk)
    return out
