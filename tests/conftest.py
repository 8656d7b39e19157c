"""Shared fixtures: the agent as shipped, fake nvidia-smi binaries, the sample folder."""

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
FIXTURES = REPO / "tests" / "fixtures" / "samples"
"""Samples shaped like real machines' output, one category per folder, each with its
``.expect.json`` (``README.md`` there says how they were made and read)."""
CONTRACT = REPO / "tests" / "fixtures" / "EXPLAIN-CONTRACT.md"
"""The JSON ``rigwatch explain --json`` prints, as scripts rely on it (a copy of the
project's contract: the tests check every code it names is a code)."""
BARE_PYTHON = "/usr/bin/python3"
"""Debian's stock interpreter with no extra packages: a stand-in for a bare GPU host."""


SLOW_MODULES: dict[str, tuple[str, ...]] = {
    "test_soak": ("soak",),
    "test_bench_quick": ("bench",),
    "test_bench_fleet_quick": ("bench",),
    "test_tmux_e2e": ("tmux",),
    "test_tmux_hostile": ("tmux",),
    "test_tmux_truth": ("tmux",),
    "test_console_crash": ("tmux",),
    "test_ssh_sshd": ("sshd",),
    "test_retry_sshd": ("sshd",),
    "test_prometheus_live": ("prometheus",),
    "test_prometheus_backfill": ("prometheus",),
    "test_prometheus_shards": ("prometheus",),
    "test_prometheus_faults": ("prometheus",),
    "test_prometheus_parity": ("prometheus",),
    "test_pages_true": ("sshd",),
    "test_collector_faults": ("slow",),  # real collectors stopped, frozen and killed
}
"""End-to-end modules, by what real part they run: each is also ``slow``."""
SLOW_FIXTURES = {"cluster": "slurm", "running_job": "slurm"}
"""Fixtures that start a real part (``tests/support/slurm.py``'s cluster): their tests are
``slow`` and marked with the part."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the end-to-end tests ``slow`` (and soak, bench, tmux, sshd, prometheus, slurm),
    so ``pytest -m "not slow"`` runs the rest in minutes; CI runs everything."""
    for item in items:
        module = getattr(item, "module", None)
        name = module.__name__.rsplit(".", 1)[-1] if module is not None else ""
        kinds = set(SLOW_MODULES.get(name, ()))
        kinds |= {kind for fixture, kind in SLOW_FIXTURES.items()
                  if fixture in getattr(item, "fixturenames", ())}
        if item.get_closest_marker("slow") is not None:
            kinds.add("slow")
        for kind in sorted(kinds):
            item.add_marker(kind)
        if kinds:
            item.add_marker(pytest.mark.slow)
    # The end-to-end tests first (a stable sort: each keeps its order): with two workers,
    # a minute-long test handed out last would leave the other worker idle at the end.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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
def bare_python() -> str:
    """A Python with only the standard library, like a GPU host's stock python3."""
    if not os.access(BARE_PYTHON, os.X_OK):
        pytest.skip(f"{BARE_PYTHON} not present")
    return BARE_PYTHON


@pytest.fixture
def fake_smi(tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """Put a fake ``nvidia-smi`` on PATH; returns a function mode -> environment for the agent."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    target = bindir / "nvidia-smi"
    shutil.copy(REPO / "tests" / "data" / "fake_nvidia_smi.py", target)
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    capture = FIXTURES / "nvidia-smi" / "02-h100-query-gpu-csv-212cols.txt"

    def env_for(mode: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        env["FAKE_SMI_MODE"] = mode
        env["FAKE_SMI_FIXTURE"] = str(capture)
        return env

    return env_for
