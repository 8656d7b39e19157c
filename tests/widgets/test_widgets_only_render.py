"""Widgets render verdicts; they never judge (the brief: "every judgement is made once, in the
core, from the operator's limits").

Power near the limit, disk saturation, the PCIe link and "memory high" were each decided in
a widget with a constant of its own or one imported from the core (issue #37).  Two checks on
the source of ``widgets/`` keep that class of bug from coming back:

- what a widget imports from ``probes`` is a type (a view struct, a verdict enum), never a
  threshold constant or a judging function (a short list of text helpers excepted);
- no ordering comparison in a widget reads a limit: an attribute named like a capability or
  a limit (``power_limit_w``, ``pcie_width_max``, ``temp_slowdown_c``, ``*_share``,
  ``*_pct``), or a module constant named like a threshold (``POWER_HIGH``, ``*_UTIL``).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.support.paths import REPO

WIDGETS = REPO / "widgets"
SOURCES = sorted(WIDGETS.rglob("*.py"))

NOT_TYPES_ALLOWED = {
    ("probes.analysis.incident", "describe"),
    ("probes.analysis.incident", "count"),
}
"""Functions a widget may call from the core: they word or count what the core found, and
judge nothing."""

LIMIT_FIELD = re.compile(r"(?i)(limit|threshold|slowdown|_max$|^max_|_share$|_pct$|_util$)")
"""Fields whose comparison with a reading is a verdict."""
THRESHOLD_NAME = re.compile(r"^[A-Z0-9_]*(HIGH|LOW|LIMIT|THRESH|SHARE|PCT|UTIL|SATURAT|"
                            r"EFFICIEN|HOT|WARM|NEAR)[A-Z0-9_]*$")
"""Module constants named like a threshold."""
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _probes_imports() -> list[tuple[Path, str, str]]:
    out = []
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module \
                    and node.module.split(".")[0] == "probes":
                out += [(path, node.module, a.name) for a in node.names]
    return out


def test_widgets_import_only_types_from_the_core() -> None:
    imports = _probes_imports()
    assert imports, "the scan found the widgets' imports"
    bad = []
    for path, module, name in imports:
        thing = getattr(importlib.import_module(module), name)
        if not isinstance(thing, type) and (module, name) not in NOT_TYPES_ALLOWED:
            bad.append(f"{path.name}: {module}.{name} ({type(thing).__name__})")
    assert not bad, "widgets judge with the core's constants or functions: " + ", ".join(bad)


def _limit_comparisons(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, ORDERING)
                                                        for op in node.ops):
            continue
        for side in (node.left, *node.comparators):
            for x in ast.walk(side):
                name = x.attr if isinstance(x, ast.Attribute) and LIMIT_FIELD.search(x.attr) \
                    else x.id if isinstance(x, ast.Name) and THRESHOLD_NAME.match(x.id) \
                    else None
                if name is not None:
                    out.append(f"line {node.lineno}: {ast.unparse(node)}")
    return out


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_widget_compares_a_reading_with_a_limit(path: Path) -> None:
    found = _limit_comparisons(_tree(path))
    assert not found, f"{path.name} judges for itself: " + "; ".join(found)


@pytest.mark.parametrize("code", [
    "high = g.power_w >= POWER_HIGH * g.power_limit_w",
    "hot = util >= DISK_SATURATED_UTIL",
    "low = gpu.pcie_width < gpu.pcie_width_max",
    "warm = t.temp_c > t.temp_slowdown_c - 5",
    "big = row.mem_used_pct >= 95.0",
])
def test_the_check_sees_each_kind_that_was_moved(code: str) -> None:
    """The scan is not vacuous: each widget-side judgement issue #37 moved is caught."""
    assert _limit_comparisons(ast.parse(code))
