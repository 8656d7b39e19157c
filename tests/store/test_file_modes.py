"""``export -o`` and ``manifest -o`` write mode-0600 files and never follow a symlink at the
target (review finding 12).

Before the fix the export was written with the umask (0644 observed) and the manifest was
opened with O_TRUNC without O_NOFOLLOW, so a symlink at ``-o`` truncated its target.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from probes.outputs.private_file import private_file
from probes.store.recording import Recorder
from probes.wire.protocol import decode_line
from tests.conftest import AGENT_SOURCE
from tui.cli import main


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real agent's short simulated stream, recorded."""
    path = tmp_path_factory.mktemp("rec") / "run.sqlite3"
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--simulate", "healthy", "--fast", "--count", "5",
         "--interval", "10", "--hostname", "gpu-m01"],
        input=AGENT_SOURCE, capture_output=True, timeout=60, check=True)
    rec = Recorder(path, "k", ["gpu-m01"])
    for raw in proc.stdout.splitlines():
        item = decode_line(raw)
        rec.record("gpu-m01", float(getattr(item, "ts", 0.0)), item)
    rec.close()
    return path


@pytest.fixture
def loose_umask() -> object:
    old = os.umask(0o022)
    yield None
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    victim.chmod(0o644)
    return victim


@pytest.mark.usefixtures("loose_umask")
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "prometheus"])
def test_export_is_private_whatever_the_umask(recording: Path, tmp_path: Path,
                                              fmt: str) -> None:
    out = tmp_path / f"run.{fmt}"
    assert main(["export", str(recording), "--format", fmt, "-o", str(out)]) == 0
    assert _mode(out) == 0o600 and out.stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temp file left


@pytest.mark.usefixtures("loose_umask")
def test_export_replaces_a_symlink_instead_of_following_it(recording: Path,
                                                            tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "run.csv"
    out.symlink_to(victim)
    assert main(["export", str(recording), "--format", "csv", "-o", str(out)]) == 0
    assert not out.is_symlink() and _mode(out) == 0o600
    assert out.read_text().startswith("ts,host,gpu")
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644


@pytest.mark.usefixtures("loose_umask")
def test_manifest_is_private_and_replaces_a_symlink(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "fleet.yaml"
    out.symlink_to(victim)
    assert main(["manifest", "--demo", "-o", str(out)]) == 0
    assert not out.is_symlink() and _mode(out) == 0o600
    assert "gpu-a01" in out.read_text()
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644
    plain = tmp_path / "plain.json"
    assert main(["manifest", "--demo", "--format", "json", "-o", str(plain)]) == 0
    assert _mode(plain) == 0o600


def test_a_failed_write_leaves_the_target_and_no_temp_file(tmp_path: Path) -> None:
    out = tmp_path / "keep.txt"
    out.write_text("before\n")
    with pytest.raises(RuntimeError), private_file(out) as f:
        f.write("half")
        raise RuntimeError("disk gone")
    assert out.read_text() == "before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_an_unwritable_target_is_one_clear_line(recording: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "no-such-dir" / "run.csv"
    assert main(["export", str(recording), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write the export" in err and "Traceback" not in err
    assert main(["manifest", "--demo", "-o", str(out)]) == 2
    assert "cannot write the manifest" in capsys.readouterr().err


def test_a_device_or_fifo_at_the_target_is_refused(recording: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["export", str(recording), "-o", str(fifo)]) == 2
    assert "exists and is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert main(["manifest", "--demo", "-o", str(tmp_path)]) == 2
    assert "cannot write the manifest" in capsys.readouterr().err
