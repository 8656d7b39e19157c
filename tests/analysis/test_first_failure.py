"""The true first failure (issue #34): event time, failure domains, collective semantics, and
one answer on every surface.

Log shapes after public outputs: torch's NCCL watchdog line and c10 glog header
(pytorch/pytorch ``ProcessGroupNCCL.cpp``, as quoted in pytorch/pytorch#75087 and
vllm-project/vllm#28028), a CUDA OOM traceback under ``[rankN]:`` marks (same threads),
NCCL's ``Init COMPLETE`` line (NVIDIA/nccl#1814), ``DistBackendError … unhandled cuda error`` /
``ncclUnhandledCudaError`` / ``Last error:`` / ``Cuda failure N '…'`` (NVIDIA/nccl#1410, there
with failure 1 'invalid argument'; 2 is cudaErrorMemoryAllocation, 'out of memory'), the
libibverbs fallback (``NCCL WARN Failed to open libibverbs.so[.1]`` then ``Using network
Socket`` and the ranks' init, horovod/horovod#685 and NVIDIA/nccl#1653),
syslog, journalctl ``short-full``, ``dmesg -T``, kernel ``[sec.usec]``, Python logging,
kubelet's CRI log lines (``<RFC3339Nano> stdout F``) and vLLM's logger.
"""

from __future__ import annotations

import calendar
import time
from pathlib import Path

import pytest

from probes.analysis.findings import Finding
from probes.analysis.first_failure import diagnose
from probes.analysis.job_ranks import HostRanks, RankIndex
from probes.analysis.job_watch import JobWatch
from probes.config.fleet import HostSpec
from probes.explain.stream import explain_stream, open_input
from probes.fleet_state import FleetState
from probes.outputs.explain_first import explain_diagnosis, first_line
from probes.rules.logrules.lines import LogLine, peel
from probes.rules.logrules.live import LineClock, event_times
from probes.rules.logrules.stamps import HostTime, line_time
from probes.triage import Code, OnsetClock, Severity, Step
from probes.wire.events import Connected
from probes.wire.samples import LogEvent
from tests.support.tui_fakes import T0, hello, sample

READ = calendar.timegm((2026, 12, 6, 5, 50, 0, 0, 0, 0))
"""When the lines below were read: 05:50:00 UTC on 2026-12-06."""


def _at(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: float = 0.0) -> float:
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac


@pytest.mark.parametrize(("line", "want"), [
    # torch/c10 glog header after the rank mark: month-day, local time (the host's zone)
    ("[rank0]:[E1206 05:40:12.101202 1234 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog",
     _at(2026, 12, 6, 5, 40, 12, 0.101202) - 3600),
    ("Dec  6 05:40:12 gpu-a01 kernel: NVRM: Xid (PCI:0000:ba:00): 79", _at(2026, 12, 6, 4, 40, 12)),
    ("2026-12-06T05:40:12.5+02:00 gpu-a01 kernel: x", _at(2026, 12, 6, 3, 40, 12, 0.5)),
    ("2026-12-06 05:40:12,552 - INFO - step 10", _at(2026, 12, 6, 4, 40, 12, 0.552)),
    ("[Sun Dec  6 05:40:12 2026] NVRM: Xid", _at(2026, 12, 6, 4, 40, 12)),
    ("Sun 2026-12-06 05:40:12 UTC gpu-a01 kernel: x", _at(2026, 12, 6, 5, 40, 12)),
    ("[ 1000.250000] NVRM: Xid", 1_700_000_000.0 + 1000.25),
    ("2026-12-06T05:40:12.123456789Z stdout F [rank1]: torch.OutOfMemoryError",
     _at(2026, 12, 6, 5, 40, 12, 0.123456789)),
    ("ERROR 12-06 05:40:12 [multiproc_executor.py:527] WorkerProc failed",
     _at(2026, 12, 6, 4, 40, 12)),
])
def test_a_lines_own_time_in_the_hosts_zone(line: str, want: float) -> None:
    zone = HostTime(utc_offset_s=3600.0, boot_time=1_700_000_000.0)  # UTC+1
    text, _, _, stamp = peel(line)
    got = line_time(stamp, text, zone, READ)
    assert got is not None and abs(got - want) < 1e-3, (line, got, want)


