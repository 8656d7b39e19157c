"""Finding codes are one vocabulary: ``probes.triage.Code``.

A code typed wrong in a rule, a detector or a screen would otherwise compare unequal in
silence; here every code the explain contract lists, every code the fixtures expect and every
code literal a finding is built or compared with in ``probes/`` must be a ``Code`` member,
and a member must serialise exactly as its string did (JSON, orjson, YAML, f-strings).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator

import orjson
import pytest
import yaml

from probes.triage import Code
from tests.conftest import CONTRACT, FIXTURES, REPO

CODES = {c.value for c in Code}

_BUILDERS = frozenset({"Finding", "ExplainFinding", "_Hit", "_finding", "add"})
"""Functions whose first string argument (of the first two) is a finding code; a method of
the same name (preflight's ``h.add``, a problem list's ``add``) is something else."""
_CODE_SHAPE = re.compile(r"^[a-z]+(-[a-z0-9]+)*$")


def _strings(node: ast.AST) -> Iterator[str]:
    """The codes of a literal or ``Code.X``, a set/tuple/list of them, or ``frozenset({...})``.

    ``Code.X`` yields ``X`` itself (upper case, never a value), so a misspelt member fails too.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "Code":
        yield Code[node.attr].value if node.attr in Code.__members__ else node.attr
    elif isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _strings(elt)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
            and node.func.id in ("frozenset", "set", "tuple"):
        yield from _strings(node.args[0])


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute) and func.attr != "add":
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _code_literals(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Codes written as strings: built into a finding, compared with ``.code``, or named so."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in _BUILDERS:
            for arg in node.args[:2]:
                code = next(_strings(arg), None) if not isinstance(arg, ast.Set) else None
                if code is not None:
                    if _CODE_SHAPE.match(code) or code.isupper():
                        yield node.lineno, code
                    break
            for kw in node.keywords:
                if kw.arg == "code":
                    yield from ((node.lineno, s) for s in _strings(kw.value))
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) \
                and node.left.attr == "code":
            for right in node.comparators:
                yield from ((node.lineno, s) for s in _strings(right))
        elif isinstance(node, ast.Assign):
            named = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any(n.endswith("_CODES") or n in ("KERNEL_LOG_UNREADABLE",) for n in named):
                yield from ((node.lineno, s) for s in _strings(node.value))


def _probes_literals() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted((REPO / "probes").rglob("*.py")):
        if path.name == "agent.py" or "agent" in path.relative_to(REPO).parts[1:2]:
            continue  # the host side names scenarios, not findings
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out += [(str(path.relative_to(REPO)), line, s) for line, s in _code_literals(tree)]
    return out


def test_every_code_literal_in_probes_is_a_code() -> None:
    found = _probes_literals()
    assert len({s for _, _, s in found}) >= 20, "the scan no longer sees the finding builders"
    assert [f"{p}:{n} {s!r}" for p, n, s in found if s not in CODES] == []


def _contract_codes(text: str) -> set[str]:
    """The backticked codes of the contract's code table (rows ``| step | `code` | when |``)."""
    out: set[str] = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 4 and cells[1] in ("gpu", "syslog", "nccl", "model"):
            out.update(re.findall(r"`([a-z][a-z0-9-]*)`", cells[2]))
    return out


def test_every_contract_code_is_a_code() -> None:
    codes = _contract_codes(CONTRACT.read_text(encoding="utf-8"))
    assert len(codes) >= 25
    assert codes - CODES == set()


def test_every_fixture_code_is_a_code() -> None:
    expects = sorted(FIXTURES.glob("*/*.expect.json"))
    codes = {f["code"] for p in expects for f in json.loads(p.read_text())["findings"]}
    assert codes - CODES == set()


@pytest.mark.parametrize("code", list(Code), ids=lambda c: c.value)
def test_a_code_serialises_as_its_string(code: Code) -> None:
    value = code.value
    assert _CODE_SHAPE.match(value)
    assert code == value and hash(code) == hash(value) and Code(value) is code
    assert str(code) == value and f"{code}" == value and f"{code:>30}" == f"{value:>30}"
    assert json.dumps({"code": code}) == json.dumps({"code": value})
    assert orjson.dumps({"code": code}) == orjson.dumps({"code": value})
    assert yaml.safe_dump({"code": str(code)}) == yaml.safe_dump({"code": value})
    assert yaml.safe_load(yaml.safe_dump({"code": str(code)})) == {"code": code}


def test_codes_are_unique_and_exactly_the_known_set() -> None:
    assert len(CODES) == len(Code)
    assert len(Code) >= 42
