"""``rigwatch snapshot --slurm-job ID`` against a real one-node Slurm (issue #21 items 3, 6).

The cluster is ``tests/support/slurm.py``'s: Debian's munged, slurmctld and slurmd run as
root on 127.0.0.1.  A batch job writes what a failing 2-rank PyTorch job writes (srun
``--label`` prefixes, torch's ``[rankN]:`` marks, an NCCL watchdog timeout on rank 0 and a
CUDA OOM on rank 1, after vllm-project/vllm#28028 and pytorch/pytorch#75087) into its
``--output``; rigwatch asks ``scontrol`` for the job, watches its node, and reads the log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.config.hostlist import expand_hostlist
from probes.config.slurm import SlurmError, job_specs, parse_show_job, query_job
from tests.support.slurm import SlurmCluster, start_cluster

NCCL_LINE = (
    "0: [rank0]:[E1103 23:14:03.342459398 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, NumelIn=1048576, "
    "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
OOM_LINE = (
    "1: [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.")
JOB_SCRIPT = f"#!/bin/bash\necho '{NCCL_LINE}'\necho '{OOM_LINE}'\n"

# `scontrol show job` as Slurm 22.05.8 (Debian 12) printed it for a finished batch job here.
SHOW_JOB_2205 = """JobId=7 JobName=train
   UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=gpu-a[01-02],gpu-b07
   BatchHost=gpu-a01
   NumNodes=3 NumCPUs=6 NumTasks=16 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   Command=/home/alice/train.sh
   WorkDir=/home/alice
   StdErr=/home/alice/logs/train-7.err
   StdIn=/dev/null
   StdOut=/home/alice/logs/train-7.out
   TresPerNode=gres:gpu:8
"""


def test_scontrol_text_is_read_whole() -> None:
    job = parse_show_job(SHOW_JOB_2205)
    assert job.job_id == "7" and job.name == "train" and job.user == "alice"
    assert job.state == "RUNNING" and job.batch_host == "gpu-a01"
    assert job.nodes == ("gpu-a01", "gpu-a02", "gpu-b07")
    assert job.stdout == "/home/alice/logs/train-7.out"
    assert job.stderr == "/home/alice/logs/train-7.err"
    specs = job_specs(job, [], here="bastion")
    assert [s.name for s in specs] == ["gpu-a01", "gpu-a02", "gpu-b07"]
    assert specs[0].logs == (job.stdout, job.stderr) and specs[1].logs == ()
    with pytest.raises(SlurmError):
        parse_show_job("slurm_load_jobs error: Invalid job id specified")
    with pytest.raises(SlurmError):
        query_job("7; rm -rf /")


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
                         timeout=120, cwd=Path(__file__).resolve().parents[1])
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
                         text=True, timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode != 0 and out.stdout == ""
    assert "999999" in out.stderr and len(out.stderr.strip().splitlines()) == 1