def test_a_stamp_without_a_year_is_the_nearest_one_before_the_read() -> None:
    jan = calendar.timegm((2027, 1, 1, 0, 5, 0, 0, 0, 0))
    got = line_time("Dec 31 23:59:00", "x", HostTime(), jan)
    assert got == _at(2026, 12, 31, 23, 59, 0)


def _lines(texts: list[str]) -> list[LogLine]:
    out = []
    for i, raw in enumerate(texts, 1):
        text, host, rank, stamp = peel(raw)
        out.append(LogLine(i, raw, text, host, rank, stamp))
    return out


def test_line_order_is_time_order_and_a_log_read_at_once_keeps_it() -> None:
    lines = _lines([
        "1: [rank1]: Traceback (most recent call last):",
        "1: [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "0: [rank0]:[E1206 05:40:12.000000 7 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog",
        "2: [rank2]:[E1206 05:39:00.000000 7 ProcessGroupNCCL.cpp:1182] [Rank 2] Watchdog",
        "0: [rank0]: an unstamped line after it",
    ])
    timed = event_times([(line, READ) for line in lines], LineClock(), None)
    ts = [t for _, t, _ in timed]
    clocks = [c for _, _, c in timed]
    stamped = _at(2026, 12, 6, 5, 40, 12)
    # nothing above the first stamp: the unstamped lines take the first stamp below them
    assert ts[:3] == [stamped, stamped, stamped]
    assert clocks[:3] == [OnsetClock.ORDER, OnsetClock.ORDER, OnsetClock.LINE]
    # a stamp earlier than the line above it never moves a line before it
    assert ts[3] == stamped and clocks[3] is OnsetClock.ORDER
    assert ts[4] == stamped and ts == sorted(ts)


def test_stamps_are_read_on_the_hosts_clock_and_its_skew_taken_off() -> None:
    line = _lines(["[rank0]:[E1206 05:39:12.000000 7 ProcessGroupNCCL.cpp:1182] x"])[0]
    # the host runs 600 s behind; its line was read at console time READ (05:50:00)
    (_, t, clock), = event_times([(line, READ)], LineClock(HostTime(), -600.0), None)
    assert t == _at(2026, 12, 6, 5, 49, 12) and clock is OnsetClock.LINE
    # a stamp after its own read is no time of the line (a zone read wrong): read time
    late = _lines(["[rank0]:[E1206 05:41:12.000000 7 ProcessGroupNCCL.cpp:1182] x"])[0]
    (_, t2, clock2), = event_times([(late, READ)], LineClock(HostTime(), -600.0), None)
    assert t2 == READ and clock2 is OnsetClock.READ
    # a kernel line's read time is the kernel's own (the agent converted it)
    (_, k, kclock), = event_times([(line, READ)], LineClock(), None, kernel=True)
    assert k == READ and kclock is OnsetClock.KERNEL


def _f(code: str, host: str, at: float, step: Step = Step.NCCL, **extra: object) -> Finding:
    return Finding(step, code, Severity.CRITICAL, code, host, ts=at,
                   source="job:/logs/train.out" if step in (Step.NCCL, Step.MODEL) else None,
                   extra=extra)


def test_findings_of_different_jobs_are_separate_incidents() -> None:
    xid = Finding(Step.SYSLOG, Code.XID, Severity.CRITICAL, "Xid 79", "gpu-b02", gpu=6, xid=79,
                  ts=T0 + 600, source="kernel", extra={"job": "48206"})
    hang = _f(Code.NCCL_TIMEOUT, "gpu-b03", T0 + 1210, job="48207", rank=3,
              timeout_ms=600000.0)
    d = diagnose([xid, hang])
    assert [i.domain.label for i in d.incidents if i.domain] == ["Slurm job 48206",
                                                                 "Slurm job 48207"]
    first = d.first
    assert first is not None and first.finding is xid and first.consequences == ()
    assert "also NCCL timeout on gpu-b03" in first.headline
    job = d.of_job("48207")
    assert job is not None and job.finding.code == Code.NCCL_TIMEOUT and job.culprit
    assert not job.culprit.known and "TORCH_NCCL_TRACE_BUFFER_SIZE" in job.do_now


def test_a_hosts_failure_leads_the_watchers_own_fault_even_after_it() -> None:
    from probes.analysis.watcher import source_findings
    from probes.errors import WatcherFault
    from probes.wire.events import SourceHealth

    stalled = SourceHealth(T0 + 60, "collector 1", WatcherFault.COLLECTOR_STALLED, "no beat")
    watcher = source_findings({"gpu-c01": stalled, "gpu-c02": stalled})
    assert [f.code for f in watcher] == [Code.COLLECTOR_STALLED]
    alone = diagnose(watcher).first
    assert alone is not None and alone.finding.host == "collector 1"
    assert alone.do_now == "collector 1 is frozen, not its hosts: check this machine's load"
    xid = Finding(Step.SYSLOG, Code.XID, Severity.CRITICAL, "Xid 79", "gpu-b02", gpu=6, xid=79,
                  ts=T0 + 600, source="kernel")
    both = diagnose([*watcher, xid])
    assert both.first is not None and both.first.finding is xid, both.first
    assert [i.finding.code for i in both.incidents] == [Code.XID, Code.COLLECTOR_STALLED]


def test_the_rank_missing_from_the_timeouts_is_the_culprit() -> None:
    timeouts = _f(Code.NCCL_TIMEOUT, "n1", T0 + 600, job="7", rank=0,
                  ranks=[0, 1, 2, 4, 5, 6, 7], nranks=8)
    d = diagnose([timeouts])
    first = d.first
    assert first is not None and first.culprit is not None
    assert first.culprit.known and first.culprit.rank == 3
    assert "never reported the collective" in first.culprit.why
    assert first.waiting == (0, 1, 2, 4, 5, 6, 7)
    assert first.do_now.startswith("look at rank 3")
    assert "culprit rank 3" in first.headline


def test_the_rank_whose_last_work_is_oldest_is_the_culprit_when_all_timed_out() -> None:
    timeouts = _f(Code.NCCL_TIMEOUT, "n1", T0 + 600, job="7", rank=0, ranks=[0, 1, 2, 3],
                  nranks=4, last_completed={"0": 81, "1": 81, "2": 79, "3": 81})
    first = diagnose([timeouts]).first
    assert first is not None and first.culprit is not None and first.culprit.rank == 2
    assert "oldest" in first.culprit.why


def test_a_rank_that_failed_before_the_first_timeout_is_the_root_across_hosts() -> None:
    # rank 5's OOM on n3 (read from n1's copy of the job log), then the watchdogs
    oom = _f(Code.CUDA_OOM, "n1", T0 + 10, step=Step.MODEL, job="9", rank=5,
             rank_host="n3", rank_gpu=1, rank_bus_id="0000:2a:00.0")
    wait = _f(Code.NCCL_TIMEOUT, "n1", T0 + 15, job="9", rank=0, ranks=[0, 1, 2, 3, 4, 6, 7],
              timeout_ms=5000.0)
    down_after = _f(Code.RANK_FAILED, "n1", T0 + 20, job="9", rank=6)
    first = diagnose([wait, down_after, oom]).first
    assert first is not None and first.finding is oom
    c = first.culprit
    assert c is not None and (c.rank, c.host, c.gpu, c.bus_id) == (5, "n3", 1, "0000:2a:00.0")
    assert first.do_now.startswith("rank 5 on n3 GPU1 (0000:2a:00.0) ran out of GPU memory")
    assert {f.code for f in first.consequences} == {Code.NCCL_TIMEOUT, Code.RANK_FAILED}


def test_a_hardware_fault_under_a_job_joins_it_through_the_ranks_processes() -> None:
    from dataclasses import replace

    from probes.wire.samples import GpuProcess

    s = sample("n3", 5)
    gpus = tuple(replace(g, processes=(GpuProcess(4100 + g.index, "python", "u", 1.0,
                                                  slurm_job="9", rank=4 + g.index),))
                 for g in s.gpus if g.index < 2)
    index = RankIndex([HostRanks("n3", replace(s, gpus=gpus), hello("n3"), {})])
    xid = Finding(Step.SYSLOG, Code.XID, Severity.CRITICAL, "Xid 79", "n3", gpu=1, xid=79,
                  ts=T0 + 5, source="kernel")
    wait = _f(Code.NCCL_TIMEOUT, "n1", T0 + 40, job="9", rank=0, timeout_ms=30000.0)
    d = diagnose([wait, xid], index)
    first = d.first
    assert first is not None and first.finding is xid and first.domain is not None
    assert first.domain.job == "9" and first.culprit is not None and first.culprit.rank == 5
    assert first.do_now == "drain n3, reboot it; RMA GPU1 if it recurs"
    assert [f.code for f in first.consequences] == [Code.NCCL_TIMEOUT]


def test_explain_starts_with_the_oom_that_came_before_the_watchdog(tmp_path: Path) -> None:
    log = tmp_path / "train.out"
    log.write_text(
        "0: [rank0]: step 10 loss 2.31\n"
        "1: [rank1]: Traceback (most recent call last):\n"
        '1: [rank1]:   File "/workspace/train.py", line 212, in <module>\n'
        "1: [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.\n"
        "0: [rank0]:[E1206 05:40:12.101202 1234 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, "
        "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds "
        "before timing out.\n")
    with open_input(str(log)) as fh:
        explained = [explain_stream(str(log), fh)]
    first = explain_diagnosis(explained, READ).first
    lines = first_line(first)
    assert lines[0] == (f"First failure: cuda-oom rank 1 ({log}:4); rank 0 then timed out "
                        "waiting on it")
    assert lines[1].startswith("Do now: rank 1 ran out of GPU memory first")


def test_a_cuda_oom_surfaced_through_nccl_is_the_ranks_oom(tmp_path: Path) -> None:
    log = tmp_path / "nccl.out"
    log.write_text(
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:317, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank1]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank1]: Last error:\n[rank1]: Cuda failure 2 'out of memory'\n"
        "[rank0]:[E1206 05:40:12.101202 1234 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, "
        "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds "
        "before timing out.\n")
    with open_input(str(log)) as fh:
        explained = [explain_stream(str(log), fh)]
    first = explain_diagnosis(explained, READ).first
    assert first is not None and first.finding.code == Code.CUDA_OOM
    assert first.finding.extra.get("via") == "nccl" and first.finding.extra.get("rank") == 1


