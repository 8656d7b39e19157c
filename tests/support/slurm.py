"""A real Slurm cluster for tests: munged, slurmctld and slurmd from Debian's packages, run
as root on 127.0.0.1 with their own key, socket, ports and spool in a temp dir.  One node
named as this machine, or ``nodes`` of them (``n1`` … ``nN``, one ``slurmd -N`` each on its
own port, all on this machine: a task tells its node by ``SLURMD_NODENAME``), after
``shared/NOTES.md``'s four-node recipe.

Config after ``shared/reviews/ecosystem.md`` §2c (checked with Debian 12's Slurm 22.05):
``proctrack/linuxproc``, ``task/none``, no accounting, ``Gres=gpu:8`` backed by eight plain
files.  Anything missing or refusing to start raises ``SlurmUnavailable`` with the reason
(the test fails with it; it is never skipped quietly).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.sshd import free_port

BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")


class SlurmUnavailable(RuntimeError):
    """The cluster could not be started; the message says why."""


@dataclass
class SlurmCluster:
    root: Path
    node: str
    env: dict[str, str]
    nodes: tuple[str, ...] = ()
    """Every node's name (``(node,)`` for a one-node cluster)."""

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = (self.node,)

    def run(self, *argv: str, timeout: float = 30.0) -> str:
        out = subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                             timeout=timeout, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {out.stderr.strip() or out.stdout.strip()}")
        return out.stdout

    def sbatch(self, script: Path, *opts: str) -> str:
        """Submit ``script``; its job id."""
        out = self.run("sbatch", "--parsable", *opts, str(script))
        return out.strip().split(";")[0]

    def wait_state(self, job: str, states: tuple[str, ...], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            text = self.run("scontrol", "show", "job", job)
            state = text.split("JobState=", 1)[1].split()[0] if "JobState=" in text else ""
            if state in states:
                return state
            time.sleep(0.3)
        raise SlurmUnavailable(f"job {job} stayed {state or 'unknown'}: {self.log_tail()}")

    def log_tail(self) -> str:
        lines = []
        names = ["slurmctld.log", "slurmd.log", *(f"slurmd-{n}.log" for n in self.nodes)]
        for name in names:
            p = self.root / "log" / name
            if p.exists():
                lines += [f"{name}: {x}" for x in p.read_text(errors="replace").splitlines()[-5:]]
        return " | ".join(lines)

    def stop(self) -> None:
        """Cancel the jobs, then stop the daemons: slurmd outlives a SIGTERM while a job's
        steps run, and a test's sleeping job outlived the test run."""
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            jobs = self.run("squeue", "-h", "-o", "%i", timeout=10.0).split()
            if jobs:
                self.run("scancel", *jobs, timeout=10.0)
            deadline = time.monotonic() + 10.0  # until slurmd has ended their steps
            while jobs and time.monotonic() < deadline:
                time.sleep(0.2)
                jobs = self.run("squeue", "-h", "-o", "%i", timeout=10.0).split()
        pids = []
        slurmds = ["slurmd.pid", *(f"slurmd-{n}.pid" for n in self.nodes)]
        for pidfile in (*slurmds, "slurmctld.pid", "munged.pid"):
            with contextlib.suppress(OSError, ValueError):
                pid = int((self.root / pidfile).read_text().strip())
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
        deadline = time.monotonic() + 5.0
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.1)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _free_ports(n: int) -> str:
    """``P`` for one node, else ``P-Q``: ``n`` consecutive free ports (slurmd -N each takes
    the next of the range)."""
    if n == 1:
        return str(free_port())
    for _ in range(50):
        base = free_port()
        if base + n < 65536 and all(_port_free(base + i) for i in range(1, n)):
            return f"{base}-{base + n - 1}"
    raise SlurmUnavailable(f"no {n} consecutive free ports")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _range(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"n[1-{len(names)}]"


def _node_lines(names: tuple[str, ...], host: str, cpus: int, ports: str) -> str:
    if len(names) == 1:
        return (f"NodeName={names[0]} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 "
                "Gres=gpu:8 State=UNKNOWN")
    return (f"NodeName={_range(names)} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports} "
            "CPUs=2 RealMemory=1000 Gres=gpu:8 State=UNKNOWN")


def start_cluster(root: Path, nodes: int = 1) -> SlurmCluster:
    """Start munged, slurmctld and slurmd under ``root``; wait until every node is idle.

    ``nodes`` > 1 starts that many nodes ``n1`` … on this machine (``slurmd -N``), each
    with 2 CPUs and 8 GPUs (plain files) of its own.
    """
    missing = [b for b in BINARIES if shutil.which(b) is None and
               not Path("/usr/sbin", b).exists()]
    if missing:
        raise SlurmUnavailable("not installed: " + ", ".join(missing) +
                               " (apt-get install slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("the test cluster runs its daemons as root")
    host = socket.gethostname().split(".", 1)[0]
    names = (host,) if nodes == 1 else tuple(f"n{i}" for i in range(1, nodes + 1))
    node = names[0]
    for d in ("state", "spool", "log", "gpu"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for n in names:
        (root / "spool" / n).mkdir(exist_ok=True)
    for i in range(8):
        (root / "gpu" / f"nvidia{i}").touch()
    sock = root / "munge.sock"
    cpus = os.cpu_count() or 1
    ctld, slurmd_port = free_port(), _free_ports(nodes)
    (root / "slurm.conf").write_text(f"""\
ClusterName=rwtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool{"/%n" if nodes > 1 else ""}
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd{"-%n" if nodes > 1 else ""}.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd{"-%n" if nodes > 1 else ""}.log
SlurmctldPort={ctld}
SlurmdPort={slurmd_port.split("-")[0]}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
ReturnToService=2
{_node_lines(names, host, cpus, slurmd_port)}
PartitionName=gpu Nodes={_range(names)} Default=YES MaxTime=INFINITE State=UP
""")
    (root / "gres.conf").write_text(
        f"NodeName={_range(names)} Name=gpu File={root}/gpu/nvidia[0-7]\n")
    env = dict(os.environ, SLURM_CONF=str(root / "slurm.conf"))
    key = root / "munge.key"

    def daemon(*argv: str) -> None:
        out = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30,
                             check=False)
        if out.returncode != 0:
            raise SlurmUnavailable(f"{argv[0]} did not start: "
                                   f"{(out.stderr or out.stdout).strip()[-300:]}")

    daemon("mungekey", "-c", "-k", str(key))
    key.chmod(0o600)
    daemon("munged", "--force", f"--socket={sock}", f"--key-file={key}",
           f"--pid-file={root}/munged.pid", f"--log-file={root}/log/munged.log",
           f"--seed-file={root}/munge.seed")
    cluster = SlurmCluster(root, node, env, names)
    daemon("slurmctld")
    if nodes == 1:
        daemon("slurmd")
    else:
        for n in names:
            daemon("slurmd", "-N", n)
    deadline = time.monotonic() + 30
    state = ""
    while time.monotonic() < deadline:
        try:
            state = cluster.run("sinfo", "-h", "-N", "-o", "%t").strip()
        except RuntimeError:
            state = ""
        told = state.split()
        if len(told) == nodes and all(t.startswith("idle") for t in told):
            return cluster
        time.sleep(0.3)
    cluster.stop()
    raise SlurmUnavailable(f"the node never became idle ({state!r}): {cluster.log_tail()}")
