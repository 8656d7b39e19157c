"""Drain and resume from the console (issue #39): ``D`` and ``U`` on triage, the host screen
and the job view; the preview, the typed confirmation, Slurm's own ``sinfo -R`` afterwards,
a resume refused while the fault holds, an override, the report's actions, and read-only mode.

The Slurm is real (``tests/support/slurm.py``, nodes ``n1`` … ``n4``) and so are the agents
(simulated 8-GPU hosts, ``n3`` with GPU1 lost to an Xid 79 from the start).  Every ``scontrol``
call goes through a wrapper on PATH that records it, so a test can say what ran.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from probes.actions.audit import AuditRecord, NodeAction, Outcome
from probes.actions.evidence import Evidence, drain_reason
from probes.config.fleet import HostSpec
from probes.config.inventory import load_inventory
from probes.sources.agents import AgentFleetBackend
from tests.support import node_actions
from tests.support.node_actions import (
    inventory,
    reasons,
    recording_scontrol,
    resume_all,
    trail,
)
from tests.support.slurm import SlurmCluster
from tests.support.tui_fakes import T0, FakeBackend, FrozenClock, sim_items, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.help import HelpScreen
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.node_action import NodeActionScreen
from tui.screens.triage import TriageScreen

cluster = node_actions.cluster
"""The fixture: the module's four-node Slurm, started once (``tests/support/node_actions.py``)."""


@pytest.fixture
def slurm(cluster: SlurmCluster, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SlurmCluster, Path]]:
    """The cluster, every node idle, this process's scontrol calls recorded: (cluster, log)."""
    resume_all(cluster)
    bindir, calls = recording_scontrol(tmp_path)
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    yield cluster, calls
    resume_all(cluster)


def text(screen: NodeActionScreen, selector: str) -> str:
    content = screen.query_one(selector, Static).content
    return getattr(content, "plain", str(content))


def live_app(tmp_path: Path, scenarios: dict[str, str], read_only: bool = False
             ) -> RigwatchApp:
    specs = list(load_inventory(inventory(tmp_path, scenarios)).hosts)
    app = make_app(AgentFleetBackend(specs), ConsoleOptions(
        title="inventory.yaml", audit_path=tmp_path / "audit.jsonl", read_only=read_only))
    app.triage_records.clear()
    app.reports_dir = tmp_path / "reports"
    return app


