"""Triage over findings: step order, verdicts, proposals and the cross-host first failure."""

from __future__ import annotations

import dataclasses

from probes.analysis.findings import Finding
from probes.analysis.incident import (
    HostView,
    TriageRecord,
    Verdict,
    count,
    do_now,
    first_failure,
    onset,
    propose_next,
    review,
)
from probes.triage import Severity, Step

T = 1_764_700_000.0  # 2025-12-02 18:26:40 UTC
JOB = {"job": "4242"}
"""Every finding here is of one Slurm job spanning the hosts (``job_ranks.placed`` and the
rank index say so in the console): causal links are made only inside one job."""


def xid79(host: str = "gpu017", at: float = T) -> Finding:
    return Finding(Step.SYSLOG, "xid", Severity.CRITICAL, "Xid 79: GPU has fallen off the bus",
                   host, gpu=3, xid=79, ts=at, source="kernel", extra=JOB)


def watchdog(host: str, at: float, timeout_ms: float | None = 600_000.0) -> Finding:
    extra = dict(JOB) if timeout_ms is None else {**JOB, "timeout_ms": timeout_ms}
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
                     ts=T - 3600, extra=JOB)
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
                        ts=T + 1, extra=JOB)
    other_host_gpu = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "lost", "gpu020", gpu=0,
                             ts=T + 30, extra=JOB)
    other_host_nccl = watchdog("gpu020", T + 601)
    first = first_failure([root, same_host, other_host_gpu, other_host_nccl])
    assert first is not None and first.is_failure and first.finding is root
    # the samples losing GPU3 a second after its Xid is the Xid itself, named once
    assert first.same_event == (same_host,)
    assert set(first.consequences) == {other_host_nccl}


def unreachable(host: str, at: float) -> Finding:
    return Finding(Step.GPU, "host-unreachable", Severity.CRITICAL,
                   "DOWN · ssh: connect to host port 22: No route to host", host, ts=at,
                   extra=JOB)


def test_a_host_down_first_is_the_first_failure_but_explains_no_other_hosts_fault() -> None:
    # gpu009 went down 5 min before gpu017's Xid; the collective hung a second before the Xid
    down = unreachable("gpu009", T - 300)
    first = first_failure([down, xid79("gpu017", T), watchdog("gpu002", T + 599)])
    assert first is not None and first.finding is down
    assert [f.host for f in first.others] == ["gpu017"] and first.consequences == ()
    assert first.headline == "18:21:40 host-unreachable on gpu009; also Xid 79 on gpu017 GPU3"
    assert first.do_now == "check gpu009's power and network (ping, BMC console)"
    assert "Separate faults: Xid 79 on gpu017 GPU3 at 18:26:40" in first.explanation


def test_a_hang_that_began_when_the_host_went_down_is_its_consequence() -> None:
    down = unreachable("gpu009", T)
    first = first_failure([down, xid79("gpu017", T + 3000), watchdog("gpu002", T + 601)])
    assert first is not None and first.finding is down
    assert [f.code for f in first.consequences] == ["nccl-timeout"]
    assert first.headline == "18:26:40 host-unreachable on gpu009, then NCCL timeout on gpu002" \
        "; also Xid 79 on gpu017 GPU3"


def test_one_gpu_lost_is_named_once_with_its_action() -> None:
    lost = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "GPU 3 is missing", "gpu017",
                   gpu=3, ts=T, extra=JOB)
    bus = Finding(Step.SYSLOG, "gpu-fallen-off-bus", Severity.CRITICAL, "fell off", "gpu017",
                  gpu=3, ts=T, extra=JOB)
    other_gpu = Finding(Step.GPU, "gpu-lost", Severity.CRITICAL, "GPU 5", "gpu017", gpu=5,
                        ts=T + 3600, extra=JOB)
    first = first_failure([lost, bus, xid79(), other_gpu, watchdog("gpu002", T + 600)])
    assert first is not None and first.finding.xid == 79
    assert {f.code for f in first.same_event} == {"gpu-lost", "gpu-fallen-off-bus"}
    # GPU5 an hour later is not the same event: a consequence on the same host
    assert [f.gpu for f in first.consequences if f.code == "gpu-lost"] == [5]
    assert first.headline.count("gpu017") == 1
    assert first.do_now == "drain gpu017, reboot it; RMA GPU3 if it recurs"


