"""``dcgmi diag -r N``: the table (DCGM 2, 3 and 4 layouts) or its ``-j`` JSON.

The table is a box: ``| Diagnostic | Result |``, category rows (``|-----  Deployment  ---…``,
``+-----  Hardware  ---…``) and a row per test, ``| GPU Memory | Pass - All |``.  A test may
take several rows: DCGM 3 splits its GPUs (``Pass - GPUs: 1, 2, 3`` then ``Fail - GPU: 0``
on a blank-named row), DCGM 4 lists them (``software | Pass`` then ``| GPU0: Pass``), and
``Warning`` / ``Error`` / ``Info`` rows carry the message of the test above them.  Shapes:
NVIDIA/DCGM#55 (``-r 3`` with its stress tests skipped), NVIDIA/go-dcgm#52 and
stas00/ml-engineering ``compute/accelerator/nvidia/debug.md`` (``Fail - GPU: 0`` with its
warning), NVIDIA/DCGM#253 (DCGM 4.2's per-GPU rows), DCGM's ``testing`` JSON strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import Code, Severity, Step

KIND = "dcgmi-diag"
LOOKS_LIKE_LINES = 400
_CATEGORY = re.compile(r"^\s*[|+]-+\s+(?P<name>[A-Za-z]\w*(?: \w+)*)\s+-+[+|]")
_RESULT = re.compile(r"^(?P<r>Pass|Fail|Skip|Warn|Not Run)\b(?:\s*-\s*(?P<who>.*))?$",
                     re.IGNORECASE)
_GPU_RESULT = re.compile(r"^GPU\s?(?P<i>\d{1,4})\s*:\s*(?P<r>Pass|Fail|Skip|Warn)\b", re.IGNORECASE)
_LEVEL = re.compile(r"dcgmi\s{1,8}diag\b.{0,80}?(?:-r|--run)\s{0,4}[= ]?\s{0,4}(?P<n>[1-4])\b")
_NUMBERS = re.compile(r"(?<!\d)\d{1,4}(?!\d)")
_NOTES = frozenset({"warning", "error", "info"})
_META = frozenset({"metadata"})
HARDWARE = frozenset({"hardware", "integration", "stress"})
"""Categories whose tests exercise the GPUs (level 1 runs none of them)."""
ACTION_FAIL = ("Drain the node; read the failing test's warning (dcgmi diag -r 3 -v), reset "
               "the GPU and rerun; RMA the GPU if the test fails again")
ACTION_INCOMPLETE = ("Run dcgmi diag -r 3 (or 4) with the GPUs idle before trusting the node: "
                     "a level-1 run or skipped tests check the software, not the hardware")


def _row(line: str) -> tuple[str, str] | None:
    """``| name | value |``: the two cells, stripped (None for any other line).  String
    splits, not a pattern: cells of spaces around optional text read a line in linear time."""
    s = line.strip()
    if len(s) < 3 or s[0] != "|" or s[-1] != "|" or s.count("|") != 3:
        return None
    name, val = s[1:-1].split("|")
    return name.strip(), val.strip()


@dataclass
class DiagTest:
    """One result row of a test."""

    name: str
    result: str
    gpus: list[int] | None
    category: str | None
    line: int
    text: str
    notes: list[str] = field(default_factory=list)


def _result(text: str) -> str:
    word = text.strip().split(" - ")[0].strip().lower()
    return {"pass": "Pass", "fail": "Fail", "skip": "Skip", "warn": "Warn",
            "not run": "Skip"}.get(word, text.strip())


def _gpus(who: str | None) -> list[int] | None:
    if not who or who.strip().lower() == "all":
        return None
    return [int(n) for n in _NUMBERS.findall(who)] or None


def parse_table(lines: list[str]) -> list[DiagTest]:
    tests: list[DiagTest] = []
    category: str | None = None
    last: DiagTest | None = None
    for no, line in enumerate(clean_lines(lines), 1):
        c = _CATEGORY.match(line)
        if c:
            category, last = c.group("name").strip(), None
            continue
        row = _row(line)
        if row is None or (category or "").lower() in _META:
            continue
        name, val = row
        if name.lower() in ("diagnostic",) and val.lower() == "result":
            continue
        if name.lower() in _NOTES and last is not None:
            last.notes.append(val)
            continue
        per_gpu = _GPU_RESULT.match(val)
        res = _RESULT.match(val)
        if not name and last is not None and per_gpu:
            last = DiagTest(last.name, _result(per_gpu.group("r")), [int(per_gpu.group("i"))],
                            category, no, line.strip())
            tests.append(last)
            continue
        if not name and last is not None and res:
            last = DiagTest(last.name, _result(val), _gpus(res.group("who")), category, no,
                            line.strip())
            tests.append(last)
            continue
        if not name and last is not None:
            last.notes.append(val)  # a wrapped message line
            continue
        if name and res:
            last = DiagTest(name, _result(val), _gpus(res.group("who")), category, no,
                            line.strip())
            tests.append(last)
    return tests


def _walk(obj: Any) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """(category, test) for every object with a ``name`` and a ``results`` list."""
    stack: list[tuple[str | None, Any]] = [(None, obj)]
    while stack:
        category, node = stack.pop()
        if isinstance(node, dict):
            cat = node.get("category") if isinstance(node.get("category"), str) else category
            if isinstance(node.get("name"), str) and isinstance(node.get("results"), list):
                yield cat, node
            stack.extend((cat, v) for v in reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend((category, v) for v in reversed(node))


def parse_json(text: str) -> list[DiagTest]:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return []
    out = []
    for category, test in _walk(obj):
        for r in test["results"]:
            if not isinstance(r, dict) or not isinstance(r.get("status"), str):
                continue
            ids = r.get("gpu_ids", r.get("gpu_id", r.get("entity_id")))
            gpus = _gpus(str(ids)) if ids is not None else None
            out.append(DiagTest(test["name"], _result(r["status"]), gpus, category, 1,
                                f'"name": "{test["name"]}", "status": "{r["status"]}"'))
    return out


def explain(lines: list[str]) -> KindResult:
    """The contract's ``dcgmi-diag`` result and its findings."""
    text = "\n".join(lines)
    tests = parse_json(text) if text.lstrip().startswith("{") else parse_table(lines)
    level = next((int(m.group("n")) for line in lines[:50] if (m := _LEVEL.search(line))),
                 None)
    parsed = {"level": level, "tests": [{"name": t.name, "result": t.result, "gpus": t.gpus,
                                         "category": t.category} for t in tests]}
    found = []
    failed = [t for t in tests if t.result == "Fail"]
    if failed:
        gpus = sorted({g for t in failed for g in t.gpus or []})
        told = ", ".join(dict.fromkeys(
            t.name + (f" (GPU {', '.join(map(str, t.gpus))})" if t.gpus else " (all GPUs)")
            for t in failed))
        note = " ".join("".join(failed[0].notes).split())[:200]
        found.append(ExplainFinding(
            Step.GPU, Code.DCGM_DIAG_FAIL, Severity.CRITICAL, failed[0].line, failed[0].text,
            f"DCGM diagnostic failed: {told}" + (f": {note}" if note else ""), ACTION_FAIL,
            gpu=f"GPU{gpus[0]}" if len(gpus) == 1 else None,
            extra={"gpus": gpus, "tests": list(dict.fromkeys(t.name for t in failed))}))
    hardware = [t for t in tests if (t.category or "").lower() in HARDWARE]
    if tests and (not hardware or all(t.result == "Skip" for t in hardware)):
        skipped = [t for t in hardware if t.result == "Skip"]
        where = skipped[0] if skipped else tests[-1]
        found.append(ExplainFinding(
            Step.GPU, Code.DCGM_DIAG_INCOMPLETE, Severity.INFO, where.line, where.text,
            "DCGM diagnostic ran no hardware test" + (
                f" ({len(skipped)} skipped: {', '.join(t.name for t in skipped[:4])})"
                if skipped else " (software checks only; level 1?)")
            + ": not a clean bill of health", ACTION_INCOMPLETE))
    return KindResult(KIND, parsed, tuple(found))


def looks_like(lines: list[str]) -> bool:
    """The ``| Diagnostic | Result |`` header with a category row, or ``-j`` JSON from DCGM."""
    head = clean_lines(lines[:LOOKS_LIKE_LINES])
    text = "\n".join(head)
    if text.lstrip().startswith("{") and ("DCGM GPU Diagnostic" in text or
                                          '"test_categories"' in text):
        return True
    header = any((row := _row(line)) and row[0].lower() == "diagnostic"
                 and row[1].lower() == "result" for line in head)
    return header and any(_CATEGORY.match(line) for line in head)
