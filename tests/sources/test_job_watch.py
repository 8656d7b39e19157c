"""A watched Slurm job is followed (issue #34 item 6; faults review scenario 8): its end,
exit code and node-list changes are passed on as ``JobChange`` items, recorded with the
hosts, and a controller that stops answering is said, never taken for the job's end.
Against a real one-node Slurm (``tests/support/slurm.py``)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.sources.job_watch import JobWatchBackend
from probes.store.codec import decode, encode
from probes.wire.events import JobChange, SessionItem
from tests.support.slurm import SlurmCluster, start_cluster
from tests.support.tui_fakes import FakeBackend


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    c = start_cluster(tmp_path_factory.mktemp("slurm-watch"))
    try:
        yield c
    finally:
        c.stop()


def test_a_jobs_end_and_a_silent_controller_are_passed_on(cluster: SlurmCluster,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsleep 3\nexit 3\n")
    script.chmod(0o755)
    job = cluster.sbatch(script, "-o", str(tmp_path / "out-%j.txt"))
    cluster.wait_state(job, ("RUNNING",))
    host = cluster.node
    seen: list[tuple[str, SessionItem]] = []
    fleet = FleetState([HostSpec(name=host)])
    watch = JobWatchBackend(FakeBackend([HostSpec(name=host)], []), job, host, poll_s=0.3,
                            nodes=(host,))

    def keep(h: str, item: SessionItem) -> None:
        seen.append((h, item))
        fleet.apply(h, item, time.time())

    async def run() -> None:
        task = asyncio.create_task(watch.run(keep))
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not any(
                isinstance(i, JobChange) and i.state == "FAILED" for _, i in seen):
            await asyncio.sleep(0.1)
        # the controller stops answering: said once, the job's last state kept
        pid = int((cluster.root / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline and not any(
                    isinstance(i, JobChange) and i.note for _, i in seen):
                await asyncio.sleep(0.2)
        finally:
            os.kill(pid, signal.SIGCONT)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    changes = [i for _, i in seen if isinstance(i, JobChange)]
    states = [c.state for c in changes]
    assert states[0] == "RUNNING" and "FAILED" in states, states
    ended = next(c for c in changes if c.state == "FAILED")
    assert ended.exit_code == "3:0" and ended.nodes == (host,)
    silent = changes[-1]
    assert silent.state == "FAILED" and silent.note and "did not tell" in silent.note
    assert all(h == host for h, _ in seen)
    assert fleet.jobs[job] == silent
    assert watch.mode_text() == f"job {job} FAILED (3:0)"
    assert decode(encode(ended)) == ended  # recorded and replayed like any item


def test_a_changed_node_list_is_said() -> None:
    from probes.config.slurm import JobStatus

    told = [JobStatus("9", "RUNNING", None, None, "u", 1000, ("a", "b"), "a,b", "a", "p",
                      None, None),
            JobStatus("9", "REQUEUED", "BeginTime", None, "u", 1000, (), "", None, "p",
                      None, None),
            JobStatus("9", "RUNNING", None, None, "u", 1000, ("a", "c"), "a,c", "a", "p",
                      None, None)]
    watch = JobWatchBackend(FakeBackend([HostSpec(name="a")], []), "9", "a",
                            poll=lambda _job: told[0], nodes=("a", "b"))
    out: list[JobChange] = []
    for status in told:
        watch._seen(lambda _h, item: out.append(item), status)  # type: ignore[arg-type]
    assert [c.state for c in out] == ["RUNNING", "REQUEUED", "RUNNING"]
    assert out[0].note is None and out[2].note and "a,c" in out[2].note
