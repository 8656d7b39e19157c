"""Shared by the node-action tests (issue #39): the four nodes' inventory, a ``scontrol``
wrapper on PATH that records every call, and reading ``sinfo -R`` and the audit trail."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.slurm import SlurmCluster, start_cluster

NODES = ("n1", "n2", "n3", "n4")


@contextlib.contextmanager
def four_nodes() -> Iterator[SlurmCluster]:
    """The four-node cluster, in a directory other users may pass through (pytest's own is
    0700): the test of a user who is not a Slurm operator runs the real scontrol as uid 1,
    which must read slurm.conf and reach munged's socket to be refused by Slurm itself."""
    root = Path(tempfile.mkdtemp(prefix="rigwatch-slurm-"))
    root.chmod(0o755)
    cluster = start_cluster(root, nodes=4)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def inventory(tmp: Path, scenarios: dict[str, str], name: str = "inventory.yaml") -> Path:
    """n1 … n4 as simulated hosts read through the local transport, each with its agent;
    ``scenarios`` per node (default healthy): ``xid79:1@0`` loses GPU1 at once."""
    lines = ["hosts:"]
    for node in NODES:
        lines += [f"  - name: {node}", "    transport: local", f"    python: {sys.executable}",
                  f"    simulate: ['{scenarios.get(node, 'healthy')}']", "    expect_gpus: 8"]
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    return path


def recording_scontrol(tmp: Path, as_uid: int | None = None) -> tuple[Path, Path]:
    """A directory holding an ``scontrol`` that appends its arguments to a log, then runs
    the real one (as ``as_uid`` when given: a user who is not a Slurm operator); returns
    (the directory to put first on PATH, the log)."""
    real = shutil.which("scontrol") or "/usr/bin/scontrol"
    bindir = tmp / "wrapped-bin"
    bindir.mkdir(exist_ok=True)
    log = tmp / "scontrol-calls.log"
    log.touch()
    run = (f"exec setpriv --reuid={as_uid} --regid={as_uid} --clear-groups {real} \"$@\""
           if as_uid is not None else f'exec {real} "$@"')
    script = bindir / "scontrol"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n{run}\n')
    script.chmod(0o755)
    return bindir, log


def reasons(cluster: SlurmCluster) -> dict[str, tuple[str, str]]:
    """``sinfo -R``: node → (reason, user) for every drained or down node."""
    out = cluster.run("sinfo", "-R", "-h", "-N", "-o", "%N|%u|%E")
    found = {}
    for line in out.splitlines():
        node, user, reason = line.split("|", 2)
        found[node] = (reason, user)
    return found


def resume_all(cluster: SlurmCluster) -> None:
    """Every node back to work, whatever a test left."""
    for node in reasons(cluster):
        cluster.run("scontrol", "update", f"nodename={node}", "state=resume")


def trail(path: Path) -> list[dict[str, object]]:
    """The audit trail's lines, parsed."""
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    """The four nodes, started once for each test module that imports this fixture."""
    with four_nodes() as c:
        yield c