def test_a_warning_nccl_recovered_from_is_no_network_failure(tmp_path: Path) -> None:
    log = tmp_path / "init.out"
    log.write_text(
        "gpu-a01:2211:2301 [0] NCCL INFO NET/IB : No device found.\n"
        "gpu-a01:2211:2301 [0] NCCL WARN Failed to open libibverbs.so[.1]\n"
        "gpu-a01:2211:2301 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "gpu-a01:2211:2301 [0] NCCL INFO Using network Socket\n"
        "gpu-a01:2211:2301 [0] NCCL INFO comm 0x55f0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
        "busId 18000 commId 0x5ae7 - Init COMPLETE\n")
    with open_input(str(log)) as fh:
        explained = [explain_stream(str(log), fh)]
    (net,) = [f for f in explained[0].result.findings if f.code == Code.NCCL_NET_ERROR]
    assert net.severity is Severity.INFO and net.extra.get("recovered") is True
    assert explain_diagnosis(explained, READ).first is None


def test_one_answer_on_every_surface() -> None:
    """The same incident given to the console's fold (triage, host triage, the job view's
    source), the report's job section, a snapshot's fold and the JSON: one root, one
    culprit, one do-now."""
    from probes.analysis.incident import TriageRecord, review
    from probes.outputs.fold_once import fold_once
    from probes.outputs.report import build_report, job_sections
    from probes.transport.session import OnceResult

    oom = ("1: [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
           "GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.")
    wd = ("0: [rank0]:[E1206 05:40:12.101202 1234 ProcessGroupNCCL.cpp:1182] [Rank 0] "
          "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=81, "
          "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
          "600012 milliseconds before timing out.")
    init = ("gpu-j01:{pid}:{pid} [{r}] NCCL INFO comm 0x55f0 rank {r} nranks 2 cudaDev {r} "
            "nvmlDev {r} busId {bus} commId 0x5ae7 - Init COMPLETE")
    h = hello("gpu-j01")
    bus = {r: h.facts.gpus[r].bus_id for r in (0, 1)}
    # NCCL's busId is the bus id's bus, device and function: 00000000:28:00.0 → 28000
    lines = [init.format(pid=100 + r, r=r, bus=bus[r].split(":")[1].lower() + "000")
             for r in (0, 1)] + [oom, wd]
    events = [LogEvent(READ, "job:/logs/train-7.out", line) for line in lines]
    spec = HostSpec(name="gpu-j01")
    s = sample("gpu-j01", 1)
    fleet = FleetState([spec])
    watch = JobWatch.of("7", {"gpu-j01"})  # the console's, handed to the reads
    for item in (Connected(READ), h, *events, s):
        fleet.apply("gpu-j01", item, READ)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    once = OnceResult(spec, hello=h, sample=s, events=events)
    snap = fold_once([once])
    fleet_first = fleet.diagnosis(watch=watch).first
    host_first = fleet.diagnosis(["gpu-j01"], watch=watch).first
    snap_first = snap.diagnosis(watch=watch).first
    job_first = fleet.diagnosis(watch=watch).of_job("7")
    findings = fleet.all_findings(watch=watch)
    steps = review(findings, [], TriageRecord())
    report = build_report("t", steps, fleet_first, findings, {}, now=READ,
                          jobs=job_sections(fleet.diagnosis(watch=watch), findings,
                                            fleet.rank_index(watch), "7"))
    doc = report.to_json()
    answers = []
    for first in (fleet_first, host_first, snap_first, job_first):
        assert first is not None and first.culprit is not None
        answers.append((str(first.finding.code), first.culprit.rank, first.culprit.host,
                        first.culprit.gpu, first.do_now))
    ff = doc["first_failure"]
    assert isinstance(ff, dict)
    answers.append((ff["code"], ff["rank"], ff["host"], ff["gpu"], ff["do_now"]))
    (section,) = doc["jobs"]  # type: ignore[misc]
    sf = section["first_failure"]
    answers.append((sf["code"], sf["rank"], sf["host"], sf["gpu"], sf["do_now"]))
    assert len(set(answers)) == 1, answers
    assert answers[0][:4] == ("cuda-oom", 1, "gpu-j01", 1)
    assert time.gmtime(READ).tm_year == 2026


