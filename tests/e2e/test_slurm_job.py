"""``rigwatch snapshot --slurm-job ID`` against a real one-node Slurm (issue #21 items 3, 6).

The cluster is ``tests/support/slurm.py``'s: Debian's munged, slurmctld and slurmd run as
root on 127.0.0.1.  A batch job writes what a failing 2-rank PyTorch job writes (srun
``--label`` prefixes, torch's ``[rankN]:`` marks, an NCCL watchdog timeout on rank 0 and a
CUDA OOM on rank 1, after vllm-project/vllm#28028 and pytorch/pytorch#75087) into its
``--output``; rigwatch asks ``scontrol`` for the job, watches its node, and reads the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from probes.config.hostlist import expand_hostlist
from probes.config.slurm import (
    AllocationUnclear,
    JobExit,
    SlurmError,
    SlurmJob,
    job_specs,
    parse_status_line,
    query_job,
)
from probes.config.slurm_alloc import parse_allocation
from tests.conftest import REPO
from tests.support.paths import TEST_DATA
from tests.support.slurm import SlurmCluster, start_cluster
from tests.support.tmux import RIGWATCH, Tmux

NCCL_LINE = (
    "0: [rank0]:[E1103 23:14:03.342459398 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, NumelIn=1048576, "
    "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
OOM_LINE = (
    "1: [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.")
JOB_SCRIPT = f"#!/bin/bash\necho '{NCCL_LINE}'\necho '{OOM_LINE}'\n"

# `squeue -h -t all -j 7 -O JobID:0|,ArrayJobID:0|,…` as Slurm 22.05.8 (Debian 12) prints it
# (checked on the test cluster; values changed): Slurm's own fields, each followed by `|`.
STATUS_2205 = "7|7|N/A|1000|alice|RUNNING|None|0|gpu-a[01-02],gpu-b07|gpu-a01|gpu|\n"
JOB_2205 = SlurmJob(job_id="7", name="train", state="RUNNING", user="alice",
                    nodes=("gpu-a01", "gpu-a02", "gpu-b07"), batch_host="gpu-a01",
                    stdout="/home/alice/logs/train-7.out", stderr="/home/alice/logs/train-7.err",
                    user_id=1000, partition="gpu")


def test_squeue_fields_are_read_by_their_place() -> None:
    status = parse_status_line(STATUS_2205, "7")
    assert (status.job_id, status.user, status.user_id, status.state) == (
        "7", "alice", 1000, "RUNNING")
    assert status.nodes == ("gpu-a01", "gpu-a02", "gpu-b07") and status.batch_host == "gpu-a01"
    assert status.active and status.exit is None and status.reason is None
    done = parse_status_line("8|8|N/A|1000|alice|FAILED|NonZeroExitCode|768|n1|n1|gpu|\n", "8")
    assert not done.active and done.exit == JobExit(3, 0) and done.reason == "NonZeroExitCode"
    assert str(parse_status_line(STATUS_2205.replace("|RUNNING|None|0|", "|CANCELLED|None|9|"),
                                 "7").exit) == "0:9"
    specs = job_specs(JOB_2205, [], here="bastion")
    assert [s.name for s in specs] == ["gpu-a01", "gpu-a02", "gpu-b07"]
    assert specs[0].logs == (JOB_2205.stdout, JOB_2205.stderr) and specs[1].logs == ()
    assert specs[0].job_logs == specs[0].logs and specs[0].job_log_owner == 1000
    args = specs[0].agent_args()
    assert f"--job-log={JOB_2205.stdout}" in args and "--job-log-owner=1000" in args
    assert not any(a.startswith("--tail=") for a in args)  # a job's paths are never globs
    with pytest.raises(SlurmError, match="no such job"):
        parse_status_line("", "7")
    with pytest.raises(SlurmError, match="does not understand"):
        parse_status_line("7|7|N/A|0|root|RUNNING|None|0|vm|evil|x|gpu|\n", "7")
    with pytest.raises(SlurmError, match="job array of 2 tasks"):
        parse_status_line("9|9|1|1000|a|RUNNING|None|0|n1|n1|gpu|\n"
                          "10|9|2|1000|a|RUNNING|None|0|n1|n1|gpu|\n", "9")
    with pytest.raises(SlurmError):
        query_job("7; rm -rf /")


# `scontrol -d show job` detail lines as Slurm 22.05.8 printed them for `-n2 --gres=gpu:3` on
# the test cluster, and on a two-node job (src/api/job_info.c prints one line per group).
DETAIL_2205 = """JobId=15 JobName=arr.sh
   JOB_GRES=gpu:3
     Nodes=vm CPU_IDs=0-1 Mem=0 GRES=gpu:3(IDX:0-2)
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
"""


def test_allocation_lines_give_each_nodes_cpus_and_gpus() -> None:
    (vm,) = parse_allocation(DETAIL_2205, ("vm",))
    assert (vm.node, vm.cpu_ids, vm.gpu_indices, vm.mem_mib) == ("vm", (0, 1), (0, 1, 2), 0)
    two = ("     Nodes=n[1-2] CPU_IDs=0-1 Mem=1000 GRES=gpu:a100:2(IDX:0,2)\n"
           "     Nodes=n3 CPU_IDs=0,3 Mem=0 GRES=\n")
    got = parse_allocation(two, ("n3", "n1", "n2"))
    assert [(a.node, a.cpu_ids, a.gpu_indices) for a in got] == [
        ("n3", (0, 3), ()), ("n1", (0, 1), (0, 2)), ("n2", (0, 1), (0, 2))]
    # a job name shaped like a detail line: the node is named twice, nothing is guessed
    forged = DETAIL_2205.replace("JobName=arr.sh",
                                 "JobName=x\n     Nodes=vm CPU_IDs=0-7 Mem=0 GRES=gpu:8(IDX:0-7)")
    with pytest.raises(AllocationUnclear, match="twice"):
        parse_allocation(forged, ("vm",))
    with pytest.raises(AllocationUnclear, match="not a node of the job"):
        parse_allocation("     Nodes=attacker CPU_IDs=0 Mem=0 GRES=\n", ("vm",))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    c = start_cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield c
    finally:
        c.stop()


def test_hostlists_expand_as_scontrol_expands_them(cluster: SlurmCluster) -> None:
    for text in ("gpu[001-003],rack[1-2]-node[01-02]", "gpu-a[01-02],gpu-b07", "n[8-11]"):
        want = cluster.run("scontrol", "show", "hostnames", text).split()
        assert expand_hostlist(text) == want, text


def test_snapshot_of_a_job_names_its_node_and_each_findings_rank_and_host(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(JOB_SCRIPT)
    script.chmod(0o755)
    job = cluster.sbatch(script, "--gres=gpu:2", "-J", "train",
                         "-o", str(tmp_path / "train-%j.out"))
    cluster.wait_state(job, ("COMPLETED",))
    out = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--slurm-job", job,
                          "--json"], env=cluster.env, capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.returncode in (0, 1), out.stderr
    snap = json.loads(out.stdout)
    assert snap["job"]["id"] == job and snap["job"]["nodes"] == [cluster.node]
    assert snap["job"]["stdout"] == str(tmp_path / f"train-{job}.out")  # %j expanded
    hosts = {h["name"]: h for h in snap["hosts"]}
    assert hosts[cluster.node]["job"] == job
    found = {f["code"]: f for f in snap["job_findings"]}
    assert found["nccl-timeout"]["rank"] == 0 and found["cuda-oom"]["rank"] == 1
    assert {f["host"] for f in snap["job_findings"]} == {cluster.node}
    assert all(f["job"] == job for f in snap["job_findings"])
    # NCCL before model code: the triage order
    assert [f["step"] for f in snap["job_findings"]][:2] == ["nccl", "model"]


def test_an_unknown_job_is_one_clear_line(cluster: SlurmCluster) -> None:
    out = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--slurm-job",
                          "999999", "--json"], env=cluster.env, capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert out.returncode != 0 and out.stdout == ""
    assert "999999" in out.stderr and len(out.stderr.strip().splitlines()) == 1


# A 2-rank job launched the way Slurm users launch one: ``srun --label`` in the batch script,
# each task printing NCCL's init line (after NVIDIA/nccl#1814's ``host:pid:tid [dev] NCCL
# INFO comm … rank R nranks N cudaDev D nvmlDev D busId B … - Init COMPLETE``), then its
# failure, then staying alive as a GPU process would.  The agent's NVML is the test stand-in
# (tests/data/fake_pynvml) listing each task's real pid on GPU SLURM_PROCID, so attribution
# reads the real /proc/PID/environ that slurmstepd gave the task.
TASK_SCRIPT = (
    "#!/bin/bash\n"
    'echo $$ > "$PIDS/pid.$SLURM_PROCID"\n'
    'echo "$(hostname -s):$$:$$ [$SLURM_PROCID] NCCL INFO comm 0x55f01c18e490 rank '
    '$SLURM_PROCID nranks 2 cudaDev $SLURM_PROCID nvmlDev $SLURM_PROCID busId '
    '$((18 + SLURM_PROCID))000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE"\n'
    'if [ "$SLURM_PROCID" = 0 ]; then\n'
    f"  echo '{NCCL_LINE[3:]}'\n"
    "else\n"
    f"  echo '{OOM_LINE[3:]}'\n"
    "fi\n"
    "exec sleep 300\n")
FAKE_NVML = TEST_DATA / "fake_pynvml"


@dataclass
class RunningJob:
    job: str
    pids: dict[int, int]
    log: Path
    env: dict[str, str]
    """What rigwatch runs with: the cluster's SLURM_CONF and the stand-in NVML."""


