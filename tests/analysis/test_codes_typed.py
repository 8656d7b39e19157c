"""Finding codes are ``Code`` members in the source, never string literals (issue #37 item 4).

``Finding.code`` and ``ExplainFinding.code`` are typed ``Code``, so mypy rejects a literal
passed to them; this scan also covers the places mypy cannot see: a code compared with a
literal (``f.code == "gpu-lost"``), a rule's ``Hit("…")`` and the local ``add("…")`` /
``_finding("…")`` builders.  A misspelt literal there used to be a silent miss.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from probes.store import codec
from probes.triage import Code
from tests.support.paths import REPO

ROOT = REPO
SOURCES = sorted(p for d in ("probes", "tui", "widgets") for p in (ROOT / d).rglob("*.py")
                 if "agent" not in p.relative_to(ROOT).parts and p.name != "triage.py")
CODES = {c.value for c in Code}
BUILDERS_ARG1 = {"Finding", "ExplainFinding"}
BUILDERS_ARG0 = {"Hit", "add", "_finding", "finding"}


def _is_code_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and node.value in CODES


def code_literals(tree: ast.AST) -> list[str]:
    """Code-valued string literals where a finding code is built or compared."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else \
                fn.attr if isinstance(fn, ast.Attribute) else None
            if name in BUILDERS_ARG1 and len(node.args) > 1:
                found += [node.args[1]] if _is_code_literal(node.args[1]) else []
            if name in BUILDERS_ARG0 and node.args:
                found += [node.args[0]] if _is_code_literal(node.args[0]) else []
            found += [k.value for k in node.keywords
                      if k.arg == "code" and _is_code_literal(k.value)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = {x.attr if isinstance(x, ast.Attribute) else x.id
                     for s in sides for x in ast.walk(s)
                     if isinstance(x, ast.Attribute | ast.Name)}
            if "code" in named:
                found += [x for s in sides for x in ast.walk(s) if _is_code_literal(x)]
    return [f"line {getattr(n, 'lineno', '?')}: {ast.unparse(n)}" for n in found]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_codes_are_code_members(path: Path) -> None:
    found = code_literals(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, f"{path.relative_to(ROOT)}: use Code members: " + "; ".join(found)


@pytest.mark.parametrize("source", [
    'Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "s", "h")',
    'if f.code == "gpu-lost": pass',
    'Hit("oom-killer", CRIT, summary, ACTION_OOM)',
    'x = [f for f in fs if f.code != "pcie-link-downgraded"]',
])
def test_the_scan_sees_each_kind(source: str) -> None:
    assert code_literals(ast.parse(source))


def test_a_recorded_code_reads_back_as_its_member_and_an_unknown_one_as_text() -> None:
    """Recordings store the string; reading one back gives the ``Code`` member, and a code
    this version does not know (a newer recording's) stays text instead of losing the
    finding."""
    from probes.analysis.findings import Finding
    from probes.triage import Severity, Step

    known = Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL, "GPU 6 is lost", "h")
    data = codec.encode_dataclass(known)
    back = codec.decode_dataclass(Finding, data)
    assert back.code is Code.GPU_LOST and back == known
    newer = Finding(Step.GPU, "some-later-code", Severity.INFO, "s", "h")  # type: ignore[arg-type]
    again = codec.decode_dataclass(Finding, codec.encode_dataclass(newer))
    assert again.code == "some-later-code" and type(again.code) is str
    with pytest.raises(codec.CodecError):  # not text at all: refused, as before
        codec.decode_dataclass(Finding, {**data, "code": 7})
