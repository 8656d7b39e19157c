"""The console's start-up order (#38 item 5): its collectors are spawned before the
recorder is set up and before modules they do not need are imported (the replay source,
numpy, the recording's writer, Textual), so their handshakes start that much sooner.

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


def _at_spawn(tmp: Path, order: str, *extra: str) -> dict:
    record = tmp / f"rec-{order}-{len(extra)}"
    record.mkdir()
    proc = subprocess.run([sys.executable, "-m", CHILD, str(_inventory(tmp)), order,
                           str(record), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr
    return lines[-1]


def _spawned_first(report: dict) -> bool:
    """The spawn came before any module the collectors do not need and any recording."""
    return report["spawned"] and report["imported"] == [] and report["recordings"] == []


@pytest.mark.parametrize("extra", [(), ("--no-record",)], ids=["recorded", "no-record"])
def test_the_collectors_are_spawned_before_the_recorder_and_the_ui(
        tmp_path: Path, extra: tuple[str, ...]) -> None:
    report = _at_spawn(tmp_path, "now", *extra)
    assert _spawned_first(report), report


def test_the_order_before_is_told_apart(tmp_path: Path) -> None:
    """Negative control: the source and its recorded backend built first, then the spawn."""
    recorded = _at_spawn(tmp_path, "before")
    assert recorded["spawned"] and not _spawned_first(recorded)
    assert "numpy" in recorded["imported"] and recorded["recordings"] != []
    bare = _at_spawn(tmp_path, "before", "--no-record")
    assert bare["spawned"] and "probes.sources.replay" in bare["imported"]