def test_steps_count_the_same_way_as_the_proposal() -> None:
    found = [xid79(), Finding(Step.SYSLOG, "pcie-aer", Severity.WARNING, "AER", "gpu017", ts=T),
             Finding(Step.SYSLOG, "cpu-thermal", Severity.WARNING, "hot", "gpu018", ts=T)]
    steps = review(found, HOSTS, TriageRecord())
    assert count(steps[1]).text == "3 (1 crit)"
    assert count(steps[0]).text == "none"
    record = TriageRecord()
    record.mark(Step.GPU, Verdict.CLEAR)
    _, why = propose_next(review(found, HOSTS, record))
    assert why.startswith("System log: 3 findings, 1 critical (worst: Xid 79 on gpu017 GPU3)")


def test_gpu_step_says_which_hosts_it_could_not_check() -> None:
    hosts = [*HOSTS[:2], HostView("gpu-c01", False, 0, "not reported by the agent", (),
                                  expected_gpus=8, down="unreachable"),
             HostView("gpu-c02", False, 0, "not reported by the agent", (), down="auth-failed")]
    checked = review([], hosts, TriageRecord())[0].checked
    assert checked[0].startswith("16 GPUs on 2 of 4 hosts")
    assert checked[1] == "nothing on gpu-c01 (unreachable), gpu-c02 (auth-failed)"


def test_gpu_step_says_how_many_samples_a_console_that_fell_behind_skipped() -> None:
    """A collector keeps only each host's newest sample while the console does not read:
    triage says so, worst host first, since those samples were never judged."""
    hosts = [dataclasses.replace(HOSTS[0], skipped_samples=12),
             dataclasses.replace(HOSTS[1], skipped_samples=280)]
    checked = review([], hosts, TriageRecord())[0].checked
    assert checked[-1] == (f"292 samples skipped (the console fell behind; each host's newest "
                           f"kept) on {HOSTS[1].name} (280), {HOSTS[0].name} (12)")
    assert not any("skipped" in c for c in review([], HOSTS, TriageRecord())[0].checked)
    hosts[0] = dataclasses.replace(hosts[0], skipped_lines=40)
    checked = review([], hosts, TriageRecord())[0].checked
    assert checked[-1] == ("40 lines dropped past the collector's bound (log lines first) while "
                           f"the console fell behind, on {HOSTS[0].name}")


def test_do_now_is_one_short_line_for_every_code() -> None:
    from probes.triage import Code

    for code in Code:
        for gpu in (None, 3):
            f = Finding(Step.GPU, code.value, Severity.CRITICAL, "x", "gpu-b02", gpu=gpu,
                        ts=T, action="Drain the node (see the catalog); then reseat the card")
            line = f"Do now: {do_now(f)}"
            assert len(line) <= 78, line
            assert "gpu-b02" in line and "(see" not in line, line
    leak = Finding(Step.GPU, "memory-leak", Severity.WARNING, "grows", "gpu-a02", gpu=3, ts=T)
    first = first_failure([leak])
    assert first is not None and not first.is_failure
    assert first.do_now == "checkpoint the job on gpu-a02 GPU3 before it runs out; find what grows"


def test_nearest_fault_agrees_with_trying_every_fault() -> None:
    import random

    from probes.analysis.first_failure import _nearest_fault

    rng = random.Random(19)
    for _ in range(500):
        times = [float(rng.randrange(0, 50)) for _ in range(rng.randrange(1, 8))]
        faults = sorted((t, i) for i, t in enumerate(times))
        starts = [t for t, _ in faults]
        at, slack = float(rng.randrange(-10, 60)), float(rng.choice((0, 3, 120)))
        eligible = [(t, i) for t, i in faults if t <= at + slack]
        want = min(eligible, key=lambda fi: (abs(fi[0] - at), fi[1]))[1] if eligible else 0
        assert _nearest_fault(faults, starts, at, slack) == want, (times, at, slack)