def test_a_hung_collective_spins_every_gpu_at_idle_power() -> None:
    """The demo's gpu-b03: from its collective's start (900 s) every GPU reads 100 % at
    ~160 W of 700; the verdict comes before the watchdog, names each GPU ``spinning``, and
    is said in its job's incident.  A host computing at full power has none."""
    from probes.analysis.judge import GpuVerdict
    from tests.analysis.test_triage_onsets import demo_state

    early = demo_state(22)  # 1320 s: spinning for 7 min, the watchdog not yet fired
    b03 = early.hosts["gpu-b03"]
    codes = {f.code for f in b03.findings()}
    assert Code.COLLECTIVE_HANG in codes and Code.NCCL_TIMEOUT not in codes
    (hang,) = [f for f in b03.findings() if f.code == Code.COLLECTIVE_HANG]
    assert hang.step is Step.NCCL and hang.severity is Severity.WARNING
    assert hang.extra["gpus"] == list(range(8)) and hang.ts is not None
    assert {j.verdict for j in b03.judgements()} == {GpuVerdict.SPINNING}
    assert not [f for f in early.hosts["gpu-a01"].findings() if f.code == Code.COLLECTIVE_HANG]
    later = demo_state(45).diagnosis().of_job("48207")
    assert later is not None and later.finding.code == Code.NCCL_TIMEOUT
    assert "spun busy at idle power" in later.explanation


