"""Triage over findings: step order, verdicts, proposals and the cross-host first failure."""

from __future__ import annotations

from probes.analysis.findings import Finding
from probes.analysis.incident import (
    HostView,
    TriageRecord,
    Verdict,
    first_failure,
    onset,
    propose_next,
    review,
)
from probes.triage import Severity, Step

T = 1_764_700_000.0  # 2025-12-02 18:26:40 UTC


def xid79(host: str = "gpu017", at: float = T) -> Finding:
    return Finding(Step.SYSLOG, "xid", Severity.CRITICAL, "Xid 79: GPU has fallen off the bus",
                   host, gpu=3, xid=79, ts=at, source="kernel")


def watchdog(host: str, at: float, timeout_ms: float | None = 600_000.0) -> Finding:
    extra = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
    return Finding(Step.NCCL, "nccl-timeout", Severity.CRITICAL, "collective timed out", host,
                   ts=at, extra=extra, source="job:/var/log/train.log")


HOSTS = [HostView(f"gpu{i:03d}", True, 8, "via journalctl", ("/var/log/train*.log",))
         for i in range(64)]


def test_xid_before_fleet_wide_timeouts_is_the_first_failure() -> None:
    timeouts = [watchdog(f"gpu{i:03d}", T + 600 + i) for i in range(63) if i != 17]
    first = first_failure([*timeouts, xid79()])
    assert first is not None
    assert first.finding.code == "xid" and first.finding.host == "gpu017"
    assert len(first.consequences) == 62
    assert first.explanation.startswith("Xid 79 on gpu017 GPU3 at 18:26:40; NCCL watchdog "
                                        "timeouts on 62 hosts from 18:36:40 are its consequence")


def test_hardware_fault_just_after_the_hang_began_is_still_the_cause() -> None:
    # the collective was issued at T+1, the GPU died at T+5, the watchdog fired at T+601
    first = first_failure([watchdog("gpu002", T + 601), xid79("gpu017", T + 5)])
    assert first is not None and first.finding.code == "xid"
    assert onset(watchdog("gpu002", T + 601)) == T + 1


def test_timeout_long_before_any_hardware_fault_points_at_the_job() -> None:
    first = first_failure([watchdog("gpu002", T + 601), xid79("gpu017", T + 3600)])
    assert first is not None and first.finding.code == "nccl-timeout"
    assert "GPU and kernel faults came later" in first.explanation
    assert "read gpu002's job log" in first.explanation


def test_timeout_without_its_own_timeout_uses_the_torch_default() -> None:
    assert onset(watchdog("h", T, timeout_ms=None)) == T - 600.0


def test_info_and_layout_findings_are_never_a_first_failure() -> None:
    layout = Finding(Step.GPU, "topology-cross-numa", Severity.WARNING, "SYS", "h", ts=T - 100)
    info = Finding(Step.GPU, "pcie-link-downgraded", Severity.INFO, "Gen4", "h", ts=T - 50)
    assert first_failure([layout, info]) is None
    first = first_failure([layout, info, xid79()])
    assert first is not None and first.finding.code == "xid" and first.consequences == ()


def test_steps_are_in_fixed_order_worst_then_earliest_first() -> None:
    late = Finding(Step.GPU, "clocks-throttled", Severity.WARNING, "hot", "a", ts=T + 10)
    early = Finding(Step.GPU, "clocks-throttled", Severity.WARNING, "hot", "b", ts=T)
    lost = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "gone", "c", ts=T + 20)
    steps = review([watchdog("a", T), late, early, lost], HOSTS[:3], TriageRecord())
    assert [s.step for s in steps] == [Step.GPU, Step.SYSLOG, Step.NCCL, Step.MODEL]
    assert [f.host for f in steps[0].findings] == ["c", "b", "a"]
    assert steps[0].worst is Severity.CRITICAL and steps[1].worst is None
    assert "24 GPUs on 3 of 3 hosts" in steps[0].checked[0]
    assert steps[1].checked == ("kernel log via journalctl: gpu000, gpu001, gpu002",)


