"""Ranks placed on hosts and GPUs (issue #21 item 4): a job log's "rank 9 timed out" names the
machine and the card, from the agents' GPU processes or from the log's own NCCL init lines.

NCCL init lines are shaped after NVIDIA/nccl#1814 (NCCL 2.18+, ``nvmlDev``), #629 (2.7, no
``nvmlDev``), #1029 (pdsh/mpirun ``host: `` prefix) and nccl-tests#252 (``ncclCommInitRank
comm …``); torchrun's failure table after torch.distributed.elastic's ChildFailedError
output (``Root Cause (first observed failure):`` with ``host :`` and ``rank :`` lines).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from probes.analysis.incident import describe, do_now
from probes.analysis.job_ranks import HostRanks, RankIndex, gpu_ids
from probes.analysis.job_watch import JobWatch
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.rules.logrules.lines import peel
from probes.rules.logrules.rank_places import LoggedRank, RankPlaces, nccl_bus_id
from probes.wire.events import Connected
from probes.wire.samples import GpuProcess, LogEvent
from tests.support.tui_fakes import T0, hello, sample

INIT_218 = ("gpu-c03:983:1261 [3] NCCL INFO comm 0x55f01c18e490 rank 35 nranks 64 cudaDev 3 "
            "nvmlDev 3 busId 48000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE")
INIT_218_TP = ("gpu-c03:983:1301 [3] NCCL INFO comm 0x560dfc7a10e0 rank 3 nranks 8 cudaDev 3 "
               "nvmlDev 3 busId 48000 commId 0x1b2c3d4e5f607182 - Init COMPLETE")
INIT_27 = ("A03-R28-I49-3-9000018:193027:193119 [7] NCCL INFO comm 0x7fdf08000d00 rank 15 "
           "nranks 16 cudaDev 7 busId e7000 - Init COMPLETE")
INIT_PDSH = ("rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19488:21063 [4] NCCL INFO comm "
             "0x55d3a8c3d5a0 rank 4 nranks 16 cudaDev 4 nvmlDev 4 busId ce000 commId "
             "0x9ad9b5e4ab2566da - Init START")
INIT_TESTS = ("kolyoz2:25172:25828 [1] NCCL INFO ncclCommInitRank comm 0x556759b190e0 rank 5 "
              "nranks 8 cudaDev 1 nvmlDev 1 busId 55000 commId 0x996ee6f117cb8e1e - Init START")
TORCHRUN = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-01-22_10:15:52
  host      : gpu-node-3
  rank      : 5 (local_rank: 1)
  exitcode  : -6 (pid: 12345)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 12345
============================================================"""


def _places(lines: list[str]) -> dict[int, LoggedRank]:
    places = RankPlaces()
    for line in lines:
        places.add(peel(line)[0])
    return places.places()


def test_nccl_bus_ids_read_as_lspci_writes_them() -> None:
    assert nccl_bus_id("48000") == "0000:48:00.0"
    assert nccl_bus_id("e7000") == "0000:e7:00.0"
    assert nccl_bus_id("1001b000") == "0100:1b:00.0"


def _where(r: LoggedRank) -> tuple[int, str, str | None, int | None]:
    return r.rank, r.host, r.bus_id, r.nranks


def test_init_lines_of_every_nccl_shape_place_their_rank() -> None:
    got = _places([INIT_27, INIT_PDSH, INIT_TESTS])
    assert _where(got[15]) == (15, "A03-R28-I49-3-9000018", "0000:e7:00.0", 16)
    assert got[15].comm is None  # NCCL 2.7 prints no commId
    assert _where(got[4]) == (4, "rdma-gpu-train-worker-0", "0000:ce:00.0", 16)
    # nranks 8 < 16: a smaller communicator than the widest seen, not a global rank
    assert 5 not in got


def test_a_processes_smaller_communicator_does_not_rename_its_rank() -> None:
    for order in ([INIT_218, INIT_218_TP], [INIT_218_TP, INIT_218]):
        got = _places(order)
        assert {r: _where(p) for r, p in got.items()} == {
            35: (35, "gpu-c03", "0000:48:00.0", 64)}, order
        assert got[35].comm == "0x5ae77eb5ea4ec1ee"  # the widest communicator's


def test_torchruns_failure_table_places_the_root_cause_rank() -> None:
    got = _places(TORCHRUN.splitlines())
    assert got == {5: LoggedRank(5, "gpu-node-3")}
    assert _places(["  rank      : 5 (local_rank: 1)"]) == {}  # no host line before it


