"""The true first failure across ranks and nodes, on a real four-node Slurm (issue #34).

``tests/support/slurm.py`` starts Debian's Slurm 22.05 with four nodes ``n1`` … ``n4`` on this
machine (``slurmd -N``).  A job of 8 tasks (2 per node, ``srun --label``) writes what a failing
``torchrun`` job writes: every rank its NCCL ``Init COMPLETE`` line (hostname:pid:tid, rank,
nranks, cudaDev, busId, commId; after NVIDIA/nccl#1814), then rank 5 on ``n3`` fails first —
a CUDA OOM traceback (``[rank5]:`` marks, after pytorch/pytorch#75087 and vllm#28028), or, in
the second shape, its GPU falls off the bus (an Xid 79 on ``n3`` GPU1) and the rank dies
silently — and the seven others then print torch's NCCL watchdog timeout (glog header with
the time, ``WorkNCCL(SeqNum=…, Timeout(ms)=5000) ran for … milliseconds``, as
``ProcessGroupNCCL.cpp`` prints it with a 5 s ``timeout=`` given to ``init_process_group``).

Each node is watched by its own agent (local transport, a simulated H100 host whose GPU
processes carry no job: the agent could not read their environment), so where the ranks run
comes from the job's log: NCCL's init lines place rank 5 on ``n3`` GPU1 (bus 0000:2a:00.0).
Every surface must name that rank, that node and that GPU as the first failure, and send the
operator there: the console's triage, ``:job N``, the report, ``snapshot --slurm-job``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.analysis.job_watch import JobWatch
from probes.config.inventory import load_inventory
from probes.config.slurm import job_specs, query_job
from probes.sources.agents import AgentFleetBackend
from tests.support.paths import REPO
from tests.support.slurm import SlurmCluster, start_cluster
from tests.support.tui_fakes import wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.screens.job import JobScreen
from tui.screens.triage import TriageScreen
from widgets.first_failure import FirstFailureBanner

CULPRIT = 5
"""Rank 5: the second task of the third node (block layout, 2 tasks a node)."""
CULPRIT_NODE, CULPRIT_GPU, CULPRIT_BUS = "n3", 1, "0000:2a:00.0"

TASK = r"""#!/bin/bash
r=$SLURM_PROCID; l=$SLURM_LOCALID; node=$SLURMD_NODENAME
bus=(18000 2a000)
init="NCCL INFO comm 0x55f01c18e490 rank $r nranks 8 cudaDev $l nvmlDev $l"
echo "$node:$$:$$ [$l] $init busId ${bus[$l]} commId 0x5ae77eb5ea4ec1ee - Init COMPLETE"
sleep "$FAIL_AFTER"
if [ "$r" = "$CULPRIT" ]; then
  if [ "$MODE" = oom ]; then
    echo "[rank$r]: Traceback (most recent call last):"
    echo "[rank$r]:   File \"/workspace/train.py\", line 212, in <module>"
    echo "[rank$r]:     loss = model(batch).loss"
    oom="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    oom="$oom GPU $l has a total capacity of 79.10 GiB of which 1.06 GiB is free."
    oom="$oom Including non-PyTorch memory, this process has 78.02 GiB memory in use."
    echo "[rank$r]: $oom"
  fi
  exit 1
fi
sleep "$WAIT_AFTER"
glog="[E$(date -u '+%m%d %H:%M:%S.%6N') $$ ProcessGroupNCCL.cpp:1182]"
work="WorkNCCL(SeqNum=81, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576,"
work="$work Timeout(ms)=5000) ran for 5012 milliseconds before timing out."
echo "[rank$r]:$glog [Rank $r] Watchdog caught collective operation timeout: $work"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    c = start_cluster(tmp_path_factory.mktemp("slurm4"), nodes=4)
    try:
        yield c
    finally:
        c.stop()


def submit(cluster: SlurmCluster, tmp: Path, mode: str, fail_after: float,
           wait_after: float) -> tuple[str, Path]:
    """The 8-rank job; its id and its log (``-o``)."""
    task = tmp / "task.sh"
    task.write_text(TASK)
    task.chmod(0o755)
    batch = tmp / "train.sh"
    batch.write_text(f"#!/bin/bash\nexport MODE={mode} CULPRIT={CULPRIT} "
                     f"FAIL_AFTER={fail_after} WAIT_AFTER={wait_after}\n"
                     f"srun --label {task}\n")
    batch.chmod(0o755)
    job = cluster.sbatch(batch, "-N", "4", "--ntasks-per-node=2", "--gres=gpu:2", "-J",
                         f"train-{mode}", "-o", str(tmp / "train-%j.out"))
    return job, tmp / f"train-{job}.out"


def inventory(tmp: Path, scenarios: dict[str, str]) -> Path:
    """n1 … n4 as simulated hosts read through the local transport, each with an agent."""
    lines = ["hosts:"]
    for node in ("n1", "n2", "n3", "n4"):
        sim = scenarios.get(node, "no-environ")
        lines += [f"  - name: {node}", "    transport: local", f"    python: {sys.executable}",
                  f"    simulate: [{sim}]", "    expect_gpus: 8"]
    path = tmp / "inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def wait_lines(log: Path, needle: str, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(needle) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{log}: fewer than {count} × {needle!r}")


