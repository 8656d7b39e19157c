"""The console's start-up order (#38 item 5): its collectors are spawned before the
recorder is set up and before modules they do not need are imported (the replay source,
numpy, the recording's writer, Textual), so their handshakes start that much sooner; the
garbage collector is off from there until the app is built and ``tune_for_streaming`` has
collected and frozen it, and on again when the app runs (or when building it failed).

Order of events, not time: a fresh interpreter runs ``tui.cli.main`` on an inventory whose
collector spawn is replaced by a report of what had happened by then.  Negative control:
the order before the change (``cli_console_before_s13``) is told apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CHILD = "tests.tui.start_order_child"


def _inventory(tmp: Path) -> Path:
    inv = {"defaults": {"user": "root", "identity": str(tmp / "id"),
                        "known_hosts": str(tmp / "known_hosts"),
                        "host_key_checking": "strict", "interval": 1},
           "groups": {"g": {"address": "127.0.0.1", "port": 2222,
                            "hosts": [f"h{i:03d}" for i in range(8)]}}}
    path = tmp / "inventory.yaml"
    path.write_text(json.dumps(inv))  # JSON is YAML
    return path


def _at_spawn(tmp: Path, order: str, *extra: str, when: str = "spawn") -> dict:
    record = tmp / f"rec-{order}-{when}-{len(extra)}"
    record.mkdir()
    proc = subprocess.run([sys.executable, "-m", CHILD, str(_inventory(tmp)), order, when,
                           str(record), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr
    return lines[-1]


def _spawned_first(report: dict) -> bool:
    """The spawn came before any module the collectors do not need and any recording,
    with the garbage collector off."""
    return report["at"] == "spawn" and report["imported"] == [] and \
        report["recordings"] == [] and not report["gc_enabled"]


@pytest.mark.parametrize("extra", [(), ("--no-record",)], ids=["recorded", "no-record"])
def test_the_collectors_are_spawned_before_the_recorder_and_the_ui(
        tmp_path: Path, extra: tuple[str, ...]) -> None:
    report = _at_spawn(tmp_path, "now", *extra)
    assert _spawned_first(report), report


def test_the_order_before_is_told_apart(tmp_path: Path) -> None:
    """Negative control: the source and its recorded backend built first, then the spawn."""
    recorded = _at_spawn(tmp_path, "before")
    assert recorded["at"] == "spawn" and not _spawned_first(recorded)
    assert "numpy" in recorded["imported"] and recorded["recordings"] != []
    assert recorded["gc_enabled"]
    bare = _at_spawn(tmp_path, "before", "--no-record")
    assert bare["at"] == "spawn" and "probes.sources.replay" in bare["imported"]


def test_the_app_runs_with_the_collector_on_and_start_up_frozen(tmp_path: Path) -> None:
    report = _at_spawn(tmp_path, "now", "--no-record", when="run")
    assert report["at"] == "run" and report["gc_enabled"] and report["frozen"] > 10_000


def test_a_console_that_fails_to_build_leaves_the_collector_on(tmp_path: Path) -> None:
    report = _at_spawn(tmp_path, "now", "--no-record", "--theme", "nosuch", when="run")
    assert report["at"] == "returned" and report["status"] != 0 and report["gc_enabled"]
