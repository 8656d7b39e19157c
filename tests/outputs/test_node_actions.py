"""Node actions without a cluster (issue #39): the incident id, the reason Slurm keeps, the
audit trail's file and lines, the resume gate, the reset plan, Slurm's refusals said plainly,
and the inventory's ``slurm_node:``.

Slurm's refusals are the texts Debian 12's Slurm 22.05 prints (seen on the test cluster of
``tests/support/slurm.py``: ``slurm_update error: Invalid user id`` for a user who is not an
operator, ``Invalid node name specified``, ``Unable to contact slurm controller (connect
failure)``) and ``Access/permission denied`` (scontrol's ``slurm_strerror`` for
ESLURM_ACCESS_DENIED in other releases).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from probes.actions.audit import (
    Actor,
    AuditLog,
    AuditRecord,
    NodeAction,
    Outcome,
    last_drain,
    relevant,
    unfinished,
)
from probes.actions.errors import ActionError, AuditError
from probes.actions.evidence import MAX_REASON_BYTES, Evidence, check_reason, drain_reason
from probes.actions.gate import judge_resume
from probes.actions.nodes import check_node, host_of, node_of
from probes.actions.reset_plan import reset_plan
from probes.actions.slurm_node import NodeState, parse_sinfo, plain_answer
from probes.actions.take import plan_drain, plan_resume
from probes.analysis.findings import Finding
from probes.analysis.first_failure import diagnose
from probes.config.fleet import HostSpec
from probes.config.inventory import InventoryError, load_inventory
from probes.config.slurm_cli import SlurmError
from probes.triage import Code, Severity, Step
from probes.wire.samples import GpuInfo, GpuProcess, GpuSample
from tui.settings import SettingsError, load_settings

T = 1_796_000_000.0


def xid79(host: str = "n3", gpu: int = 1, at: float = T) -> Finding:
    return Finding(Step.SYSLOG, Code.XID, Severity.CRITICAL,
                   "Xid 79 (GPU has fallen off the bus)", host, gpu=gpu, xid=79, ts=at,
                   source="kernel")


# -- the incident id


def test_an_incident_has_one_short_id_that_survives_refreshes_and_tells_incidents_apart() -> None:
    first = diagnose([xid79()]).first
    again = diagnose([xid79(), Finding(Step.NCCL, Code.NCCL_ERROR, Severity.CRITICAL,
                                       "unhandled cuda error", "n3", ts=T + 5)]).first
    other_gpu = diagnose([xid79(gpu=2)]).first
    later = diagnose([xid79(at=T + 3600)]).first
    assert first is not None and again is not None and other_gpu is not None
    assert later is not None
    assert len(first.incident_id) == 8 and int(first.incident_id, 16) >= 0
    assert again.incident_id == first.incident_id  # a consequence does not change it
    assert len({first.incident_id, other_gpu.incident_id, later.incident_id}) == 3
    assert first.to_json()["incident"] == first.incident_id


# -- the reason Slurm keeps


def test_the_reason_names_the_incident_and_the_gpu_by_serial_and_bus() -> None:
    ev = Evidence("xid", "gpu-b02", "3f2a9c1b", 6, 79, "1654116048262", "0000:ba:00.0")
    assert drain_reason(ev) == \
        "rigwatch 3f2a9c1b: Xid 79 on GPU6 serial 1654116048262 (0000:ba:00.0)"
    assert drain_reason(None, "PSU swap") == "rigwatch: PSU swap"
    assert drain_reason(Evidence("gpu-lost"), "GPU 3 gone") == "rigwatch gpu-lost: GPU 3 gone"


def test_a_generated_reason_is_cut_to_what_slurm_keeps_a_typed_one_is_refused() -> None:
    ev = Evidence("cuda-oom", "n3", "abcdef01", 1, None, "x" * 400)
    text = drain_reason(ev)
    assert len(text.encode()) <= MAX_REASON_BYTES and text.endswith("...")
    with pytest.raises(ActionError, match="255"):
        drain_reason(None, "é" * 200)  # 400 bytes
    with pytest.raises(ActionError, match="control character"):
        check_reason("ok\x1b]0;pwned\x07")
    with pytest.raises(ActionError, match="give a reason"):
        check_reason("   ")
    assert check_reason("two\n lines\tjoined") == "two lines joined"


@pytest.mark.parametrize("name", ["n[1-4]", "a,b", "-x", "n3 state=resume", "", "a=b"])
def test_one_node_is_named_never_a_list_an_option_or_an_argument(name: str) -> None:
    with pytest.raises(ActionError):
        check_node(name)
    with pytest.raises(ActionError):
        plan_drain(name, None, None, "x")


def test_the_plan_is_an_argv_the_reason_one_word_of_it() -> None:
    plan = plan_drain("n3", "gpu-b03", Evidence("xid", xid=79, gpu=1), "a b; rm -rf /")
    assert plan.argv == ("scontrol", "update", "nodename=n3", "state=drain",
                         "reason=rigwatch xid: a b; rm -rf /")
    assert "command: scontrol update nodename=n3 state=drain 'reason=rigwatch xid: a b; " \
        "rm -rf /'" in plan.preview()
    assert plan_resume("n3", None).argv == ("scontrol", "update", "nodename=n3",
                                             "state=resume")


# -- Slurm's answers


@pytest.mark.parametrize(("said", "want"), [
    ("scontrol update: slurm_update error: Invalid user id", "permission denied"),
    ("scontrol update: slurm_update error: Access/permission denied", "permission denied"),
    ("scontrol update: slurm_update error: Invalid node name specified", "knows no node 'zz'"),
    ("scontrol update: slurm_update error: Unable to contact slurm controller (connect "
     "failure)", "controller did not answer"),
    ("scontrol update did not answer within 3 s", "controller did not answer"),
    ("scontrol update: slurm_update error: Node state transition not allowed", "Slurm refused"),
])
def test_slurms_refusals_are_one_plain_line(said: str, want: str) -> None:
    line = plain_answer(SlurmError(said), "zz")
    assert want in line and said in line and "\n" not in line


def test_sinfo_is_read_with_the_reason_last() -> None:
    text = ("n2|idle|Unknown|Unknown|none\n"
            "n3|drained|root|2026-12-06T08:32:54|rigwatch 3f2a9c1b: a|b \x1b[31m\n")
    state = parse_sinfo(text, "n3")
    assert state == NodeState("n3", "drained", "rigwatch 3f2a9c1b: a|b \\x1b[31m", "root",
                              "2026-12-06T08:32:54")
    assert state is not None and state.drained
    idle = parse_sinfo(text, "n2")
    assert idle is not None and not idle.drained and idle.reason is None and idle.by is None
    assert parse_sinfo(text, "n9") is None


# -- the audit trail


def _rec(outcome: Outcome, action: NodeAction = NodeAction.DRAIN, node: str = "n3",
         aid: str = "a1", when: float = T, incident: str | None = "3f2a9c1b") -> AuditRecord:
    ev = Evidence("xid", "n3", incident, 1, 79)
    return AuditRecord(when, aid, outcome, action, node, Actor("root", 0, "alice", "bastion"),
                       "rigwatch 3f2a9c1b: Xid 79 on GPU1", node, ev,
                       ("scontrol", "update", "nodename=n3"))


def test_the_trail_is_0600_in_a_0700_directory_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        log = AuditLog(tmp_path / "data" / "audit.jsonl")
        log.append(_rec(Outcome.ATTEMPTED))
    finally:
        os.umask(old)
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700
    log.path.chmod(0o644)  # loosened by hand: put back on the next append
    log.append(_rec(Outcome.DONE))
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    lines = log.path.read_text().splitlines()
    assert [json.loads(x)["outcome"] for x in lines] == ["attempted", "done"]
    first = json.loads(lines[0])
    assert first["who"] == {"user": "root", "uid": 0, "sudo_user": "alice", "machine": "bastion"}
    assert first["evidence"]["incident"] == "3f2a9c1b" and first["evidence"]["xid"] == 79
    assert first["when"].endswith("Z") and first["command"][0] == "scontrol"


def test_the_trail_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "audit.jsonl").symlink_to(target)
    with pytest.raises(AuditError, match="symlink"):
        AuditLog(tmp_path / "audit.jsonl").append(_rec(Outcome.ATTEMPTED))
    assert target.read_text() == ""


def test_a_trail_someone_else_owns_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file away")
    path = tmp_path / "audit.jsonl"
    path.write_text("")
    os.chown(path, 1, 1)
    with pytest.raises(AuditError, match="belongs to uid 1"):
        AuditLog(path).append(_rec(Outcome.ATTEMPTED))


def test_a_damaged_line_is_named_and_the_rest_is_read(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(_rec(Outcome.ATTEMPTED))
    with open(log.path, "a") as fh:
        fh.write("{not json\n")
        fh.write(json.dumps({"v": 1, "ts": T, "outcome": "exploded", "action": "drain"}) + "\n")
        fh.write('{"v": 1, "ts": 1, "outcome": "done", "action": "drain", "node": '
                 '"n\\u001b[2Jx", "who": {}}\n')
    items = list(log.records())
    assert isinstance(items[0], AuditRecord)
    assert isinstance(items[1], str) and items[1].startswith(f"{log.path}:2: not an audit")
    assert isinstance(items[2], str) and ":3:" in items[2]
    last = items[3]
    assert isinstance(last, AuditRecord) and last.node == "n\\x1b[2Jx"


def test_the_trail_tells_the_drain_to_undo_and_the_interrupted_actions() -> None:
    records = [_rec(Outcome.ATTEMPTED, aid="a"), _rec(Outcome.DONE, aid="a"),
               _rec(Outcome.ATTEMPTED, NodeAction.RESUME, aid="b"),
               _rec(Outcome.REFUSED, NodeAction.RESUME, aid="c")]
    drain = last_drain(records, "n3")
    assert drain is not None and drain.action_id == "a"
    assert unfinished(records) == {"b"}
    resumed = [*records, _rec(Outcome.DONE, NodeAction.RESUME, aid="d")]
    assert last_drain(resumed, "n3") is None
    assert last_drain(records, "n4") is None


def test_a_report_lists_the_actions_of_its_incidents_and_hosts() -> None:
    mine = _rec(Outcome.DONE, when=T + 10)
    old = _rec(Outcome.DONE, when=T - 86400, incident=None)
    elsewhere = _rec(Outcome.DONE, node="n7", incident="ffffffff")
    assert relevant([mine, old, elsewhere], ["3f2a9c1b"], ["n3"], since=T) == [mine]
    assert relevant([old], [], ["n3"], since=T) == []


# -- the resume gate


def test_resume_is_refused_while_the_drains_finding_or_anything_critical_holds() -> None:
    cause = Evidence("xid", "n3", "3f2a9c1b", 1, 79)
    warm = Finding(Step.GPU, "gpu-hot", Severity.WARNING, "GPU1 hot", "n3", gpu=1, ts=T)
    held = judge_resume([xid79(), warm], cause, host="n3", read=True, judged="read now")
    assert not held.allowed
    assert [f.code for f in held.holding] == ["xid"]
    assert "critical xid (Xid 79) on n3 GPU1" in held.still_failing()[0]
    other = Finding(Step.GPU, "ecc-uncorrectable", Severity.CRITICAL, "DBE", "n3", gpu=4, ts=T)
    assert not judge_resume([other], cause, host="n3", read=True).allowed
    assert judge_resume([warm], cause, host="n3", read=True).allowed
    same_code_as_warning = Finding(Step.GPU, "gpu-hot", Severity.WARNING, "hot", "n3", gpu=1)
    assert not judge_resume([same_code_as_warning], Evidence("gpu-hot", gpu=1), host="n3",
                            read=True).allowed
    unread = judge_resume([], cause, host="n3", read=False, failure="connection refused")
    assert not unread.allowed
    assert unread.still_failing() == ("n3 could not be read now: connection refused",)


# -- the reset plan


def test_a_lost_gpu_gets_a_reset_plan_with_its_preconditions_never_a_command_run() -> None:
    ev = Evidence("xid", "n3", "3f2a9c1b", 1, 79, "1654116048262", "0000:2a:00.0")
    info = GpuInfo(1, "GPU-x", "0000:2a:00.0", "H100", 81559.0, persistence_mode=True,
                   mig_mode=False)
    gpu = GpuSample(index=1, uuid=None, processes=(GpuProcess(4242, "python", "bob", 70000.0),))
    plan = reset_plan(ev, "n3", info, gpu, drained=True)
    assert plan is not None
    status = {p.need.split(" (")[0].split(",")[0]: p.status for p in plan.preconditions}
    assert status == {"node n3 drained first": "met", "no process uses the GPU": "not met",
                      "persistence mode off": "not met", "not in MIG mode": "met",
                      "no daemon holds the device: DCGM": "unknown"}
    assert plan.command == "nvidia-smi --gpu-reset -i 0000:2a:00.0"
    text = "\n".join(plan.lines())
    assert "rigwatch never runs it" in text and "pid 4242" in text and "RESTART_BM" in text
    assert reset_plan(Evidence("cuda-oom", gpu=1), "n3") is None
    unknown = reset_plan(Evidence("gpu-lost", "n3", gpu=2), "n3")
    assert unknown is not None and {p.status for p in unknown.preconditions} == {"unknown"}


# -- mapping hosts to nodes


def test_hosts_map_to_nodes_by_name_or_slurm_node(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - name: gpu-b03\n    slurm_node: n3\n  - name: n4\n"
                   "  - name: n3\n    slurm_node: n9\n")
    specs = load_inventory(inv).hosts
    assert [node_of(s) for s in specs] == ["n3", "n4", "n9"]
    assert getattr(host_of("n3", specs), "name", None) == "gpu-b03"
    assert getattr(host_of("n4", specs), "name", None) == "n4"
    assert getattr(host_of("n9", specs), "name", None) == "n3"
    assert host_of("n5", specs) is None
    assert node_of(HostSpec("n1")) == "n1"


def test_one_slurm_node_for_a_range_of_hosts_is_refused(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("defaults:\n  slurm_node: n1\nhosts:\n  - name: gpu[1-4]\n"
                   "  - name: x\n    slurm_node: 'n1 state=resume'\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(inv)
    text = str(err.value)
    assert "'slurm_node' is ambiguous for the host range 'gpu[1-4]'" in text
    assert "one Slurm node name" in text


def test_read_only_is_a_top_level_setting(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("read_only: true\nalerts:\n  bell: false\n")
    assert load_settings(path).read_only
    path.write_text("read_only: maybe\n")
    with pytest.raises(SettingsError, match="read_only"):
        load_settings(path)
    path.write_text("alerts:\n  bell: false\n")
    assert not load_settings(path).read_only


def test_who_is_the_os_user_not_what_the_environment_claims(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    for var in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.setenv(var, "mallory")
    monkeypatch.setenv("SUDO_USER", "alice\x1b[2J")
    me = Actor.here()
    assert me.user == pwd.getpwuid(os.getuid()).pw_name and me.uid == os.getuid()
    assert me.sudo_user == "alice\\x1b[2J"  # as sudo set it, cleaned
    assert Actor.here({}).sudo_user is None


@pytest.mark.parametrize("value", ["0", "-1", "nan", "abc", "7200"])
def test_a_timeout_must_be_a_sensible_number_of_seconds(value: str,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    from tui.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["node", "drain", "n1", "--reason", "x", "--yes", "--timeout", value])
    assert stop.value.code == 2
    assert "--timeout" in capsys.readouterr().err