@pytest.fixture(scope="module")
def running_job(cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[RunningJob]:
    tmp = tmp_path_factory.mktemp("job")
    task = tmp / "task.sh"
    task.write_text(TASK_SCRIPT)
    task.chmod(0o755)
    batch = tmp / "train.sh"
    batch.write_text(f"#!/bin/bash\nexport PIDS={tmp}\nsrun --label {task}\n")
    batch.chmod(0o755)
    log = tmp / "train-%j.out"
    job = cluster.sbatch(batch, "-n2", "--gres=gpu:2", "-J", "train", "-o", str(log))
    try:
        cluster.wait_state(job, ("RUNNING",))
        out = tmp / f"train-{job}.out"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                all((tmp / f"pid.{r}").exists() for r in (0, 1)) and out.exists()
                and out.read_text().count("NCCL INFO") == 2 and "OutOfMemory" in out.read_text()):
            time.sleep(0.2)
        pids = {r: int((tmp / f"pid.{r}").read_text()) for r in (0, 1)}
        env = dict(cluster.env, PYTHONPATH=str(FAKE_NVML), FAKE_NVML="",
                   FAKE_NVML_PIDS=",".join(f"{pid}@{r}" for r, pid in pids.items()),
                   HOME=str(tmp))
        yield RunningJob(job, pids, out, env)
    finally:
        with contextlib.suppress(RuntimeError):
            cluster.run("scancel", job)