def test_checked_says_when_no_job_logs_are_followed() -> None:
    hosts = [HostView("a", True, 8, "denied: journalctl refused", ())]
    steps = review([], hosts, TriageRecord())
    assert "no job logs are followed" in steps[2].checked[0]
    assert steps[1].checked == ("kernel log denied: journalctl refused: a",)


def test_proposal_follows_the_order_and_stops_at_a_suspect_step() -> None:
    record = TriageRecord()
    findings = [xid79(), watchdog("gpu002", T + 600)]
    step, why = propose_next(review(findings, HOSTS, record))
    assert step is Step.GPU and "nothing above info" in why
    record.mark(Step.GPU, Verdict.CLEAR)
    step, why = propose_next(review(findings, HOSTS, record))
    assert step is Step.SYSLOG and "1 finding" in why and "Xid 79" in why
    record.mark(Step.SYSLOG, Verdict.SUSPECT)
    step, why = propose_next(review(findings, HOSTS, record))
    assert step is Step.SYSLOG and "suspect" in why and "consequences" in why
    record.mark(Step.SYSLOG, Verdict.SUSPECT)  # marking again reopens
    assert record.verdict(Step.SYSLOG) is Verdict.OPEN
    for s in (Step.SYSLOG, Step.NCCL, Step.MODEL):
        record.mark(s, Verdict.CLEAR)
    assert record.verdict(Step.GPU) is Verdict.CLEAR
    step, why = propose_next(review(findings, HOSTS, record))
    assert step is None and "every step is marked clear" in why


def test_notes_travel_with_their_step() -> None:
    record = TriageRecord()
    record.notes[Step.NCCL] = "IB switch port 12 flapped at 03:10"
    steps = review([], HOSTS[:1], record)
    assert steps[2].note == "IB switch port 12 flapped at 03:10" and steps[0].note == ""


def test_chronic_warnings_do_not_outrank_a_critical_fault() -> None:
    narrow = Finding(Step.GPU, "pcie-link-downgraded", Severity.WARNING, "x8", "gpu001",
                     ts=T - 3600)
    first = first_failure([narrow, xid79(), watchdog("gpu002", T + 600)])
    assert first is not None and first.finding.code == "xid"
    assert [f.code for f in first.consequences] == ["nccl-timeout"]


def _warn(code: str, host: str, at: float, gpu: int | None = None) -> Finding:
    return Finding(Step.GPU, code, Severity.WARNING, code, host, gpu=gpu, ts=at)


def test_warnings_alone_have_an_earliest_but_explain_nothing() -> None:
    link = _warn("pcie-link-downgraded", "gpu-a04", T, gpu=2)
    disk = _warn("disk-saturated", "gpu-b01", T + 5)
    first = first_failure([disk, link])
    assert first is not None and not first.is_failure
    assert first.finding is link and first.consequences == ()
    assert first.explanation == ("pcie-link-downgraded on gpu-a04 GPU2 at 18:26:40; 1 more "
                                 "warning on gpu-b01; nothing critical so far.")


def test_a_gpu_fault_does_not_explain_another_hosts_gpu_state() -> None:
    root = xid79("gpu017", T)
    same_host = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "lost", "gpu017", gpu=3,
                        ts=T + 1)
    other_host_gpu = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "lost", "gpu020", gpu=0,
                             ts=T + 30)
    other_host_nccl = watchdog("gpu020", T + 601)
    first = first_failure([root, same_host, other_host_gpu, other_host_nccl])
    assert first is not None and first.is_failure and first.finding is root
    # the samples losing GPU3 a second after its Xid is the Xid itself, named once
    assert first.same_event == (same_host,)
    assert set(first.consequences) == {other_host_nccl}
