"""Shared fixtures: the agent as shipped, fake nvidia-smi binaries, the shared fixture folder."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.transport.bootstrap import agent_source

REPO = Path(__file__).resolve().parent.parent
AGENT_SOURCE = agent_source(simulate=True)
"""The agent exactly as a simulated host is sent it (a real host's lacks only the simulator)."""
SHARED = REPO.parent / "shared"
BARE_PYTHON = "/usr/bin/python3"
"""Debian's stock interpreter with no extra packages: a stand-in for a bare GPU host."""


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's own config and ssh settings out of every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("RIGWATCH_CONFIG", raising=False)
    monkeypatch.delenv("RIGWATCH_INVENTORY", raising=False)
    monkeypatch.delenv("RIGWATCH_SETTINGS", raising=False)
    monkeypatch.delenv("RIGWATCH_AUDIT", raising=False)


@pytest.fixture
def shared_fixtures() -> Path:
    """``../shared/fixtures`` next to the repository (CI puts a copy there)."""
    path = SHARED / "fixtures"
    if not path.is_dir():
        pytest.skip(f"shared fixtures not found at {path}")
    return path


@pytest.fixture
def bare_python() -> str:
    """A Python with only the standard library, like a GPU host's stock python3."""
    if not os.access(BARE_PYTHON, os.X_OK):
        pytest.skip(f"{BARE_PYTHON} not present")
    return BARE_PYTHON


@pytest.fixture
def fake_smi(tmp_path: Path, shared_fixtures: Path) -> Callable[[str], dict[str, str]]:
    """Put a fake ``nvidia-smi`` on PATH; returns a function mode -> environment for the agent."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    target = bindir / "nvidia-smi"
    shutil.copy(REPO / "tests" / "data" / "fake_nvidia_smi.py", target)
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    capture = shared_fixtures / "nvidia-smi" / "02-h100-query-gpu-csv-212cols.txt"

    def env_for(mode: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        env["FAKE_SMI_MODE"] = mode
        env["FAKE_SMI_FIXTURE"] = str(capture)
        return env

    return env_for