def _with_ranks(host: str, job: str, first_rank: int, serials: bool = True):  # type: ignore[no-untyped-def]
    s = sample(host, 0)
    gpus = tuple(replace(g, processes=(GpuProcess(
        40000 + g.index, "python", "alice", 60000.0, slurm_job=job, slurm_step="0",
        rank=first_rank + g.index, local_rank=g.index, world_size=16),)) for g in s.gpus)
    h = hello(host)
    if serials:
        h = replace(h, facts=replace(h.facts, gpus=tuple(
            replace(g, serial=f"16541160{g.index:05d}") for g in h.facts.gpus)))
    return h, replace(s, gpus=gpus)


TIMEOUT_9 = ("9: [rank9]:[E1103 23:14:03.342459398 ProcessGroupNCCL.cpp:1182] [Rank 9] Watchdog "
             "caught collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, "
             "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 "
             "milliseconds before timing out.")


def _fleet(log_lines: list[str]) -> FleetState:
    fleet = FleetState([HostSpec(name=h) for h in ("gpu-a01", "gpu-b07", "gpu-c03")])
    for host, first in (("gpu-a01", 0), ("gpu-b07", 8)):
        h, s = _with_ranks(host, "48211", first)
        for item in (Connected(T0), h, s):
            fleet.apply(host, item, T0)
    h = hello("gpu-c03")
    for item in (Connected(T0), h, sample("gpu-c03", 0)):
        fleet.apply("gpu-c03", item, T0)
    for n, line in enumerate(log_lines):
        fleet.apply("gpu-a01", LogEvent(T0 + 1 + n, "job:/shared/train-48211.out", line), T0)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    return fleet


def test_a_rank_on_another_node_is_placed_by_that_nodes_gpu_processes() -> None:
    fleet = _fleet([TIMEOUT_9])
    f = next(f for f in fleet.all_findings() if f.code == "nccl-timeout")
    # the log was read on the batch host; the rank runs on the second node
    assert f.host == "gpu-a01"
    assert (f.extra["job"], f.extra["rank"], f.extra["rank_host"], f.extra["rank_gpu"]) == (
        "48211", 9, "gpu-b07", 1)
    assert f.extra["rank_bus_id"] == "0000:28:00.0"
    assert f.extra["rank_serial"] == "1654116000001"
    assert describe(f) == "nccl-timeout rank 9 on gpu-b07 GPU1"
    assert "rank 9 on gpu-b07 GPU1" in do_now(f)
    # the host's own findings are unchanged: the placement is a fleet-wide judgement
    assert "rank_host" not in next(x for x in fleet.hosts["gpu-a01"].findings()
                                   if x.code == "nccl-timeout").extra


def test_a_rank_no_agent_saw_is_placed_by_the_logs_init_line() -> None:
    timeout_35 = TIMEOUT_9.replace("9: [rank9]", "35: [rank35]").replace("[Rank 9]", "[Rank 35]")
    fleet = _fleet([INIT_218_TP, INIT_218, timeout_35])
    f = next(f for f in fleet.all_findings() if f.code == "nccl-timeout")
    assert (f.extra["rank"], f.extra["rank_host"], f.extra["rank_gpu"]) == (35, "gpu-c03", 3)
    assert f.extra["rank_bus_id"] == "0000:48:00.0"


def test_an_unplaced_rank_is_never_guessed() -> None:
    timeout_40 = TIMEOUT_9.replace("9: [rank9]", "40: [rank40]").replace("[Rank 9]", "[Rank 40]")
    f = next(f for f in _fleet([timeout_40]).all_findings() if f.code == "nccl-timeout")
    assert f.extra["rank"] == 40 and "rank_host" not in f.extra
    assert describe(f) == "nccl-timeout on gpu-a01"


def test_which_job_a_log_belongs_to() -> None:
    h, s = _with_ranks("a", "48211", 0)
    two_jobs = replace(s, gpus=s.gpus[:4] + tuple(
        replace(g, processes=tuple(replace(p, slurm_job="50000") for p in g.processes or ()))
        for g in s.gpus[4:]))
    idle = sample("b", 0)
    index = RankIndex([HostRanks("a", two_jobs, h, {}), HostRanks("b", idle, hello("b"), {})])
    assert index.job_of_log("a") is None  # two jobs on it: which one wrote the log is unknown
    assert index.job_of_log("b") is None
    watched = RankIndex([HostRanks("a", two_jobs, h, {}), HostRanks("b", idle, hello("b"), {})],
                        JobWatch.of("50000"))
    assert watched.job_of_log("a") == "50000" and watched.job_of_log("b") == "50000"
    assert [p.rank for p in watched.ranks_of("50000")] == [4, 5, 6, 7]