async def test_drain_from_triage_is_previewed_confirmed_by_name_and_shown_by_sinfo(
        slurm: tuple[SlurmCluster, Path], tmp_path: Path) -> None:
    cluster, calls = slurm
    app = live_app(tmp_path, {"n3": "xid79:1@0"})
    async with app.run_test(size=(160, 48)) as pilot:
        def xid_first() -> bool:
            first = app.fleet.diagnosis().first
            return first is not None and first.finding.xid == 79 and first.finding.host == "n3"

        await wait_until(pilot, xid_first, timeout_s=60)
        first = app.fleet.diagnosis().first
        assert first is not None and first.incident_id
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, NodeActionScreen)
                         and app.screen.stage == "confirm")
        box = app.screen
        assert isinstance(box, NodeActionScreen)
        facts = app.fleet.hosts["n3"].hello
        assert facts is not None
        reason = drain_reason(Evidence.of_incident(first, facts.facts))
        assert reason.startswith(f"rigwatch {first.incident_id}: Xid 79 on GPU1 serial ")
        assert reason.endswith("(0000:2a:00.0)")
        preview = text(box, "#node-preview")
        assert f"reason Slurm keeps (sinfo -R): {reason}" in preview
        assert "command: scontrol update nodename=n3 state=drain 'reason=rigwatch " in preview
        await wait_until(pilot, lambda: text(box, "#node-now").startswith("now: n3 idle"))
        plan = text(box, "#node-plan")
        assert "GPU reset of n3 GPU1: a plan — rigwatch never runs it" in plan
        assert "[met] node n3 drained first" not in plan  # not yet drained
        assert "nvidia-smi --gpu-reset -i 0000:2a:00.0" in plan

        await pilot.press("n", "4", "enter")  # the wrong name: nothing runs
        await pilot.pause(0.2)
        assert box.stage == "confirm" and "that is not n3" in text(box, "#node-status")
        assert "update" not in calls.read_text()
        await pilot.press("n", "3", "enter")
        await wait_until(pilot, lambda: box.stage == "finished", timeout_s=30)
        assert text(box, "#node-status").startswith("done: n3 drained — Slurm shows n3 drained")
        assert reasons(cluster) == {"n3": (reason, "root")}
        assert f"update nodename=n3 state=drain reason={reason}" in calls.read_text()
        got = trail(app.audit_path)  # type: ignore[arg-type]
        assert [x["outcome"] for x in got] == ["attempted", "done"]
        assert got[1]["evidence"]["incident"] == first.incident_id  # type: ignore[index]
        assert got[1]["evidence"]["serial"]  # type: ignore[index]
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))

        # U: the host is read again; its GPU is still lost: refused, recorded, nothing run
        await pilot.press("U")
        await wait_until(pilot, lambda: isinstance(app.screen, NodeActionScreen)
                         and app.screen.stage == "override", timeout_s=60)
        box = app.screen
        assert isinstance(box, NodeActionScreen)
        status = text(box, "#node-status")
        assert status.startswith("Resume refused (recorded as refused); still failing:")
        assert "critical xid (Xid 79) on n3 GPU1" in status
        assert "state=resume" not in calls.read_text()
        refused = trail(app.audit_path)[-1]  # type: ignore[arg-type]
        assert (refused["action"], refused["outcome"]) == ("resume", "refused")
        assert refused["evidence"]["incident"] == first.incident_id  # type: ignore[index]

        # an override: a typed reason, then the name
        await pilot.press(*"vendor swap tomorrow", "enter")
        await wait_until(pilot, lambda: box.stage == "confirm")
        assert "OVERRIDE (recorded): vendor swap tomorrow" in text(box, "#node-preview")
        await pilot.press("n", "3", "enter")
        await wait_until(pilot, lambda: box.stage == "finished", timeout_s=30)
        assert text(box, "#node-status").startswith("done: n3 resumed")
        assert "n3" not in reasons(cluster)
        done = trail(app.audit_path)[-1]  # type: ignore[arg-type]
        assert (done["outcome"], done["override"], done["reason"]) == (
            "done", True, "vendor swap tomorrow")
        await pilot.press("escape")

        # the report lists what was done about the incident
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        screen.action_report()
        assert screen.last_report is not None
        doc = json.loads(screen.last_report.with_suffix(".json").read_text())
        assert [(a["action"], a["outcome"]) for a in doc["actions"]] == [
            ("drain", "attempted"), ("drain", "done"), ("resume", "refused"),
            ("resume", "attempted"), ("resume", "done")]
        md = screen.last_report.read_text()
        assert "## Actions taken" in md and "resume n3  DONE (override)" in md
        await pilot.press("escape")
        await pilot.press("q")


async def test_read_only_console_offers_no_action_and_runs_no_update(
        slurm: tuple[SlurmCluster, Path], tmp_path: Path) -> None:
    cluster, calls = slurm
    app = live_app(tmp_path, {"n3": "xid79:1@0"}, read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: app.fleet.diagnosis().first is not None, timeout_s=60)
        app.open_host("n3")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        keys = {b.binding.action for b in app.screen.active_bindings.values()}
        assert "node_drain" not in keys and "node_resume" not in keys
        assert app.check_action("node_drain", ()) is False
        for key in ("D", "U"):
            await pilot.press(key)
            await pilot.pause(0.3)
            assert isinstance(app.screen, HostScreen)
        app.run_command("drain n3")
        app.run_command("resume")
        await pilot.pause(0.3)
        assert isinstance(app.screen, HostScreen)
        app.action_help()
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_text = app.screen.text()  # type: ignore[attr-defined]
        assert "drain" not in help_text.lower() and "resume this node" not in help_text
        await pilot.press("escape")
        from tui.palette import palette_lines

        assert not [line for line, _ in palette_lines(app) if "drain" in line or "resume" in line]
        await pilot.press("q")
    assert "update" not in calls.read_text()
    assert reasons(cluster) == {}
    assert not (tmp_path / "audit.jsonl").exists()


