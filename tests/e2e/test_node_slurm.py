"""``rigwatch node drain|resume|audit`` on a real four-node Slurm (issue #39).

``tests/support/slurm.py`` starts Debian's Slurm 22.05 with nodes ``n1`` … ``n4``; the
inventory's hosts of the same names are simulated 8-GPU hosts whose agents run for real
(``n3: xid79:1@0`` has lost GPU1 with its Xid 79).  What Slurm shows is read with its own
``sinfo -R``; what rigwatch recorded, from the audit trail's lines.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support import node_actions
from tests.support.node_actions import (
    inventory,
    reasons,
    recording_scontrol,
    resume_all,
    trail,
)
from tests.support.slurm import SlurmCluster
from tests.support.sshd import free_port

cluster = node_actions.cluster
"""The fixture: the module's four-node Slurm, started once (``tests/support/node_actions.py``)."""


@pytest.fixture
def slurm(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster with every node idle before and after the test."""
    resume_all(cluster)
    yield cluster
    resume_all(cluster)


def node_cmd(cluster: SlurmCluster, audit: Path, *args: str, path: Path | None = None,
             env: dict[str, str] | None = None, stdin: int | None = subprocess.DEVNULL,
             timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``rigwatch node ARGS`` with the cluster's SLURM_CONF and the trail at ``audit``."""
    run_env = dict(cluster.env, RIGWATCH_AUDIT=str(audit), **(env or {}))
    run_env.pop("RIGWATCH_SETTINGS", None)
    if path is not None:
        run_env["PATH"] = f"{path}:{run_env['PATH']}"
    return subprocess.run([sys.executable, "-m", "tui.cli", "node", *args], env=run_env,
                          cwd=REPO, stdin=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_a_drain_from_the_cli_keeps_the_finding_as_reason_and_slurm_shows_it(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    audit = tmp_path / "audit" / "trail.jsonl"
    out = node_cmd(slurm, audit, "drain", "n2", "--reason", "Xid 79 on GPU1", "--finding",
                   "xid", "--yes")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("n2: drain done — Slurm shows n2 drained")
    assert "command: scontrol update nodename=n2 state=drain 'reason=rigwatch xid: Xid 79 " \
        "on GPU1'" in out.stderr
    assert reasons(slurm) == {"n2": ("rigwatch xid: Xid 79 on GPU1", "root")}
    lines = trail(audit)
    assert [x["outcome"] for x in lines] == ["attempted", "done"]
    assert lines[0]["action_id"] == lines[1]["action_id"]
    done = lines[1]
    assert done["verified"]["state"].rstrip("*") == "drained"  # type: ignore[index]
    assert done["verified"]["reason"] == "rigwatch xid: Xid 79 on GPU1"  # type: ignore[index]
    assert done["command"] == ["scontrol", "update", "nodename=n2", "state=drain",
                               "reason=rigwatch xid: Xid 79 on GPU1"]
    assert done["exit"] == 0 and done["via"] == "cli"
    assert done["evidence"]["code"] == "xid"  # type: ignore[index]
    assert done["who"]["user"] == "root" and done["who"]["uid"] == 0  # type: ignore[index]
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600
    assert stat.S_IMODE(audit.parent.stat().st_mode) == 0o700


def test_resume_is_refused_while_the_fault_holds_and_done_once_it_clears_or_overridden(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    audit = tmp_path / "trail.jsonl"
    broken = inventory(tmp_path, {"n3": "xid79:1@0"})
    assert node_cmd(slurm, audit, "drain", "n3", "--reason", "Xid 79 on GPU1",
                    "--finding", "xid", "--yes").returncode == 0
    held = node_cmd(slurm, audit, "resume", "n3", "--inventory", str(broken), "--yes")
    assert held.returncode == 1, held.stderr
    assert "rigwatch node resume: n3: refused (recorded) — still failing:" in held.stderr
    assert "critical xid (Xid 79) on n3 GPU1" in held.stderr
    assert "n3" in reasons(slurm)  # still drained
    refused = trail(audit)[-1]
    assert (refused["action"], refused["outcome"]) == ("resume", "refused")
    assert any("Xid 79" in s for s in refused["still_failing"])  # type: ignore[union-attr]
    assert refused["command"] == ["scontrol", "update", "nodename=n3", "state=resume"]

    # the override: resumed although the fault holds, recorded with what still failed
    forced = node_cmd(slurm, audit, "resume", "n3", "--inventory", str(broken), "--force",
                      "--reason", "vendor asked for one more run", "--yes")
    assert forced.returncode == 0, forced.stderr
    assert "n3" not in reasons(slurm)
    done = trail(audit)[-1]
    assert (done["outcome"], done["override"], done["reason"]) == (
        "done", True, "vendor asked for one more run")
    assert any("Xid 79" in s for s in done["still_failing"])  # type: ignore[union-attr]

    # repaired (the machine restarted, the GPU answers): the same resume goes through
    assert node_cmd(slurm, audit, "drain", "n3", "--reason", "again", "--yes").returncode == 0
    fixed = inventory(tmp_path, {}, "fixed.yaml")
    ok = node_cmd(slurm, audit, "resume", "n3", "--inventory", str(fixed), "--yes")
    assert ok.returncode == 0, ok.stderr
    assert "the drain's finding is gone and nothing critical holds" in ok.stderr
    assert "n3" not in reasons(slurm)
    last = trail(audit)[-1]
    assert (last["outcome"], last["override"], last["verified"]["state"].rstrip("*")) == (  # type: ignore[index]
        "done", False, "idle")


def test_without_yes_it_asks_on_the_terminal_and_refuses_without_one(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    audit = tmp_path / "trail.jsonl"
    out = node_cmd(slurm, audit, "drain", "n1", "--reason", "fan", stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "no terminal to confirm on: give --yes" in out.stderr
    assert reasons(slurm) == {}
    assert [(x["outcome"], x["why"]) for x in trail(audit)] == [
        ("refused", "not confirmed: no terminal to ask on, and no --yes")]

    def on_a_terminal(typed: str) -> subprocess.CompletedProcess[str]:
        leader, follower = pty.openpty()
        try:
            os.write(leader, typed.encode() + b"\n")
            return node_cmd(slurm, audit, "drain", "n1", "--reason", "fan", stdin=follower)
        finally:
            os.close(leader)
            os.close(follower)

    wrong = on_a_terminal("n2")
    assert wrong.returncode == 1 and "Type the node's name (n1) to drain it:" in wrong.stderr
    assert reasons(slurm) == {}
    assert trail(audit)[-1]["why"] == "not confirmed: typed 'n2'"
    right = on_a_terminal("n1")
    assert right.returncode == 0, right.stderr
    assert reasons(slurm) == {"n1": ("rigwatch: fan", "root")}


def _dead_controller_conf(cluster: SlurmCluster, tmp: Path) -> Path:
    """The cluster's config pointing at a port where no controller listens (a stopped
    slurmctld), with a short message timeout so scontrol gives up in a second."""
    conf = tmp / "dead.conf"
    lines = [ln for ln in Path(cluster.env["SLURM_CONF"]).read_text().splitlines()
             if not ln.startswith("SlurmctldPort=")]
    conf.write_text("\n".join([*lines, f"SlurmctldPort={free_port()}", "MessageTimeout=2"])
                    + "\n")
    return conf


def _not_done_line(stderr: str) -> str:
    (line,) = [x for x in stderr.splitlines() if "not done" in x]
    return line


def test_slurms_refusals_are_one_clear_line_each_and_recorded(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    audit = tmp_path / "trail.jsonl"
    unknown = node_cmd(slurm, audit, "drain", "zz9", "--reason", "x", "--yes")
    assert unknown.returncode == 1
    assert "Slurm knows no node 'zz9'" in _not_done_line(unknown.stderr)
    assert "Invalid node name specified" in _not_done_line(unknown.stderr)

    # a user who is not a Slurm operator: the real scontrol, run as uid 1
    bindir, _ = recording_scontrol(tmp_path, as_uid=1)
    denied = node_cmd(slurm, audit, "drain", "n4", "--reason", "x", "--yes", path=bindir)
    assert denied.returncode == 1
    assert "permission denied: Slurm lets only its operators" in _not_done_line(denied.stderr)
    assert reasons(slurm) == {}

    conf = _dead_controller_conf(slurm, tmp_path)
    t0 = time.monotonic()
    down = node_cmd(slurm, audit, "drain", "n4", "--reason", "x", "--yes",
                    env={"SLURM_CONF": str(conf)})
    assert down.returncode == 1
    line = _not_done_line(down.stderr)
    assert "the Slurm controller did not answer: is slurmctld up?" in line
    assert "Unable to contact slurm controller" in line
    assert time.monotonic() - t0 < 60
    failed = [x for x in trail(audit) if x["outcome"] == "failed"]
    assert [x["node"] for x in failed] == ["zz9", "n4", "n4"]
    assert all(x["exit"] == 1 for x in failed)
    assert "permission denied" in str(failed[1]["why"])
    assert "Invalid user id" in str(failed[1]["output"])  # Slurm 22.05's own words


def _ctld_pid(cluster: SlurmCluster) -> int:
    return int((cluster.root / "slurmctld.pid").read_text().strip())


def test_a_controller_that_hangs_times_out_and_a_kill_mid_action_leaves_the_attempt(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    audit = tmp_path / "trail.jsonl"
    ctld = _ctld_pid(slurm)
    os.kill(ctld, signal.SIGSTOP)
    try:
        hung = node_cmd(slurm, audit, "drain", "n4", "--reason", "x", "--yes", "--timeout",
                        "2")
        assert hung.returncode == 1
        assert "the Slurm controller did not answer" in _not_done_line(hung.stderr)
        assert "did not answer within 2 s" in _not_done_line(hung.stderr)
        assert "It may still take the command: sinfo -R tells" in _not_done_line(hung.stderr)
        assert [x["outcome"] for x in trail(audit)] == ["attempted", "failed"]

        env = dict(slurm.env, RIGWATCH_AUDIT=str(audit))
        proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "node", "drain", "n4",
                                 "--reason", "killed mid-action", "--yes", "--timeout", "60"],
                                env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while len(trail(audit)) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # its scontrol is now waiting on the stopped controller
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    finally:
        os.kill(ctld, signal.SIGCONT)
        slurm.run("sinfo")  # answered: what it had queued (those drains) is taken by now
    lines = trail(audit)
    assert [x["outcome"] for x in lines] == ["attempted", "failed", "attempted"]
    assert lines[-1]["reason"] == "rigwatch: killed mid-action"
    shown = node_cmd(slurm, audit, "audit")
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[-1].endswith("(no outcome recorded: interrupted)")
    assert "1 action(s) attempted with no outcome recorded" in shown.stderr


def test_read_only_never_runs_scontrol_update(slurm: SlurmCluster, tmp_path: Path) -> None:
    audit = tmp_path / "trail.jsonl"
    bindir, calls = recording_scontrol(tmp_path)
    inv = inventory(tmp_path, {})
    # the wrapper sees what runs: without read-only, a drain is an update
    assert node_cmd(slurm, audit, "drain", "n1", "--reason", "x", "--yes",
                    path=bindir).returncode == 0
    assert "update nodename=n1 state=drain reason=rigwatch: x" in calls.read_text()
    resume_all(slurm)
    calls.write_text("")
    before = audit.read_text()
    settings = tmp_path / "settings.yaml"
    settings.write_text("read_only: true\n")
    tries = [
        ("drain", "n1", "--reason", "x", "--yes", "--read-only"),
        ("resume", "n1", "--inventory", str(inv), "--yes", "--read-only"),
        ("resume", "n1", "--force", "--reason", "x", "--yes", "--read-only"),
        ("drain", "n1", "--reason", "x", "--yes", "--settings", str(settings)),
        ("resume", "n1", "--yes", "--settings", str(settings)),
    ]
    for args in tries:
        out = node_cmd(slurm, audit, *args, path=bindir)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.strip().count("\n") == 0, out.stderr  # one line
        assert "read-only mode: rigwatch takes no action on nodes" in out.stderr
    on_top = subprocess.run([sys.executable, "-m", "tui.cli", "--read-only", "node", "drain",
                             "n1", "--reason", "x", "--yes"],
                            env=dict(slurm.env, RIGWATCH_AUDIT=str(audit),
                                     PATH=f"{bindir}:{os.environ['PATH']}"),
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert on_top.returncode == 2 and "read-only mode" in on_top.stderr
    assert "update" not in calls.read_text()
    assert reasons(slurm) == {}
    assert audit.read_text() == before  # nothing attempted, nothing recorded


def test_the_audit_prints_the_trail_as_lines_and_json(slurm: SlurmCluster,
                                                      tmp_path: Path) -> None:
    audit = tmp_path / "trail.jsonl"
    assert node_cmd(slurm, audit, "audit").stderr.startswith("no node actions recorded")
    node_cmd(slurm, audit, "drain", "n2", "--reason", "psu", "--yes")
    node_cmd(slurm, audit, "drain", "n1", "--reason", "fan", "--yes")
    text = node_cmd(slurm, audit, "audit", "--node", "n2").stdout.splitlines()
    assert len(text) == 2 and all(" drain n2 " in x for x in text)
    assert text[1].split("  ")[1] == "root" and "DONE" in text[1]
    # Slurm appends * to a state while a node does not answer (slurmd's heartbeat late on a
    # loaded machine): still drained, and shown as Slurm says it
    assert re.search(r'reason "rigwatch: psu"  → drained\*?  — Slurm shows n2 drained\*?',
                     text[1]), text[1]
    js = [json.loads(x) for x in node_cmd(slurm, audit, "audit", "--json").stdout.splitlines()]
    assert [(x["node"], x["outcome"]) for x in js] == [
        ("n2", "attempted"), ("n2", "done"), ("n1", "attempted"), ("n1", "done")]
    assert js[1]["who"]["machine"] == socket.gethostname()
