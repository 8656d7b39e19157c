"""NCCL / torch.distributed log rules: the shared samples, formats beyond them, and junk."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from probes.rules.logrules import nccl
from probes.rules.logrules.lines import log_lines
from probes.rules.result import ExplainFinding, merge_same
from probes.rules.text import decode, split_lines
from probes.triage import Severity, Step
from tests.conftest import FIXTURES
from tests.support.explain_expect import expectation, finding_set, fixture_input, subset_mismatches

NCCL = FIXTURES / "nccl"
SAMPLES = sorted(NCCL.glob("*.txt")) if NCCL.is_dir() else []
OTHER = sorted(p for cat in ("kernel", "training", "nvidia-smi", "topo", "lspci", "iostat",
                             "dmon-pmon")
               for p in (FIXTURES / cat).glob("*.txt"))
"""Samples of other kinds: the NCCL rules must stay silent on every one of them."""


def _scan_bytes(raw: bytes) -> list[ExplainFinding]:
    return merge_same(nccl.scan(log_lines(split_lines(decode(raw)))))


def _scan(text: str) -> list[ExplainFinding]:
    return _scan_bytes(text.encode())


def _one(text: str, code: str) -> ExplainFinding:
    found = _scan(text)
    assert [f.code for f in found] == [code], found
    return found[0]


def _sample(name: str) -> list[ExplainFinding]:
    return _scan_bytes(fixture_input(NCCL / name))


# --- the shared samples --------------------------------------------------------------------


def test_there_are_nccl_samples() -> None:
    assert len(SAMPLES) >= 13


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_nccl_sample_gives_exactly_its_expected_findings(sample: Path) -> None:
    expect = expectation(sample)
    raw = fixture_input(sample)
    lines = split_lines(decode(raw))
    assert expect["kind"] == "log"
    assert subset_mismatches(expect["parsed"], {"lines": len(lines)}) == []
    got = [f.to_json(sample.name) for f in _scan_bytes(raw)]
    assert finding_set(got) == finding_set(expect["findings"])
    assert all(f["step"] == "nccl" for f in got)


@pytest.mark.parametrize("sample", OTHER, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_false_alarm_on_other_samples(sample: Path) -> None:
    """Kernel, training and command outputs hold no NCCL failure (training/06's WorkNCCL
    frames are the tail of a CUDA error, not an NCCL one)."""
    assert _scan_bytes(fixture_input(sample)) == []


def test_sample_watchdog_details() -> None:
    f = _sample("02-watchdog-reduce-scatter-base.txt")[0]
    assert (f.code, f.severity, f.line, f.count) == ("nccl-timeout", Severity.CRITICAL, 1, 3)
    assert f.step is Step.NCCL
    assert f.extra["ranks"] == [1, 2, 6]
    assert f.extra["rank"] == 1
    assert (f.extra["seq"], f.extra["op_type"]) == (12408, "_REDUCE_SCATTER_BASE")
    assert (f.extra["numel_in"], f.extra["numel_out"]) == (268435456, 33554432)
    assert (f.extra["timeout_ms"], f.extra["ran_ms"]) == (600000, 600071)
    assert "ranks (1, 2, 6)" in f.summary and "mismatched" not in f.summary
    assert f.time == "11-17 03:27:51.402118374"
    assert "GPU state" in f.action and "syslog" in f.action


def test_sample_old_watchdog_without_numel() -> None:
    f = _sample("04-watchdog-old-format-no-numel-1800000.txt")[0]
    assert f.extra["ranks"] == [0, 2, 4, 5, 7]
    assert f.extra["timeout_ms"] == 1800000
    assert "numel_in" not in f.extra
    assert "30 min" in f.summary


def test_sample_mismatched_collectives() -> None:
    f = _sample("06-watchdog-broadcast-indented.txt")[0]
    assert f.code == "nccl-timeout"
    assert "mismatched collectives" in f.summary
    assert "BROADCAST on rank 5" in f.summary and "ALLREDUCE on rank 1" in f.summary
    assert f.extra["mismatched"] is True
    assert f.extra["op_types"] == ["BROADCAST", "ALLREDUCE"]
    assert "divergence" in f.action
    assert f.time == "09-23 22:18:09.771204512"


def test_sample_ib_completion_error() -> None:
    f = _sample("08-net-ib-status12-ipv6-gid.txt")[0]
    assert (f.code, f.severity, f.line, f.count) == ("nccl-net-error", Severity.CRITICAL, 1, 2)
    assert f.extra["ib_status"] == 12
    assert f.extra["host"] == "trn-ddp-worker-3"
    assert f.gpu == "GPU2"
    assert "retry counter exceeded" in f.summary
    assert f.extra["peer"] == "198.51.100.74<41238>"


def test_sample_bootstrap_socket_abort_points_at_the_warn_line() -> None:
    f = _sample("10-bootstrap-socket-connect-abort.txt")[0]
    assert (f.code, f.line, f.gpu) == ("nccl-net-error", 17, "GPU5")
    assert "Software caused connection abort" in f.summary


def test_sample_flattened_srun_line_names_the_rank() -> None:
    f = _sample("12-srun-label-flattened-one-line.txt")[0]
    assert (f.code, f.extra["rank"], f.extra["transport"]) == ("nccl-net-error", 13, "Socket")
    assert "192.0.2.41<51327>" in f.summary


def test_sample_async_exception_is_an_error_not_a_timeout() -> None:
    f = _sample("14-async-exception-empty-last-error-captured-traceback.txt")[0]
    assert (f.code, f.extra["kind"], f.extra["last_error"]) == ("nccl-error", "system", "")
    assert f.extra["nccl_version"] == "2.26.2"
    assert "empty" in f.summary


def test_sample_child_sigkill() -> None:
    f = _sample("16-childfailederror-sigkill-progress-glued.txt")[0]
    assert (f.code, f.line) == ("rank-failed", 1)
    assert (f.extra["local_rank"], f.extra["exitcode"], f.extra["signal"], f.extra["pid"]) == (
        0, -9, "SIGKILL", 52117)
    assert "OOM killer" in f.summary and "syslog" in f.action
    assert "ChildFailedError" in f.summary


def test_sample_sigterm_teardown_is_not_the_failure() -> None:
    f = _sample("18-elastic-sigterm-warnings-glog.txt")[0]
    assert (f.code, f.line, f.count) == ("rank-failed", 5, 1)
    assert (f.extra["local_rank"], f.extra["exitcode"]) == (3, 1)
    assert "signal" not in f.extra


def test_sample_ofi_and_ibverbs() -> None:
    ofi = _sample("22-ofi-register-mr-double-host-prefix-traceback.txt")[0]
    assert (ofi.extra["transport"], ofi.extra["host"], ofi.gpu) == (
        "OFI/EFA", "ip-198-51-100-23", "GPU3")
    assert "ulimit -l" in ofi.action
    ib = _sample("24-init-topology-dump-ibverbs-missing.txt")[0]
    assert (ib.code, ib.severity, ib.line) == ("nccl-net-error", Severity.WARNING, 3)
    assert "sockets" in ib.summary


# --- hand-made cases -----------------------------------------------------------------------


def test_ib_req_ibv_poll_cq_error() -> None:
    f = _one("gpu-b03:48213:48290 [3] net_ib.cc:1295 NCCL WARN NET/IB : req 0/1 tag 7 peer "
             "192.0.2.14<40151> ibv_poll_cq error 12", "nccl-net-error")
    assert (f.extra["call"], f.extra["host"], f.gpu) == ("ibv_poll_cq", "gpu-b03", "GPU3")
    assert f.severity is Severity.CRITICAL


def test_ibv_create_qp_failure_is_net_error_only() -> None:
    f = _one("gpu-b03:48213:48290 [3] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_create_qp "
             "failed with error Cannot allocate memory\n"
             "gpu-b03:48213:48290 [3] NCCL INFO transport/net_ib.cc:781 -> 2\n"
             "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, "
             "NCCL version 2.14.3\n"
             "ncclSystemError: System call (e.g. socket, malloc) or external library call "
             "failed or device error.", "nccl-net-error")
    assert f.extra["call"] == "ibv_create_qp"
    assert "ulimit -l" in f.action


def test_roce_flushed_completion() -> None:
    f = _one("node-r2:9911:9988 [1] transport/net_ib.cc:1696 NCCL WARN NET/IB: Got completion "
             "from peer 198.51.100.9<60123> with status=5 opcode=0 len=0 vendor err 249 (Work "
             "Request Flushed Error) localGid ::ffff:198.51.100.8 remoteGids::ffff:198.51.100.9 "
             "hca mlx5_3", "nccl-net-error")
    assert (f.extra["transport"], f.extra["ib_status"]) == ("RoCE", 5)
    assert "flushed" in f.summary and "mlx5_3" in f.summary
    assert "secondary" in f.action


def test_flushed_is_not_chosen_over_the_first_real_completion_error() -> None:
    f = _one("h1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 192.0.2.1<1> with status=5 "
             "opcode=0 len=0 vendor err 249\n"
             "h2:3:4 [1] NCCL WARN NET/IB : Got completion from peer 192.0.2.2<2> with error 12, "
             "opcode 0, len 0, vendor err 129", "nccl-net-error")
    assert (f.line, f.extra["ib_status"], f.count) == (2, 12, 2)
    assert f.extra["hosts"] == ["h2", "h1"]


def test_remote_error_after_an_ib_failure_is_absorbed() -> None:
    f = _one("h1:1:2 [0] NCCL WARN NET/IB : Got async event : port error\n"
             "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:275, remote "
             "process exited or there was a network error, NCCL version 2.20.5\n"
             "ncclRemoteError: A call failed possibly due to a network error or a remote "
             "process exiting prematurely.", "nccl-net-error")
    assert "port error" in f.summary


def test_remote_error_without_transport_is_nccl_error() -> None:
    f = _one("ncclRemoteError: A call failed possibly due to a network error or a remote "
             "process exiting prematurely.", "nccl-error")
    assert f.extra["kind"] == "remote" and "victim" in f.action


def test_invalid_usage() -> None:
    f = _one("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
             "1269, invalid usage, NCCL version 2.14.3\n"
             "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
             "nccl-error")
    assert (f.extra["kind"], f.count, f.severity) == ("invalid-usage", 2, Severity.CRITICAL)
    assert "NCCL_DEBUG=WARN" in f.action


def test_unhandled_cuda_error_out_of_memory() -> None:
    found = _scan("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:219, "
                  "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
                  "2.19.3\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
                  "Cuda failure 'out of memory'")
    # the NCCL error as NCCL told it, and the rank's own CUDA OOM it carried (issue #34)
    assert [f.code for f in found] == ["nccl-error", "cuda-oom"]
    f, oom = found
    assert (f.extra["kind"], f.extra["last_error"]) == ("cuda", "Cuda failure 'out of memory'")
    assert "out of memory" in f.summary and "NCCL_BUFFSIZE" in f.action
    assert oom.step.value == "model" and oom.line == f.line and oom.extra["via"] == "nccl"


def test_four_ranks_interleaved_are_one_timeout_with_count_four() -> None:
    text = "\n".join(
        f"[rank{r}]:[E1203 10:00:0{r}.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog "
        f"caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLGATHER, "
        f"NumelIn=1024, NumelOut=8192, Timeout(ms)=600000) ran for 60010{r} milliseconds "
        f"before timing out.\n[rank{r}]:[E1203 10:00:0{r}.1 ProcessGroupNCCL.cpp:1664] [PG 0 "
        f"(default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at "
        f"work: 77, last enqueued NCCL work: 78, last completed NCCL work: {76 if r else 75}."
        for r in (3, 0, 2, 1))
    found = nccl.scan(log_lines(text.splitlines()))
    merged = merge_same(found)
    assert len(merged) == 1
    f = merged[0]
    assert (f.code, f.count, f.line) == ("nccl-timeout", 4, 1)
    assert f.extra["ranks"] == [0, 1, 2, 3]
    assert "4 ranks (0, 1, 2, 3)" in f.summary
    assert "lowest last completed work 75 on rank 0" in f.summary
    assert f.extra["ran_ms"] == 600103
    assert [t["rank"] for t in f.extra["timeouts"]] == [3, 0, 2, 1]  # type: ignore[attr-defined]


def test_ranks_at_different_seqnums() -> None:
    f = _one("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=10, "
             "OpType=ALLREDUCE, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.\n"
             "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=11, "
             "OpType=ALLREDUCE, Timeout(ms)=60000) ran for 60002 milliseconds before timing out.",
             "nccl-timeout")
    assert f.extra["seqs"] == [10, 11]
    assert "different SeqNums" in f.summary


def test_crlf_input() -> None:
    raw = (b"[rank2]:[E1117 03:27:51.1 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught "
           b"collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, "
           b"NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\r\n"
           b"srun: error: gpu-a12: task 2: Killed\r\n")
    found = _scan_bytes(raw)
    assert [f.code for f in found] == ["nccl-timeout", "rank-failed"]
    assert found[0].extra["ran_ms"] == 600010
    assert not found[0].evidence.endswith("\r")
    assert found[1].extra["host"] == "gpu-a12" and found[1].extra["signal"] == "SIGKILL"


def test_truncated_watchdog_line() -> None:
    f = _one("[E ProcessGroupNCCL.cpp:719] [Rank 4] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=215903, OpType=ALLRE", "nccl-timeout")
    assert (f.extra["rank"], f.extra["seq"]) == (4, 215903)
    assert "op_type" not in f.extra
    cut = _one("[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2159",
               "nccl-timeout")
    assert "seq" not in cut.extra


def test_heartbeat_monitor_timeout() -> None:
    f = _one("[rank2]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 2] Heartbeat monitor timed out! "
             "Process will be terminated after dumping debug info.", "nccl-timeout")
    assert "watchdog hung" in f.summary and "CUDA call" in f.action


def test_ambiguous_watchdog_line_alone_is_an_error_not_a_timeout() -> None:
    """"Either an error or timeout" says neither: only a line that reports a timeout is
    nccl-timeout (#24); alone it is an nccl-error that says so, beside an error nothing."""
    amb = ("[rank1]:[E1117 03:27:51.4 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 1] Exception "
           "(either an error or timeout) detected by watchdog at work: 12408, last enqueued NCCL "
           "work: 12410, last completed NCCL work: 12407.")
    f = _one(amb, "nccl-error")
    assert "error or timeout" in f.summary
    _one("RuntimeError: NCCL error in: x.cpp:1, internal error - please report this issue to "
         "the NCCL developers, NCCL version 2.18.1\n" + amb, "nccl-error")


def test_communicator_aborted_after_a_timeout_is_not_an_error() -> None:
    _one("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
         "OpType=ALLREDUCE, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.\n"
         "RuntimeError: NCCL communicator was aborted on rank 0.", "nccl-timeout")


def test_elastic_failure_table_multi_line_and_flattened() -> None:
    table = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" + """\
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-03-02_11:20:01
  host      : gpu-node-17
  rank      : 5 (local_rank: 1)
  exitcode  : -9 (pid: 4412)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4412
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-03-02_11:20:00
  host      : gpu-node-17
  rank      : 4 (local_rank: 0)
  exitcode  : -9 (pid: 4411)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4411
============================================================"""
    f = _one(table, "rank-failed")
    assert (f.extra["rank"], f.extra["local_rank"], f.extra["exitcode"]) == (4, 0, -9)
    assert (f.extra["signal"], f.extra["host"], f.count) == ("SIGKILL", "gpu-node-17", 2)
    assert f.extra["ranks"] == [4, 5]
    assert f.time == "2024-03-02_11:20:00" and f.line == 18
    assert "OOM killer" in f.summary
    flat = _one("[0]: time : 2024-03-02_11:20:00 host : gpu-node-17 rank : 3 (local_rank: 3) "
                "exitcode : -6 (pid: 881) error_file: <N/A> traceback : Signal 6 (SIGABRT) "
                "received by PID 881", "rank-failed")
    assert (flat.extra["rank"], flat.extra["signal"], flat.extra["pid"]) == (3, "SIGABRT", 881)
    assert "watchdog" in flat.action


def test_other_launchers_report_failed_ranks() -> None:
    srun = _one("srun: error: gpu-a12: task 7: Killed\n"
                "srun: error: gpu-a12: task 6: Exited with exit code 1\n"
                "srun: error: gpu-a12: task 5: Terminated", "rank-failed")
    assert (srun.extra["ranks"], srun.count) == ([6, 7], 2)
    mpi = _one("mpirun noticed that process rank 3 with PID 0 on node gpu-c4 exited on signal 9 "
               "(Killed).", "rank-failed")
    assert (mpi.extra["rank"], mpi.extra["host"], mpi.extra["signal"]) == (3, "gpu-c4", "SIGKILL")
    ds = _one("[2023-05-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/"
              "python3', '-u', 'train.py', '--local_rank=2'] exits with return code = -7",
              "rank-failed")
    assert (ds.extra["local_rank"], ds.extra["signal"]) == (2, "SIGBUS")
    assert "/dev/shm" in ds.action


def test_sigterm_teardown_alone_is_nothing() -> None:
    assert _scan("W1017 09:52:44.118000 140213 torch/distributed/elastic/multiprocessing/api.py:"
                 "897] Sending process 140290 closing signal SIGTERM\n"
                 "srun: error: gpu-a12: task 5: Terminated") == []


def test_init_lines_map_rank_to_bus_id() -> None:
    f = _one("gpu-a07:21843:21900 [2] NCCL INFO comm 0x55d0c8 rank 2 nranks 8 cudaDev 2 nvmlDev "
             "2 busId 4e000 commId 0xabc - Init COMPLETE\n"
             "gpu-a07:21843:21990 [2] misc/socket.cc:538 NCCL WARN Net : Connection closed by "
             "remote peer 192.0.2.60<52214>", "nccl-net-error")
    assert (f.gpu, f.extra["rank"], f.extra["host"]) == ("0000:4e:00.0", 2, "gpu-a07")
    assert f.line == 2


def test_c10d_store_and_gloo_failures() -> None:
    store = _one("RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
                 "from [0] via c10d key-value store by key '0', but store->get('0') got error: "
                 "Connection reset by peer", "nccl-net-error")
    assert store.extra["transport"] == "c10d store" and "MASTER_ADDR" in store.action
    gloo = _one("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
                "closed by peer [192.0.2.5]:22727", "nccl-net-error")
    assert gloo.extra["peer"] == "[192.0.2.5]:22727"


def test_shm_and_duplicate_gpu_warnings() -> None:
    shm = _one("node1:123:456 [0] include/shm.h:28 NCCL WARN Error while creating shared memory "
               "segment /dev/shm/nccl-vzIpS6 (size 9637888)", "nccl-error")
    assert "--shm-size" in shm.action
    dup = _one("node3:77:77 [1] init.cc:1250 NCCL WARN Duplicate GPU detected : rank 1 and rank "
               "0 both on CUDA device 1b000", "nccl-error")
    assert dup.extra["kind"] == "invalid-usage" and "LOCAL_RANK" in dup.action


@pytest.mark.parametrize("text", [
    # healthy c10d retry at warning level
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 "
    "(errno: 99 - Cannot assign requested address).",
    # a non-distributed connection error (an experiment tracker)
    "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, "
    "'Connection reset by peer'))",
    # libibverbs missing on a host without InfiniBand, at INFO level
    "host1:1:1 [0] NCCL INFO Failed to open libibverbs.so[.1]\n"
    "host1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.3<0>",
    # healthy init and return-code chains
    "gpu-a07:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal "
    "network plugin.\ngpu-a07:1:1 [0] NCCL INFO NET/IB : No device found.\n"
    "gpu-a07:1:1 [0] NCCL INFO misc/socket.cc:504 -> 2 (Operation now in progress)",
    "gpu-a07:1:1 [0] NCCL WARN Could not find real path of /sys/class/net/eth0/device",
    "frame #3: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56",
    "Collective WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=2, NumelOut=2, Timeout(ms)=600000)",
    "",
])
def test_healthy_or_unrelated_lines_give_nothing(text: str) -> None:
    assert _scan(text) == []


def test_ibverbs_missing_on_an_ib_host_at_info_level_is_a_warning() -> None:
    f = _one("h:1:1 [0] NCCL INFO Bootstrap : Using ibs5:192.0.2.57<0>\n"
             "h:1:1 [0] NCCL INFO Failed to open libibverbs.so[.1]", "nccl-net-error")
    assert f.severity is Severity.WARNING


def test_non_utf8_fenced_and_indented() -> None:
    raw = (b"```\n\t  \xff\xfe gpu7:11:12 [1] NCCL WARN NET/IB : Got completion from peer "
           b"192.0.2.7<1> with error 12, opcode 0, len 0, vendor err 129  \n```\n")
    f = _scan_bytes(raw)[0]
    assert (f.code, f.line, f.extra["ib_status"], f.extra["host"]) == (
        "nccl-net-error", 2, 12, "gpu7")


def test_long_flattened_line_keeps_evidence_near_the_match() -> None:
    text = "x " * 2000 + " 13: ncclInvalidUsage: bad 13: more " + "y " * 2000
    f = _one(text, "nccl-error")
    assert len(f.evidence) <= nccl.EVIDENCE_MAX + 2
    assert "ncclInvalidUsage" in f.evidence


# --- junk never raises ---------------------------------------------------------------------


def _all_samples() -> list[bytes]:
    return [fixture_input(p) for p in [*SAMPLES, *OTHER]]


def test_truncation_at_every_line_and_mid_line_never_raises() -> None:
    for raw in _all_samples():
        lines = split_lines(decode(raw))
        for n in range(len(lines) + 1):
            nccl.scan(log_lines(lines[:n]))
            if n:
                last = lines[n - 1]
                for cut in range(0, len(last), 11):
                    for f in nccl.scan(log_lines([*lines[:n - 1], last[:cut]])):
                        assert f.step is Step.NCCL and 1 <= f.line <= n


def test_random_garbage_never_raises() -> None:
    rnd = random.Random(20251117)
    pieces = ["NCCL WARN ", "NCCL INFO ", "[Rank 3] ", "Watchdog caught collective operation "
              "timeout: WorkNCCL(", "SeqNum=", "OpType=", "ran for ", " milliseconds before "
              "timing out", "Last error:", "\n", "\r\n", "13: ", "ibv_", " failed", "exitcode",
              " : ", "rank : 1 (local_rank: ", "Signal 9 (SIGKILL) received by PID ", "\ufffd",
              "\t", "99999999999999999999999999", "(", ")", "<", ">", "busId ", "h:1:2 [0] "]
    for _ in range(1500):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
        for f in nccl.scan(log_lines(split_lines(text))):
            assert f.code in {"nccl-timeout", "nccl-net-error", "nccl-error", "rank-failed"}
            assert f.to_json("x")["step"] == "nccl"
    junk = bytes(rnd.randrange(256) for _ in range(20000))
    nccl.scan(log_lines(split_lines(decode(junk))))
    nccl.scan(log_lines(["SeqNum=" + "9" * 6000 + ", rank : " + "1" * 6000 + " (local_rank: 1)"]))
