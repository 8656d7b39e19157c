"""Which job, container or rank a GPU process works for (issue #21 item 1), read by the agent
from ``/proc/PID/cgroup`` and a whitelist of ``/proc/PID/environ``.

The fixture trees under ``tests/fixtures/proc/`` are shaped after the layouts documented by
their projects: Slurm's cgroup v1 guide (slurm.schedmd.com/cgroups.html:
``/sys/fs/cgroup/memory/slurm/uid_%u/job_%j/step_%s/task_%t``) and cgroup v2 guide
(slurm.schedmd.com/cgroup_v2.html: ``system.slice/slurmstepd.scope/job_%j/step_%s/user/
task_%t``, with a NodeName prefix when several slurmd share a machine); Docker's runtime
metrics page (docs.docker.com: ``/docker/<long id>`` under cgroupfs, ``docker-<id>.scope``
under systemd); Kubernetes' cgroup drivers (kubernetes.io: ``kubepods/<qos>/pod<uid>/<id>``
under cgroupfs, ``kubepods-<qos>-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope``
or ``crio-<id>.scope`` under systemd); rootless Podman's ``user@.service`` slice
(``libpod-<id>.scope``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.agent.attribution import ENV_WHITELIST, attribute, from_environ
from tests.support.paths import TEST_FIXTURES

PROC = TEST_FIXTURES / "proc"
C1 = "3f1c2a9d8e7b"
C2 = "9b2e4f6a8c0d"
POD = "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"


@pytest.mark.parametrize(("case", "pid", "want"), [
    ("slurm-v1", 4242, {"slurm_job": "48211", "slurm_step": "0", "slurm_task": 1, "rank": 9,
                        "local_rank": 1, "world_size": 16, "master_addr": "gpu-a01",
                        "cuda_visible_devices": "0,1,2,3,4,5,6,7", "environ": True}),
    ("slurm-v2", 5151, {"slurm_job": "48212", "slurm_step": "batch", "slurm_task": 0,
                        "rank": 0, "world_size": 2, "environ": True}),
    ("slurm-v2-multi", 5152, {"slurm_job": "48213", "slurm_step": "3", "slurm_task": 2,
                              "environ": False}),
    ("docker-v1", 6161, {"container": C1, "runtime": "docker", "rank": 3, "environ": True}),
    ("docker-v2", 6162, {"container": C1, "runtime": "docker", "environ": False}),
    ("k8s-containerd-v2", 7171, {"container": C2, "runtime": "containerd", "pod": POD,
                                 "environ": False}),
    ("k8s-cgroupfs-v1", 7172, {"container": C2, "runtime": "cri", "pod": POD,
                               "environ": False}),
    ("k8s-crio-v2", 7173, {"container": C2, "runtime": "cri-o", "pod": POD, "environ": False}),
    ("podman-v2", 8181, {"container": C1, "runtime": "podman", "environ": False}),
    ("plain", 9191, {"environ": True}),
    ("unreadable", 9292, {"slurm_job": "48214", "slurm_step": "0", "slurm_task": 5,
                          "environ": False}),
])
def test_each_layout_names_its_job_container_and_rank(case: str, pid: int,
                                                      want: dict[str, object]) -> None:
    assert attribute(pid, str(PROC / case)) == want


def test_nothing_but_the_whitelist_is_read_from_the_environment() -> None:
    got = from_environ(b"AWS_SECRET_ACCESS_KEY=hunter2\0HOME=/root\0RANK=2\0"
                       b"PASSWORD=x\0SLURM_JOB_ID=7\0")
    assert got == {"slurm_job": "7", "rank": 2}
    assert "hunter2" not in repr(attribute(4242, str(PROC / "slurm-v1")))
    assert "do-not-send" not in repr(attribute(4242, str(PROC / "slurm-v1")))
    assert set(ENV_WHITELIST) == {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID",
                                  "SLURM_LOCALID", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                  "MASTER_ADDR", "CUDA_VISIBLE_DEVICES"}


def test_the_cgroup_wins_over_a_job_id_the_process_set_itself(tmp_path: Path) -> None:
    d = tmp_path / "77"
    d.mkdir()
    (d / "cgroup").write_text("0::/system.slice/slurmstepd.scope/job_100/step_0/user/task_0\n")
    (d / "environ").write_bytes(b"SLURM_JOB_ID=999\0RANK=notanumber\0")
    assert attribute(77, str(tmp_path)) == {"slurm_job": "100", "slurm_step": "0",
                                            "slurm_task": 0, "environ": True}


def test_a_gone_process_a_bad_pid_and_odd_values_are_nothing(tmp_path: Path) -> None:
    assert attribute(123456, str(tmp_path)) == {}
    assert attribute(None, str(tmp_path)) == {}  # type: ignore[arg-type]
    assert attribute(-1, str(tmp_path)) == {}
    d = tmp_path / "5"
    d.mkdir()
    (d / "cgroup").write_bytes(b"0::/job_12x/step_/\xff\xfe\n")
    (d / "environ").write_bytes(b"MASTER_ADDR=" + b"a" * 5000 + b"\0\xff=\xfe\0RANK")
    got = attribute(5, str(tmp_path))
    assert got["environ"] is True and "slurm_job" not in got
    assert len(got["master_addr"]) == 256


def test_the_agent_reads_this_machines_own_processes() -> None:
    """On the real /proc, this test's own process: readable environ, whatever its cgroup."""
    import os
    got = attribute(os.getpid())
    assert got.get("environ") is True