def test_a_running_jobs_snapshot_places_each_rank_on_its_gpu(running_job: RunningJob,
                                                            cluster: SlurmCluster) -> None:
    out = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--slurm-job",
                          running_job.job, "--json"], env=running_job.env, capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert out.returncode in (0, 1), out.stderr
    snap = json.loads(out.stdout)
    host = next(h for h in snap["hosts"] if h["name"] == cluster.node)
    assert host["job"] == running_job.job
    procs = {p["pid"]: (g["index"], p) for g in host["sample"]["gpus"]
             for p in g["processes"] or ()}
    for rank, pid in running_job.pids.items():
        gpu, proc = procs[pid]
        # attribution read from the task's real environment, set by slurmstepd
        assert (gpu, proc["slurm_job"], proc["rank"]) == (rank, running_job.job, rank), proc
        assert proc["slurm_step"] == "0" and proc["environ"] is True
    assert [(r["rank"], r["host"], r["gpu"], r["bus_id"]) for r in snap["job"]["ranks"]] == [
        (0, cluster.node, 0, "0000:18:00.0"), (1, cluster.node, 1, "0000:19:00.0")]
    found = {f["code"]: f for f in snap["job_findings"]}
    assert (found["nccl-timeout"]["rank"], found["nccl-timeout"]["host"],
            found["nccl-timeout"]["rank_gpu"]) == (0, cluster.node, 0)
    assert (found["cuda-oom"]["rank"], found["cuda-oom"]["host"]) == (1, cluster.node)
    assert found["cuda-oom"]["placed_by"] == "process"