def test_snapshot_of_a_job_names_the_rank_that_ran_out_of_memory_first(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    job, log = submit(cluster, tmp_path, "oom", 1.0, 2.0)
    cluster.wait_state(job, ("FAILED", "COMPLETED"))
    wait_lines(log, "Watchdog caught", 7)
    inv = inventory(tmp_path, {})
    out = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--slurm-job", job,
                          "--inventory", str(inv), "--json"], env=cluster.env, cwd=REPO,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode in (0, 1), out.stderr
    snap = json.loads(out.stdout)
    assert snap["job"]["nodes"] == ["n1", "n2", "n3", "n4"]
    assert (snap["job"]["num_tasks"], snap["job"]["cpus_per_task"]) == (8, 1)
    first = snap["first_failure"]
    assert first is not None, snap["job_findings"]
    assert (first["code"], first["rank"], first["host"], first["gpu"], first["bus_id"]) == (
        "cuda-oom", CULPRIT, CULPRIT_NODE, CULPRIT_GPU, CULPRIT_BUS), first
    assert first["job"] == job and first["clock"] in ("line", "order", "read")
    assert sorted(first["waiting_ranks"]) == [r for r in range(8) if r != CULPRIT]
    assert CULPRIT_NODE in snap["do_now"] and "GPU1" in snap["do_now"], snap["do_now"]
    # every rank placed by NCCL's init lines, on its node's GPU by bus id
    ranks = {r["rank"]: (r["host"], r["gpu"]) for r in snap["job"]["ranks"]}
    assert ranks == {r: (f"n{r // 2 + 1}", r % 2) for r in range(8)}


async def _console(job: str, inv: Path, env: dict[str, str], reports: Path,
                   until: float = 90.0) -> dict[str, object]:
    """The console on the job (as ``rigwatch --slurm-job ID --inventory INV``): what its
    triage, ``:job`` and report name as the first failure."""
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    slurm_job = query_job(job)
    specs = job_specs(slurm_job, list(load_inventory(inv).hosts), "bastion")
    backend = AgentFleetBackend(specs)
    app = make_app(backend, ConsoleOptions(demo=False, title=f"Slurm job {job}",
                                           job_watch=JobWatch.of(job, (s.name for s in specs))))
    seen: dict[str, object] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        def culprit_named() -> bool:
            first = app.fleet.diagnosis(watch=app.job_watch).first
            return (first is not None and first.culprit is not None
                    and first.culprit.host == CULPRIT_NODE and len(first.waiting) == 7)

        await wait_until(pilot, culprit_named, timeout_s=until)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen)
                         and app.screen.query_one(FirstFailureBanner).first is not None)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        banner = screen.query_one(FirstFailureBanner).first
        seen["triage"] = banner
        screen.reports = reports
        screen.action_report()
        seen["report"] = screen.last_report
        await pilot.press("escape")
        app.run_command(f"job {job}")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen)
                         and app.screen.picture is not None)
        job_screen = app.screen
        assert isinstance(job_screen, JobScreen) and job_screen.picture is not None
        seen["job"] = job_screen.picture
        await pilot.press("q")
    return seen


def _names_the_culprit(first: object, code: str, xid: int | None = None) -> None:
    from probes.analysis.first_failure import FirstFailure

    assert isinstance(first, FirstFailure), first
    assert str(first.finding.code) == code and first.finding.xid == xid, first.finding
    c = first.culprit
    assert c is not None and (c.rank, c.host, c.gpu, c.bus_id) == (
        CULPRIT, CULPRIT_NODE, CULPRIT_GPU, CULPRIT_BUS), c
    assert CULPRIT_NODE in first.do_now, first.do_now


def test_console_triage_job_view_and_report_agree_on_the_culprit(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    job, log = submit(cluster, tmp_path, "oom", 1.0, 2.0)
    cluster.wait_state(job, ("FAILED", "COMPLETED"))
    wait_lines(log, "Watchdog caught", 7)
    seen = asyncio.run(_console(job, inventory(tmp_path, {}), cluster.env, tmp_path / "rep"))
    _names_the_culprit(seen["triage"], "cuda-oom")
    picture = seen["job"]
    from tui.views.job_view import JobPicture

    assert isinstance(picture, JobPicture)
    _names_the_culprit(picture.first, "cuda-oom")
    assert set(picture.hosts) >= {"n1", "n2", "n3", "n4"}
    assert picture.ranks == 8
    report = seen["report"]
    assert isinstance(report, Path)
    doc = json.loads(report.with_suffix(".json").read_text())
    assert (doc["first_failure"]["code"], doc["first_failure"]["rank"],
            doc["first_failure"]["host"], doc["first_failure"]["bus_id"]) == (
        "cuda-oom", CULPRIT, CULPRIT_NODE, CULPRIT_BUS)
    (section,) = [j for j in doc["jobs"] if j["job"] == job]
    assert section["first_failure"]["rank"] == CULPRIT
    text = report.read_text()
    assert f"- failing rank: rank {CULPRIT} on {CULPRIT_NODE} GPU{CULPRIT_GPU} (serial " \
        in text and f"bus {CULPRIT_BUS}): `cuda-oom`" in text, text


def test_an_xid_under_a_rank_is_the_first_failure_of_its_job(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    """n3's GPU1 falls off the bus 12 s after its agent starts; rank 5 on it dies without a
    word, the others time out 5 s after their collective began, from 30 s on."""
    inv = inventory(tmp_path, {"n3": "no-environ,xid79:1@12"})
    job, _ = submit(cluster, tmp_path, "xid", 14.0, 16.0)
    cluster.wait_state(job, ("RUNNING",))

    async def run() -> dict[str, object]:
        return await _console(job, inv, cluster.env, tmp_path / "rep", until=120.0)

    seen = asyncio.run(run())
    _names_the_culprit(seen["triage"], "xid", 79)
    from tui.views.job_view import JobPicture

    picture = seen["job"]
    assert isinstance(picture, JobPicture)
    _names_the_culprit(picture.first, "xid", 79)
    assert seen["triage"].do_now.startswith(f"drain {CULPRIT_NODE}")  # type: ignore[attr-defined]
