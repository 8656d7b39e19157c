"""Typed seams (issue #37 item 4): past the rules that write them, ``Finding.extra``'s keys
are read through ``probes.analysis.finding_extra`` (``Finding.details``), never by a string
key, so a renamed or retyped detail fails mypy instead of reading None somewhere."""

from __future__ import annotations

import ast
from pathlib import Path

from probes.analysis.findings import Finding
from probes.triage import Code, Severity, Step
from tests.conftest import REPO

READERS = ("probes/analysis", "probes/outputs", "probes/store", "probes/actions",
           "probes/fleet_state.py", "tui", "widgets")
"""Where findings are read (``probes/rules`` writes the details of what it parses)."""
ALLOWED = {"probes/analysis/finding_extra.py": "the typed accessors themselves",
           "probes/analysis/repeats.py": "merges the ranks, timeouts and last-completed "
                                          "records a repeat adds, as written"}


def _is_extra(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "extra"


def _literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def literal_reads(path: Path) -> list[int]:
    """Lines where ``path`` reads ``<x>.extra`` by a string literal."""
    def spelled(node: ast.AST) -> bool:
        if isinstance(node, ast.Call):  # x.extra.get("k")
            func = node.func
            return isinstance(func, ast.Attribute) and func.attr == "get" \
                and _is_extra(func.value) and bool(node.args) and _literal(node.args[0])
        if isinstance(node, ast.Subscript):  # x.extra["k"]
            return isinstance(node.ctx, ast.Load) and _is_extra(node.value) \
                and _literal(node.slice)
        if isinstance(node, ast.Compare):  # "k" in x.extra
            return _literal(node.left) and any(isinstance(op, ast.In | ast.NotIn)
                                               for op in node.ops) \
                and any(_is_extra(c) for c in node.comparators)
        return False

    lines = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if spelled(node) and isinstance(node, ast.expr)]
    return lines


def test_no_reader_spells_an_extra_key() -> None:
    found = []
    for where in READERS:
        root = REPO / where
        for path in sorted([root] if root.is_file() else root.rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel not in ALLOWED:
                found += [f"{rel}:{n}" for n in literal_reads(path)]
    assert found == []


def test_the_check_sees_each_way_of_spelling_a_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('a = f.extra.get("rank")\nb = f.extra["job"]\nc = "ranks" in f.extra\n'
                   'd = extra.get("rank")\n')
    assert literal_reads(bad) == [1, 2, 3]


def test_the_accessors_read_what_the_rules_write_and_nothing_else() -> None:
    f = Finding(Step.NCCL, Code.NCCL_TIMEOUT, Severity.CRITICAL, "s", "h",
                extra={"rank": 3, "ranks": [1, True, "2", 4], "rank_host": "gpu-b07",
                       "rank_gpu": False, "ports": ["mlx5_0/1", 7], "gpus": [0, "1", 2],
                       "last_completed": {"1": 40, "2": "x"}, "temp_c": 91, "job": 48211})
    d = f.details
    assert (d.rank, d.ranks, d.rank_host, d.rank_gpu) == (3, (1, 4), "gpu-b07", None)
    assert (d.ports, d.gpus, d.last_completed, d.temp_c) == (("mlx5_0/1",), (0, 2), {1: 40}, 91.0)
    assert d.job is None and d.nranks is None and d.hosts == ()