def test_the_report_lists_the_job_its_nodes_and_the_failing_ranks_host_and_serial() -> None:
    from probes.outputs.report import build_report, job_sections

    fleet, watch = _fleet([TIMEOUT_9]), JobWatch.of("48211")
    found = fleet.all_findings(watch=watch)
    jobs = job_sections(fleet.diagnosis(watch=watch), found, fleet.rank_index(watch), watch.job)
    assert [j.job for j in jobs] == ["48211"]
    (job,) = jobs
    assert job.nodes == ("gpu-a01", "gpu-b07") and job.ranks == 16
    report = build_report("job 48211", [], None, found,
                          {h: s.hello.facts for h, s in fleet.hosts.items() if s.hello},
                          now=T0 + 60, jobs=jobs)
    md = report.to_markdown()
    assert "## Slurm job 48211" in md and "- nodes: gpu-a01, gpu-b07" in md
    # rank 9 on gpu-b07 GPU1 timed out waiting: a victim; with 15 of 16 ranks silent the
    # one that stalled is not known, and the report says what would tell
    assert "- failing rank: unknown: `nccl-timeout`" in md
    assert "- waited (victims): 9" in md and r"TORCH\_NCCL\_TRACE\_BUFFER\_SIZE" in md
    entry = report.to_json()["jobs"][0]  # type: ignore[index]
    assert entry["first_failure"]["waiting_ranks"] == [9]
    assert entry["first_failure"]["culprit"]["known"] is False
    assert entry["failing"]["log_read_on"] == "gpu-a01"


def test_the_rank_index_is_kept_while_nothing_moved_and_rebuilt_when_due(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import probes.fleet_state as fs

    clock = [1000.0]
    monkeypatch.setattr(fs.time, "monotonic", lambda: clock[0])
    fleet = _fleet([TIMEOUT_9])
    first = fleet.rank_index()
    assert fleet.rank_index() is first  # nothing folded since
    fleet.apply("gpu-c03", sample("gpu-c03", 1), T0 + 1)
    clock[0] += 1.0
    assert fleet.rank_index() is first  # items arrived, but it is not due yet
    clock[0] += fs.RANK_INDEX_EVERY_S
    assert fleet.rank_index() is not first
    watched = fleet.rank_index(JobWatch.of("48211"))
    assert watched.watched_job == "48211"  # a new job is seen at once
    assert fleet.rank_index(JobWatch.of("48211")) is watched  # and kept for that job


def test_slurms_block_layout_places_a_task_only_when_it_fixes_node_and_gpu() -> None:
    """``srun``'s default block distribution, each node as many tasks as its CPUs hold, one
    GPU a task (``GRES=gpu:2(IDX:0-1)``): task 3 is n2's second task on its GPU1.  Where
    the counts do not add up, or a node's GPUs are not one a task, nothing is placed."""
    from probes.config.slurm import NodeAllocation, SlurmJob

    alloc = tuple(NodeAllocation(n, (0, 1), (0, 1), 0) for n in ("n1", "n2"))
    job = SlurmJob("5", "t", "RUNNING", "u", ("n1", "n2"), "n1", None, None, 1000,
                   allocation=alloc, num_tasks=4, cpus_per_task=1)
    assert job.task_gpus() == {0: ("n1", 0), 1: ("n1", 1), 2: ("n2", 0), 3: ("n2", 1)}
    assert replace(job, num_tasks=3).task_gpus() == {}  # 4 CPUs for 3 tasks: unclear
    shared = tuple(replace(a, gpu_indices=(0,)) for a in alloc)
    assert replace(job, allocation=shared).task_gpus() == {}  # two tasks on one GPU
    index = RankIndex([HostRanks("n2", sample("n2", 0), hello("n2"), {})],
                      JobWatch.of("5", ("n1", "n2"), job.task_gpus()))
    place = index.locate("5", 3)
    assert place is not None and (place.host, place.gpu, place.witness) == ("n2", 1, "layout")
    assert place.bus_id == gpu_ids(hello("n2"))[1][0]


def test_the_watched_job_is_the_readers_value_not_the_folds() -> None:
    """Issue #37 item 5: the job watched is handed to the reads (the console holds it); the
    fold has no field for it, so two readers of one fold may watch different jobs."""
    fleet = _fleet([TIMEOUT_9])
    assert not [k for k in vars(fleet) if "watch" in k]
    watch = JobWatch.of("48211", {"gpu-a01", "gpu-b07"})
    assert fleet.rank_index().watched_job is None
    assert fleet.rank_index(watch).watched_hosts == {"gpu-a01", "gpu-b07"}
    assert fleet.rank_index().watched_job is None  # the other reader's answer is its own
    # ``:job``: the same job keeps Slurm's nodes, another job drops them
    assert watch.switched_to("48211") is watch
    assert watch.switched_to("50000") == JobWatch("50000")
    assert JobWatch.of(None, {"x"}).job is None and not JobWatch.of(None, {"x"}).hosts
