"""What hosts to watch and how: host specs and the built-in demo fleet."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

DEMO_SPEED = 60.0
"""Demo hosts run their scenarios one simulated minute per real second."""


@dataclass(frozen=True)
class HostSpec:
    """One host of the fleet, as the inventory (or the demo) describes it."""

    name: str
    transport: str = "local"
    """``local`` runs the agent as a subprocess here; ``ssh`` arrives with the fleet issue."""
    python: str | None = None
    """Interpreter for the agent; None means this console's own for local hosts."""
    interval_s: float = 1.0
    simulate: tuple[str, ...] = ()
    """Simulator scenarios; empty reads the host's real GPUs."""
    seed: int = 0
    speed: float = 1.0
    tags: tuple[str, ...] = ()
    expect_gpus: int | None = None
    extra_args: tuple[str, ...] = field(default=())

    def agent_args(self, once: bool = False) -> list[str]:
        """Command-line arguments for the agent on this host."""
        args = ["--interval", f"{self.interval_s:g}"]
        if self.simulate:
            args += ["--simulate", ",".join(self.simulate), "--seed", str(self.seed),
                     "--speed", f"{self.speed:g}", "--hostname", self.name]
        if once:
            args.append("--once")
        args += list(self.extra_args)
        return args


def demo_fleet(speed: float = DEMO_SPEED) -> list[HostSpec]:
    """Eight simulated 8-GPU hosts, each showing one kind of trouble (or none)."""
    plan = [
        ("gpu-a01", ("healthy",), "rack-a"),
        ("gpu-a02", ("leak:3",), "rack-a"),
        ("gpu-a03", ("throttle:5",), "rack-a"),
        ("gpu-a04", ("link-downgrade:2",), "rack-a"),
        ("gpu-b01", ("disk-saturated",), "rack-b"),
        ("gpu-b02", ("xid79:6@600",), "rack-b"),
        ("gpu-b03", ("nccl-timeout@900",), "rack-b"),
        ("gpu-b04", ("healthy",), "rack-b"),
    ]
    return [
        HostSpec(name=name, simulate=scen, seed=i + 1, speed=speed, tags=(tag,), expect_gpus=8)
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
