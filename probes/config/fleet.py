"""What hosts to watch and how: host specs and the built-in demo fleet."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from enum import Enum

DEMO_SPEED = 60.0
"""Demo hosts run their scenarios one simulated minute per real second."""
DEMO_HISTORY_S = 2700.0
"""Simulated run already behind each demo host when the console starts: enough for the
leak detector's 30 min minimum, so a new user sees every scenario within seconds."""


class HostKeyChecking(str, Enum):
    """OpenSSH's StrictHostKeyChecking meanings (asyncssh has no accept-new of its own)."""

    STRICT = "strict"
    ACCEPT_NEW = "accept-new"
    OFF = "off"


class TransportName(str, Enum):
    """How the agent reaches a host: the inventory's ``transport`` word.

    ``probes.transport.TRANSPORTS`` holds one factory per member (a test keeps the two equal).
    """

    SSH = "ssh"
    """The agent over one SSH connection (the inventory's default)."""
    LOCAL = "local"
    """The agent as a subprocess of the console."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class SshOptions:
    """How to reach a host over SSH; every field may come from the inventory or ssh config."""

    address: str | None = None
    """Host name or IP to connect to; None means the host's name (or its ssh-config HostName)."""
    user: str | None = None
    port: int | None = None
    jump: tuple[str, ...] = ()
    """ProxyJump hops, outermost first, each ``[user@]host[:port]``."""
    identity: str | None = None
    """Private key file; None uses the ssh agent and the default keys."""
    ssh_config: bool = False
    """Read ``~/.ssh/config`` Host entries through asyncssh's own config support."""
    known_hosts: str | None = None
    """known_hosts file; None means ``~/.ssh/known_hosts``."""
    host_key_checking: HostKeyChecking = HostKeyChecking.STRICT
    connect_timeout_s: float = 10.0
    banner_timeout_s: float = 5.0
    """TCP connect plus the server's SSH banner, before a handshake slot is taken: a host
    that accepts TCP but never speaks SSH (a tarpit) is given up on after this long."""
    login_timeout_s: float = 30.0
    keepalive_interval_s: float = 5.0
    keepalive_count_max: int = 3


@dataclass(frozen=True)
class HostSpec:
    """One host of the fleet, as the inventory (or the demo) describes it."""

    name: str
    transport: TransportName = TransportName.LOCAL
    python: str | None = None
    """Interpreter for the agent; None means this console's own (local) or ``python3`` (ssh)."""
    interval_s: float = 1.0
    simulate: tuple[str, ...] = ()
    """Simulator scenarios; empty reads the host's real GPUs."""
    seed: int = 0
    speed: float = 1.0
    tags: tuple[str, ...] = ()
    expect_gpus: int | None = None
    logs: tuple[str, ...] = ()
    """Job logs the agent follows (read-only) for NCCL and model triage: the inventory's
    globs, and a Slurm job's own files (those also in ``job_logs``)."""
    job_logs: tuple[str, ...] = ()
    """Those of ``logs`` that a job named (its StdOut/StdErr): literal paths, never globbed,
    followed only as regular files owned by ``job_log_owner`` (never through a symlink)."""
    job_log_owner: int | None = None
    """The uid the files of ``job_logs`` must belong to (the job's user)."""
    log_lookback_bytes: int = 0
    """How much of a log already there at start the agent reads first (0: from its end);
    a Slurm job's own log is read from up to ``JOB_LOG_LOOKBACK`` before its end."""
    datasets: tuple[str, ...] = ()
    """Paths whose device and free space the preflight checks (the training data's home)."""
    ssh: SshOptions = field(default_factory=SshOptions)
    extra_args: tuple[str, ...] = field(default=())
    slurm_node: str | None = None
    """The host's Slurm node name where it differs from ``name`` (``slurm_node:`` in the
    inventory); a drain or resume from the console acts on this node."""

    def __post_init__(self) -> None:
        # A spec written by hand (a script, a test) may say "ssh": compare by member anyway.
        object.__setattr__(self, "transport", TransportName(self.transport))

    def agent_args(self, once: bool = False, kernel_after: str | None = None) -> list[str]:
        """Command-line arguments for the agent on this host.

        ``kernel_after`` is the journal cursor of the last kernel line already received: a
        reconnect starts after it instead of sending the look-back again.
        """
        args = ["--interval", f"{self.interval_s:g}"]
        # Values written by people or hosts go as ``--option=VALUE``: argparse would read a
        # separate word that starts with "-" (a log glob "--once") as an option instead.
        if kernel_after:
            args.append("--kernel-after-cursor=" + kernel_after)
        if self.simulate:
            args += ["--simulate", ",".join(self.simulate), "--seed", str(self.seed),
                     "--speed", f"{self.speed:g}", "--hostname=" + self.name]
        literal = set(self.job_logs)
        args += ["--tail=" + pattern for pattern in self.logs if pattern not in literal]
        args += ["--job-log=" + path for path in self.job_logs]
        if self.job_logs and self.job_log_owner is not None:
            args.append(f"--job-log-owner={self.job_log_owner}")
        if self.logs and self.log_lookback_bytes:
            args.append(f"--tail-lookback={self.log_lookback_bytes}")
        args += ["--dataset=" + path for path in self.datasets]
        if once:
            args.append("--once")
        args += list(self.extra_args)
        return args


def demo_fleet(speed: float = DEMO_SPEED,
               history_s: float = DEMO_HISTORY_S) -> list[HostSpec]:
    """Eight simulated 8-GPU hosts, each showing one kind of trouble (or none).

    ``history_s`` simulated seconds of each run are sent at once when it starts.
    """
    plan = [
        ("gpu-a01", ("healthy",), "rack-a"),
        ("gpu-a02", ("leak:3",), "rack-a"),
        ("gpu-a03", ("throttle:5", "train"), "rack-a"),
        ("gpu-a04", ("link-downgrade:2",), "rack-a"),
        # an older driver stack than the rest: preflight's odd one out
        ("gpu-b01", ("disk-saturated", "driver-skew"), "rack-b"),
        ("gpu-b02", ("xid79:6@600",), "rack-b"),
        # job 48207 (not gpu-b02's 48206): a collective hangs from 900 s, every GPU spinning
        # at 100 % and idle power, until the 600 s watchdog fires; no rank failed first
        ("gpu-b03", ("nccl-timeout@1500",), "rack-b"),
        ("gpu-b04", ("low-ram",), "rack-b"),  # runs fine, fails preflight on memory
    ]
    return [
        HostSpec(name=name, simulate=scen, seed=i + 1, speed=speed, tags=(tag,), expect_gpus=8,
                 extra_args=("--sim-history", f"{history_s:g}") if history_s else ())
        for i, (name, scen, tag) in enumerate(plan)
    ]


def local_has_nvidia_gpu() -> bool:
    """True when this machine shows an NVIDIA driver with at least one GPU."""
    try:
        if os.listdir("/proc/driver/nvidia/gpus"):
            return True
    except OSError:
        pass
    return shutil.which("nvidia-smi") is not None and os.path.exists("/dev/nvidiactl")


def localhost_spec() -> HostSpec:
    """The local machine, read for real."""
    return HostSpec(name=os.uname().nodename or "localhost")