def test_colon_job_on_a_host_without_job_processes_is_never_zero_hosts() -> None:
    """Faults review scenario 8: ``:job 1`` read ``0 hosts … nothing wrong`` while the job's
    node showed its NCCL timeout.  The job's log findings name its hosts and ranks; a rank no
    witness placed is listed saying what evidence was missing."""
    from tui.views.job_view import job_picture

    wd = ("0: [rank0]:[E1206 05:40:12.101202 1234 ProcessGroupNCCL.cpp:1182] [Rank 0] "
          "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=81, "
          "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
          "600012 milliseconds before timing out.")
    fleet = FleetState([HostSpec(name="vm")])
    watch = JobWatch.of("1")  # as ``:job 1`` sets it: no node list from Slurm
    from dataclasses import replace as _r
    s = sample("vm", 1)
    bare = _r(s, gpus=tuple(_r(g, processes=()) for g in s.gpus))
    for item in (Connected(READ), hello("vm"), LogEvent(READ, "job:/logs/slurm-1.out", wd),
                 bare):
        fleet.apply("vm", item, READ)
    fleet.scan_logs()
    p = job_picture(fleet, "1", watch)
    assert p.hosts == ("vm",) and p.first is not None
    assert p.first.finding.code == Code.NCCL_TIMEOUT
    (line,) = p.lines
    assert line.rank == 0 and line.gpu is None and line.note and "not placed" in line.note