async def test_help_and_palette_offer_the_actions_when_not_read_only() -> None:
    backend = FakeBackend([HostSpec(name="gpu-j01")], [])
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock(T0))
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_help()
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_text = app.screen.text()  # type: ignore[attr-defined]
        assert "drain this node in Slurm" in help_text and "resume this node" in help_text
        await pilot.press("escape")
        from tui.palette import palette_lines

        lines = [line for line, _ in palette_lines(app)]
        assert ":drain" in lines and ":resume" in lines
        # on the fleet screen no node is the subject: the keys are not offered there
        assert app.check_action("node_drain", ()) is False
        app.run_command("drain")
        await pilot.pause(0.2)
        assert app.notice is not None and "open a host, a job" in app.notice.text
        await pilot.press("q")


async def test_the_job_views_failing_rank_offers_its_node_by_slurm_node(
        tmp_path: Path) -> None:
    """``gpu-j01`` is Slurm node ``n3`` (``slurm_node:``) and runs job 48201, whose GPU6
    falls off the bus at 600 s: the job view's D drains n3 on that evidence; Esc leaves
    nothing recorded."""
    items = [("gpu-j01", i) for i in sim_items("gpu-j01", "xid79:6@600", seed=1, minutes=20)]
    spec = HostSpec(name="gpu-j01", slurm_node="n3", expect_gpus=8)
    backend = FakeBackend([spec], items)
    app = make_app(backend, ConsoleOptions(audit_path=tmp_path / "audit.jsonl"),
                   clock=FrozenClock(T0 + 20 * 60 + 1))
    async with app.run_test(size=(160, 48)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: app.fleet.diagnosis().of_job("48201") is not None)
        app.run_command("job 48201")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen)
                         and app.screen.picture is not None
                         and app.screen.picture.first is not None)
        job = app.screen
        assert isinstance(job, JobScreen) and job.picture is not None
        first = job.picture.first
        assert first is not None and first.culprit is not None
        assert first.culprit.host == "gpu-j01"
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, NodeActionScreen))
        box = app.screen
        assert isinstance(box, NodeActionScreen)
        assert (box.target.node, box.target.host) == ("n3", "gpu-j01")
        preview = text(box, "#node-preview")
        assert text(box, ".panel-title") == "Drain Slurm node n3 (host gpu-j01)"
        assert f"rigwatch {first.incident_id}: Xid 79 on GPU6" in preview
        assert "GPU reset of gpu-j01 GPU6" in text(box, "#node-plan")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen))

        # the host screen offers the same node, on the host's own incident
        app.open_host("gpu-j01")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, NodeActionScreen))
        assert isinstance(app.screen, NodeActionScreen)
        assert app.screen.target.node == "n3"
        ev = app.screen.target.evidence
        assert ev is not None and (ev.xid, ev.gpu) == (79, 6)
        await pilot.press("escape")
        await pilot.press("q")
    assert not (tmp_path / "audit.jsonl").exists()  # nothing confirmed, nothing recorded


def test_a_record_line_says_who_what_and_how_it_ended() -> None:
    from probes.actions.audit import Actor

    rec = AuditRecord(T0, "a", Outcome.DONE, NodeAction.RESUME, "n3",
                      Actor("root", 0, "alice"), "vendor ok", override=True)
    assert rec.line() == ("2023-11-14T22:13:20Z  root (sudo: alice)  resume n3  DONE "
                          '(override)  reason "vendor ok"')
