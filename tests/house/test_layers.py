"""The layout is the architecture: which package may import which, checked with ``ast``.

Data flows one way (agent → transport → sources → wire → history → analysis → screens); this
test fixes the direction, so an import against the flow fails here instead of tangling the
house.  Every import counts, wherever it sits: a deferred import inside a function is still an
edge, and so is one under ``if TYPE_CHECKING:`` (a type named against the flow is a knot the
reader must untie all the same; issue #37 took the exemption away).
"""

from __future__ import annotations

import ast
import gc
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

CODE_PACKAGES = ("probes", "tui", "widgets", "themes")

ALLOWED: dict[str, frozenset[str]] = {
    # The host side runs on a bare python3 and may import nothing of ours.
    "probes.agent": frozenset(),
    "probes.errors": frozenset(),
    "probes.triage": frozenset(),
    "probes.wire": frozenset({"probes.errors"}),
    "probes.config": frozenset({"probes.errors", "probes.agent", "probes.wire"}),
    # one host's stream (ssh, local, the session): it never judges, so never imports analysis
    "probes.transport": frozenset({"probes.errors", "probes.agent", "probes.wire",
                                   "probes.config"}),
    # the fleet-level seam: a source runs hosts' streams (transport), a metrics server or a
    # recording (store) and emits items; it names a Finding only where one is recorded or
    # replayed.  It never folds: the fold (fleet_state) and the read-once path that judges a
    # source (outputs.read_once) are downstream and import sources, never the other way.
    "probes.sources": frozenset({"probes.errors", "probes.triage", "probes.wire",
                                 "probes.config", "probes.transport", "probes.store",
                                 "probes.analysis"}),
    "probes.rules": frozenset({"probes.errors", "probes.triage", "probes.wire"}),
    "probes.history": frozenset({"probes.wire"}),
    "probes.analysis": frozenset({"probes.errors", "probes.triage", "probes.wire",
                                  "probes.config", "probes.rules", "probes.history"}),
    "probes.fleet_state": frozenset({"probes.errors", "probes.triage", "probes.wire",
                                     "probes.config", "probes.rules", "probes.history",
                                     "probes.analysis"}),
    "probes.store": frozenset({"probes.errors", "probes.triage", "probes.wire",
                               "probes.config", "probes.analysis"}),
    # actions on a node (drain, resume) rest on a finding, run Slurm's client and keep an
    # audit trail; they read no host themselves (outputs' recheck does)
    "probes.actions": frozenset({"probes.errors", "probes.triage", "probes.wire",
                                 "probes.config", "probes.analysis"}),
    # outputs render what the stages before them found; a job's own log is read through
    # explain's log readers (explain never imports outputs)
    "probes.outputs": frozenset({"probes.errors", "probes.triage", "probes.wire",
                                 "probes.config", "probes.transport", "probes.sources",
                                 "probes.rules", "probes.history", "probes.analysis",
                                 "probes.fleet_state", "probes.store", "probes.explain",
                                 "probes.actions"}),
    "probes.explain": frozenset({"probes.errors", "probes.triage", "probes.wire",
                                 "probes.rules"}),
    "probes": frozenset(),
    # Widgets render views; they may name the core's types but never reach into the app.
    "widgets": frozenset({"probes.errors", "probes.triage", "probes.wire", "probes.rules",
                          "probes.history", "probes.analysis", "probes.fleet_state",
                          "themes"}),
    "themes": frozenset(),
    "tui": frozenset({"probes", "widgets", "themes"}),
}
"""Each unit of the house → the units it may import (besides itself and the stdlib)."""

THIRD_PARTY_FORBIDDEN = {
    "probes": ("textual", "rich"),
    "widgets": (),
    "themes": (),
    "tui": (),
}

TOP_LEVEL_PROBES = {"__init__", "errors", "triage", "fleet_state"}
"""The only modules at ``probes/`` top level: everything else lives in its stage's package."""

MAX_LINES = 800
"""A module past this is split by concern (issue #37: the old hard 600 forced splits made
only for the count)."""
WARN_LINES = 500
"""A module past this is named on every run, so its split is planned before it is forced."""


def _unit(module: str) -> str | None:
    """The longest ``ALLOWED`` key that is ``module`` or a package above it."""
    best = None
    for key in ALLOWED:
        if (module == key or module.startswith(key + ".")) and (best is None
                                                                or len(key) > len(best)):
            best = key
    return best


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in ``tree``, type-only ones included."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:  # ``from probes import history`` imports probes.history
                yield f"{target}.{alias.name}", node.lineno
        stack.extend(ast.iter_child_nodes(node))


def _sources() -> list[Path]:
    return sorted(p for pkg in CODE_PACKAGES for p in (REPO / pkg).rglob("*.py")
                  if "__pycache__" not in p.parts)


def _our_modules() -> set[str]:
    return {_module_name(p) for p in _sources()}


