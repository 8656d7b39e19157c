"""``tests/`` mirrors the house (issue #37 item 7): every test file sits in the folder of the
stage it tests, so a stage's tests are found where its code is, and a new file has one place.

Where a new test file goes (the first that fits):
``e2e`` if it drives the whole console against a real sshd, Slurm, Prometheus, ibsim or tmux;
else the stage whose module it tests (``probes/<stage>/``, ``tui/``, ``widgets/``);
``house`` for checks of the whole house (layers, imports, errors, pages, quick benches).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import TESTS

STAGES = {
    "agent": "the host agent (probes/agent): its reads, assembly, simulator",
    "wire": "the wire protocol and its one field table (probes/wire)",
    "transport": "one host's stream: sessions, ssh, collectors and their relay (probes/transport)",
    "sources": "the fleet-level seam: backends, Prometheus, Slurm job watch, inventory "
               "(probes/sources, probes/config)",
    "rules": "log rules, parsers, explain, throughput rules (probes/rules, probes/explain)",
    "history": "per-host history (probes/history)",
    "analysis": "the fold and its judgements: fleet state, detectors, findings, alerts "
                "(probes/fleet_state.py, probes/analysis)",
    "store": "recordings, replay, the codec (probes/store)",
    "outputs": "what leaves the console: export, report, manifest, ladder, preflight, "
               "node actions (probes/outputs, probes/actions)",
    "tui": "the console's screens, keys, CLI and Textual snapshots (tui/)",
    "widgets": "one widget at a time (widgets/)",
    "e2e": "the whole console against real sshd, Slurm, Prometheus, ibsim or tmux",
    "house": "checks of the whole house: layers, import hygiene, errors, pages, quick benches, "
             "this layout",
}
"""Each stage folder and what its tests hold."""
KEPT = {"support", "data", "fixtures", "bench", "device"}
"""Folders that are not stages: helpers, inputs, benchmarks, the GPU check."""


def misplaced(tests: Path) -> list[str]:
    """Every way ``tests`` strays from the layout, one line each (empty when it holds)."""
    wrong = [f"{p.name}: a test file directly under tests/" for p in tests.glob("test_*.py")]
    folders = {p.name for p in tests.iterdir()
               if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__"}
    wrong += [f"{name}/: not a stage folder" for name in sorted(folders - STAGES.keys() - KEPT)]
    wrong += [f"{name}/: stage folder missing" for name in sorted(STAGES.keys() - folders)]
    for name in sorted(folders & STAGES.keys()):
        stage = tests / name
        if not (stage / "__init__.py").is_file():
            wrong.append(f"{name}/: no __init__.py (tests import each other as packages)")
        if not any(stage.glob("test_*.py")):
            wrong.append(f"{name}/: holds no test file")
        wrong += [f"{name}/{p.relative_to(stage)}: a test file below a stage folder"
                  for p in stage.glob("*/**/test_*.py") if "__snapshots__" not in p.parts]
        for snaps in sorted(stage.glob("__snapshots__/*")):
            if not (stage / f"{snaps.name}.py").is_file():
                wrong.append(f"{name}/__snapshots__/{snaps.name}: no {snaps.name}.py beside it")
    wrong += [f"{p.relative_to(tests)}: a test file outside the stage folders"
              for name in sorted(KEPT & folders) for p in (tests / name).rglob("test_*.py")]
    return wrong


def test_every_test_file_sits_in_its_stage_folder() -> None:
    assert misplaced(TESTS) == []


def test_the_stage_folders_are_exactly_the_listed_set() -> None:
    folders = {p.name for p in TESTS.iterdir()
               if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__"}
    assert folders == STAGES.keys() | KEPT


def test_a_stray_file_folder_or_snapshot_is_named(tmp_path: Path) -> None:
    """The check can fail: a tree planted with each fault gets one line for each."""
    for name in [*STAGES, *KEPT]:
        (tmp_path / name).mkdir()
        if name in STAGES:
            (tmp_path / name / "__init__.py").write_text("")
            (tmp_path / name / "test_x.py").write_text("")
    assert misplaced(tmp_path) == []
    (tmp_path / "test_flat.py").write_text("")
    (tmp_path / "misc").mkdir()
    (tmp_path / "wire" / "__init__.py").unlink()
    (tmp_path / "tui" / "__snapshots__" / "test_gone").mkdir(parents=True)
    (tmp_path / "support" / "test_hidden.py").write_text("")
    (tmp_path / "rules" / "deeper").mkdir()
    (tmp_path / "rules" / "deeper" / "test_deep.py").write_text("")
    (tmp_path / "store" / "test_x.py").unlink()
    assert misplaced(tmp_path) == [
        "test_flat.py: a test file directly under tests/",
        "misc/: not a stage folder",
        "rules/deeper/test_deep.py: a test file below a stage folder",
        "store/: holds no test file",
        "tui/__snapshots__/test_gone: no test_gone.py beside it",
        "wire/: no __init__.py (tests import each other as packages)",
        "support/test_hidden.py: a test file outside the stage folders",
    ]
