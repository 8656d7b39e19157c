"""The agent as shipped: ``probes/agent/*.py`` assembled into one Python 3.8 source.

Two variants are shipped: with the simulator (hosts run with ``--simulate``) and without it
(real hosts).  Each must parse as 3.8, import only the standard library, stay under the size
cap, define no top-level name twice (concatenation would silently shadow it) and run on a
bare ``python3 -I -S``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes.transport import bootstrap
from probes.transport.bootstrap import (
    AGENT_DIR,
    AGENT_PARTS,
    SIMULATOR_PART,
    agent_source,
    bootstrap_argv,
    shipped_source,
)
from tui.cli import main as cli_main

SIZE_CAP = 120 * 1024
"""An argv string may hold 128 KiB; the source travels on stdin, but stays well under."""
SIM_SIZE_CAP = 144 * 1024
"""The demo's agent (with the simulator: never sent to a real host, and like every agent it
travels on stdin, not in argv); the simulated training job's log lines took it past
``SIZE_CAP``, its own clock and job shapes (issue #34) past 128 KiB."""
OPTIONAL = {"pynvml", "psutil"}
"""Used when a host has them: imported only under ``try: ... except ImportError``."""
PACKAGE_ONLY = {"__init__", "__main__"}
"""The package's own entry points; never shipped."""


@pytest.fixture(params=[True, False], ids=["with-simulator", "real-host"])
def simulate(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _tree(simulate: bool) -> ast.Module:
    return ast.parse(agent_source(simulate=simulate), feature_version=(3, 8))


def _top_level_names(tree: ast.Module) -> list[str]:
    """Every name a top-level statement binds, once per binding."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return names


def _guarded_by_import_error(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id == "ImportError"
                for h in node.handlers):
            return True
    return False


def test_parses_as_python38(simulate: bool) -> None:
    """A host's stock interpreter may be 3.8."""
    _tree(simulate)


def test_every_package_module_parses_as_python38() -> None:
    for path in sorted(AGENT_DIR.glob("*.py")):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


def test_imports_only_the_standard_library(simulate: bool) -> None:
    tree = _tree(simulate)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    stray = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: a relative import was shipped"
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top in sys.stdlib_module_names:
                continue
            if top in OPTIONAL and _guarded_by_import_error(node, parents):
                continue
            stray.append(f"line {node.lineno}: {module}")
    assert stray == []


def test_size_is_under_the_cap(simulate: bool) -> None:
    size = len(agent_source(simulate=simulate))
    cap = SIM_SIZE_CAP if simulate else SIZE_CAP
    assert size < cap, f"{size} bytes ({size / cap:.0%} of the cap)"


def test_no_top_level_name_is_defined_twice(simulate: bool) -> None:
    """Modules are separate namespaces; concatenated, a second definition would win."""
    names = _top_level_names(_tree(simulate))
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_every_module_is_shipped_in_order_and_imports_only_earlier_siblings() -> None:
    """A part may use at import time (base classes, decorators, defaults) only what came
    before it, so ``from .x import`` must name a sibling shipped earlier, and the name must
    be defined there."""
    modules = {p.stem for p in AGENT_DIR.glob("*.py")} - PACKAGE_ONLY
    assert modules == set(AGENT_PARTS)
    defined = {m: set(_top_level_names(ast.parse((AGENT_DIR / f"{m}.py").read_text())))
               for m in AGENT_PARTS}
    wrong = []
    for i, name in enumerate(AGENT_PARTS):
        for node in ast.walk(ast.parse((AGENT_DIR / f"{name}.py").read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            where = f"{name}.py:{node.lineno}"
            if node.level != 1 or node.module not in AGENT_PARTS[:i]:
                wrong.append(f"{where}: from {'.' * node.level}{node.module} (not an earlier "
                             "sibling)")
                continue
            missing = {a.name for a in node.names} - defined[node.module]
            if missing:
                wrong.append(f"{where}: {sorted(missing)} not defined in {node.module}.py")
    assert wrong == []


def test_package_entry_points_import_only_siblings() -> None:
    for stem in PACKAGE_ONLY:
        tree = ast.parse((AGENT_DIR / f"{stem}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in AGENT_PARTS, (stem, node.module)


def test_the_assembler_refuses_an_import_of_a_later_part() -> None:
    with pytest.raises(ValueError, match=r"commands\.py:1: from \.main import"):
        bootstrap._part_body("commands", "from .main import main\n", AGENT_PARTS,
                             bootstrap._Imports())


def test_banners_mark_each_part_in_order(simulate: bool) -> None:
    text = agent_source(simulate=simulate).decode()
    parts = [p for p in AGENT_PARTS if simulate or p != SIMULATOR_PART]
    where = [text.find(f"# --- probes/agent/{p}.py ---\n") for p in parts]
    assert -1 not in where and where == sorted(where)
    assert text.startswith("#!/usr/bin/env python3\n")
    assert text.endswith('\n\nif __name__ == "__main__":\n    main()\n')
    assert text.count("from __future__ import annotations") == 1


def test_a_real_hosts_agent_has_no_simulator() -> None:
    real = agent_source(simulate=False)
    names = set(_top_level_names(_tree(False)))
    assert not {"Simulator", "SIM_SCENARIOS", "parse_scenarios", "sim_topo_text"} & names
    assert b"probes/agent/simulator.py" not in real
    full = agent_source(simulate=True)
    assert len(full) - len(real) > 10_000  # what real hosts are spared


def test_the_source_follows_the_agents_arguments() -> None:
    assert shipped_source(["--simulate", "healthy", "--seed", "2"]) == agent_source(True)
    assert shipped_source(["--simulate=leak"]) == agent_source(True)
    assert shipped_source(["--interval", "1", "--tail", "/var/log/x"]) == agent_source(False)
    for args in (["--once"], ["--simulate", "healthy"]):
        code = bootstrap_argv("python3", args)[3]
        assert f"read({len(shipped_source(args))})" in code


@pytest.mark.parametrize("args", [["--once"], ["--once", "--simulate", "healthy,leak:3"]])
def test_runs_once_on_a_bare_python(bare_python: str, args: list[str]) -> None:
    proc = subprocess.run([bare_python, "-I", "-S", "-", *args], input=shipped_source(args),
                          capture_output=True, timeout=60, check=True)
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    # a simulated HGX host has HCAs and NVLinks (a fabric message); this machine has neither
    fabric = ["fabric"] if "--simulate" in args else []
    assert [m["type"] for m in lines] == ["hello", *fabric, "sample"]
    assert proc.stderr == b""


def test_print_source_prints_the_shipped_source(capsysbinary: pytest.CaptureFixture[bytes]
                                                ) -> None:
    assert cli_main(["agent", "--print-source"]) == 0
    assert capsysbinary.readouterr().out == agent_source(simulate=False)
    assert cli_main(["agent", "--print-source", "--with-simulator"]) == 0
    assert capsysbinary.readouterr().out == agent_source(simulate=True)


def test_print_source_piped_into_a_bare_python(bare_python: str) -> None:
    """``python3 -I -S - --once < <(rigwatch agent --print-source)``, as the README says."""
    rigwatch = Path(sys.executable).parent / "rigwatch"
    bash = shutil.which("bash")
    if bash is None or not os.access(rigwatch, os.X_OK):
        pytest.skip("needs bash and the installed rigwatch script")
    proc = subprocess.run(
        [bash, "-c", f'"{bare_python}" -I -S - --once < <("{rigwatch}" agent --print-source)'],
        capture_output=True, timeout=60, check=True)
    assert [json.loads(x)["type"] for x in proc.stdout.decode().splitlines()] == [
        "hello", "sample"]