def _parse_all(paths: list[Path]) -> list[ast.AST]:
    """``ast.parse`` of every file with the collector held off: on CPython 3.11 a finalizer
    that runs in the middle of a parse (an earlier test's subprocess transport, say) and
    formats a traceback parses too, and the nested parse fails with "AST constructor
    recursion depth mismatch".  One collection first, not one per file: in a test worker
    that has run a thousand tests each full collection costs tenths of a second."""
    gc.collect()
    gc.disable()
    try:
        return [ast.parse(path.read_text(), filename=str(path)) for path in paths]
    finally:
        gc.enable()


def _violations() -> list[str]:
    ours = _our_modules()
    found = []
    paths = _sources()
    for path, tree in zip(paths, _parse_all(paths), strict=True):
        module = _module_name(path)
        unit = _unit(module)
        assert unit is not None, f"{path.relative_to(REPO)} belongs to no unit of ALLOWED"
        for target, line in _imports(tree, module, path.name == "__init__.py"):
            top = target.split(".")[0]
            where = f"{path.relative_to(REPO)}:{line}"
            if top in THIRD_PARTY_FORBIDDEN.get(unit.split(".")[0], ()):
                found.append(f"{where}: {unit} imports {target}")
                continue
            if top not in CODE_PACKAGES or target not in ours:
                continue  # stdlib, third party, or the ``from x import name`` of a non-module
            other = _unit(target)
            if other is None or other == unit or other in ALLOWED[unit]:
                continue
            if unit.split(".")[0] == "tui" and other.startswith("probes"):
                continue  # the app may use any part of the core
            found.append(f"{where}: {unit} may not import {target} ({other})")
    return found


def test_every_import_follows_the_data_flow() -> None:
    assert _violations() == []


def test_the_allowed_graph_has_no_cycle() -> None:
    """If two units could import each other, the table would allow a knot."""
    seen: dict[str, int] = {}

    def visit(unit: str, path: tuple[str, ...]) -> None:
        if seen.get(unit) == 2:
            return
        assert seen.get(unit) != 1, f"cycle: {' → '.join((*path, unit))}"
        seen[unit] = 1
        for other in ALLOWED[unit]:
            if other == "probes":
                continue
            visit(other, (*path, unit))
        seen[unit] = 2

    for unit in ALLOWED:
        visit(unit, ())


def test_probes_top_level_holds_only_a_few_modules() -> None:
    found = {p.stem for p in (REPO / "probes").glob("*.py")}
    assert found <= TOP_LEVEL_PROBES, f"put {sorted(found - TOP_LEVEL_PROBES)} in a stage package"


def test_no_module_is_too_big_to_read() -> None:
    sizes = [(p.relative_to(REPO), len(p.read_text().splitlines())) for p in _sources()
             if p.parts[-2:] != ("themes", "themes.py")]
    near = [f"{p}: {n}" for p, n in sizes if WARN_LINES < n <= MAX_LINES]
    if near:
        warnings.warn(f"modules past {WARN_LINES} lines (split by concern before "
                      f"{MAX_LINES}): {', '.join(near)}", stacklevel=1)
    big = [f"{p}: {n} lines" for p, n in sizes if n > MAX_LINES]
    assert big == []


@pytest.mark.parametrize("source, unit, target, allowed", [
    ("probes/wire/samples.py", "probes.wire", "textual.widget", False),
    ("widgets/gpu_table.py", "widgets", "tui.app", False),
    ("probes/agent/main.py", "probes.agent", "probes.wire.samples", False),
    ("probes/rules/parsers/topo.py", "probes.rules", "probes.explain.run", False),
    ("probes/explain/run.py", "probes.explain", "probes.rules.result", True),
    ("tui/app.py", "tui", "probes.sources.replay", True),
    ("probes/transport/session.py", "probes.transport", "probes.analysis.findings", False),
    ("probes/transport/session.py", "probes.transport", "probes.sources.base", False),
    ("probes/sources/base.py", "probes.sources", "probes.fleet_state", False),
    ("probes/sources/base.py", "probes.sources", "probes.analysis.findings", True),
    ("probes/outputs/read_once.py", "probes.outputs", "probes.sources.base", True),
])
def test_the_checker_sees_a_forbidden_import(tmp_path: Path, source: str, unit: str,
                                             target: str, allowed: bool) -> None:
    """The checker itself can fail: a planted import is judged as the table says."""
    assert _unit(source.removesuffix(".py").replace("/", ".")) == unit
    tree = ast.parse(f"import {target}\n")
    imported = [t for t, _ in _imports(tree, unit, False)]
    assert imported == [target]
    other = _unit(target)
    verdict = other == unit or other in ALLOWED[unit] or (
        unit == "tui" and (other or "").startswith("probes"))
    if unit.startswith("probes") and target.split(".")[0] in ("textual", "rich"):
        verdict = False
    assert verdict is allowed


def test_type_checking_imports_count() -> None:
    """A type-only import is an edge like any other: ``transport`` naming an analysis type
    under ``TYPE_CHECKING`` fails as a run-time import would."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from probes.analysis.findings import Finding\n")
    imported = [t for t, _ in _imports(tree, "probes.transport.x", False)]
    assert "probes.analysis.findings" in imported
    assert _unit("probes.analysis.findings") not in ALLOWED["probes.transport"]
