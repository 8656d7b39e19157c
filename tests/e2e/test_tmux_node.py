"""End to end in a real terminal (issue #39): the installed ``rigwatch`` in tmux, watching the
real four-node Slurm's hosts (simulated GPUs, real agents; ``n3`` has lost GPU1 to an Xid 79).
Triage → ``D`` → the node's name typed → Slurm's own ``sinfo -R`` shows the reason → ``U`` is
refused while the fault holds."""

from __future__ import annotations

import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.node_actions import four_nodes, inventory, reasons, trail
from tests.support.slurm import SlurmCluster
from tests.support.tmux import RIGWATCH, Tmux

pytestmark = pytest.mark.tmux


@pytest.fixture
def cluster() -> Iterator[SlurmCluster]:
    with four_nodes() as c:
        yield c


def test_drain_from_triage_and_a_refused_resume_in_a_real_terminal(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    if shutil.which("tmux") is None or not RIGWATCH.exists():
        pytest.skip("tmux or the installed rigwatch is missing")
    inv = inventory(tmp_path, {"n3": "xid79:1@0"})
    data = tmp_path / "data"
    term = Tmux(140, 45)
    try:
        env = (f"cd {REPO} && TERM=xterm-256color TEXTUAL_ANIMATIONS=none "
               f"SLURM_CONF={shlex.quote(cluster.env['SLURM_CONF'])} "
               f"XDG_DATA_HOME={shlex.quote(str(data))} "
               f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path / 'config'))}")
        term.start(f"{env} {RIGWATCH} --inventory {shlex.quote(str(inv))} --no-record")
        term.wait_for(lambda s: all(n in s for n in ("n1", "n2", "n3", "n4")), timeout=30.0)
        term.keys("t")
        term.wait_for(lambda s: "First failure:" in s and "Xid 79" in s, timeout=30.0)
        term.keys("D")
        screen, _ = term.wait_for(lambda s: "Drain Slurm node n3" in s
                                  and "type n3 to drain it" in s, timeout=10.0)
        assert "command: scontrol update nodename=n3 state=drain" in screen
        assert "rigwatch never runs it" in screen  # the GPU reset: a plan
        term.keys("n3", "Enter")
        screen, _ = term.wait_for(lambda s: "done: n3 drained" in s, timeout=30.0)
        reason, user = reasons(cluster)["n3"]
        assert reason.startswith("rigwatch ") and "Xid 79 on GPU1" in reason, reason
        assert user == "root"
        term.keys("Escape")
        term.wait_for(lambda s: "First failure:" in s and "Drain Slurm node" not in s,
                      timeout=10.0)
        term.keys("U")
        screen, _ = term.wait_for(lambda s: "Resume refused" in s, timeout=60.0)
        assert "Xid 79" in screen
        assert "n3" in reasons(cluster)  # still drained
        term.keys("Escape")
        time.sleep(0.3)
        term.keys("Escape")
        term.keys("q")
        deadline = time.monotonic() + 10
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        term.kill()
    lines = trail(data / "rigwatch" / "audit.jsonl")
    assert [(x["action"], x["outcome"]) for x in lines] == [
        ("drain", "attempted"), ("drain", "done"), ("resume", "refused")]