@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None or not RIGWATCH.exists(),
                    reason="tmux or the installed rigwatch is missing")
def test_the_console_watching_a_job_names_the_failing_ranks_host(
        running_job: RunningJob, cluster: SlurmCluster) -> None:
    """``rigwatch --slurm-job ID``: the job's node in the fleet, its log read from before
    the console started, and triage naming the rank, its host and its GPU."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in running_job.env.items()
                   if k in ("SLURM_CONF", "PYTHONPATH", "FAKE_NVML", "FAKE_NVML_PIDS", "HOME"))
    term = Tmux(140, 40)
    try:
        term.start(f"cd {REPO} && {env} TEXTUAL_ANIMATIONS=none {RIGWATCH} --slurm-job "
                   f"{running_job.job} --no-record; echo EXITED $?; sleep 30")
        term.wait_for(lambda s: cluster.node in s and f"Slurm job {running_job.job}" in s,
                      timeout=20.0)
        term.keys("t")
        # rank 1's OOM came first; rank 0 timed out waiting on it (issue #34)
        where = f"rank 1 on {cluster.node} GPU1"
        screen, _ = term.wait_for(lambda s: where in s, timeout=30.0)
        assert "cuda-oom" in screen, screen
        term.keys("r")  # the incident report names the job and the failing rank's GPU
        screen, _ = term.wait_for(lambda s: "Report written" in s, timeout=15.0)
        # the console inherited this test's XDG_DATA_HOME (tests/conftest.py sets one)
        (md,) = (Path(os.environ["XDG_DATA_HOME"]) / "rigwatch" / "reports").glob("*.md")
        text = md.read_text()
        assert f"## Slurm job {running_job.job}" in text and f"- nodes: {cluster.node}" in text
        assert f"- failing rank: rank 1 on {cluster.node} GPU1 (bus 0000:19:00.0)" in text, text
        term.keys("q")
        term.wait_for(lambda s: "EXITED 0" in s, timeout=15.0)
    finally:
        term.kill()


def test_log_path_patterns_are_expanded_as_sbatch_documents_them() -> None:
    """sbatch(1) "filename pattern": older clients print ``StdOut=`` with some left in."""
    from probes.config.slurm import expand_log_path

    job = JOB_2205
    assert expand_log_path("/logs/%x-%j.out", job) == "/logs/train-7.out"
    assert expand_log_path("/logs/%u/%N.%t.%5j.log", job) == "/logs/alice/gpu-a01.0.00007.log"
    assert expand_log_path("/logs/100%%-%J-%a.out", job) == "/logs/100%-7.batch-%a.out"
    task = replace(job, job_id="21", array_job_id="20", array_task_id="3")
    assert expand_log_path("/logs/slurm-%A_%a.out", task) == "/logs/slurm-20_3.out"
