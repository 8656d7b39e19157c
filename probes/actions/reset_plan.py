"""A GPU reset, as a plan an operator reads: never an action rigwatch takes.

For a GPU that was lost or fell off the bus (Xid 79), NVIDIA's catalog says restart the
machine (RESTART_BM); a reset (``nvidia-smi --gpu-reset``) is what an operator may try first,
and only when nothing holds the device.  The plan lists each precondition with what rigwatch
last saw of it (met, not met, or unknown) and the command that checks it on the host, then
the reset command itself.  rigwatch runs none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from probes.actions.evidence import Evidence
from probes.triage import Code
from probes.wire.samples import GpuInfo, GpuSample

PlanStatus = Literal["met", "not met", "unknown"]
RESET_CODES = frozenset({Code.GPU_LOST, Code.GPU_FALLEN_OFF_BUS})
RESET_XIDS = frozenset({79})


@dataclass(frozen=True)
class Precondition:
    """One thing that must hold before the reset."""

    need: str
    status: PlanStatus
    check: str
    """The command that tells, on the host."""

    def line(self) -> str:
        """``[met] no process uses the GPU — check: nvidia-smi …``."""
        return f"[{self.status}] {self.need} — check: {self.check}"


@dataclass(frozen=True)
class ResetPlan:
    """What an operator would do to reset one GPU, and what must hold first."""

    host: str
    gpu: int
    target: str
    """``-i`` for nvidia-smi: the bus id when known, else the index."""
    preconditions: tuple[Precondition, ...]
    command: str
    advice: str

    def lines(self) -> list[str]:
        """The plan as the console and the CLI show it."""
        return [f"GPU reset of {self.host} GPU{self.gpu}: a plan — rigwatch never runs it",
                *(f"  {p.line()}" for p in self.preconditions),
                f"  then, on {self.host} as root: {self.command}",
                f"  {self.advice}"]


def wants_reset_plan(evidence: Evidence | None) -> bool:
    """A lost GPU, or one that fell off the bus (Xid 79)."""
    return evidence is not None and evidence.gpu is not None and evidence.gpu >= 0 and (
        evidence.code in RESET_CODES or evidence.xid in RESET_XIDS)


def _status(ok: bool | None) -> PlanStatus:
    return "unknown" if ok is None else "met" if ok else "not met"


def reset_plan(evidence: Evidence | None, node: str, info: GpuInfo | None = None,
               sample: GpuSample | None = None,
               drained: bool | None = None) -> ResetPlan | None:
    """The plan for the evidence's GPU, None when the evidence is not a lost GPU.

    Args:
        evidence: the drain's finding.
        node: the host's Slurm node.
        info: the GPU as the host's hello listed it (persistence and MIG mode).
        sample: the GPU's newest sample (its processes), None when not seen.
        drained: whether Slurm shows the node drained, None when not read.
    """
    if evidence is None or not wants_reset_plan(evidence) or evidence.gpu is None:
        return None
    gpu = evidence.gpu
    host = evidence.host or node
    target = evidence.bus_id or (info.bus_id if info is not None else None) or str(gpu)
    procs = sample.processes if sample is not None else None
    busy = None if procs is None else bool(procs)
    pids = ", ".join(str(p.pid) for p in procs or () if p.pid is not None)
    persist = info.persistence_mode if info is not None else None
    mig = info.mig_mode if info is not None else None
    pre = (
        Precondition(f"node {node} drained first, so no job starts on it",
                     _status(drained), f"sinfo -N -n {node} -o %T"),
        Precondition("no process uses the GPU" + (f" (seen: pid {pids})" if pids else ""),
                     _status(None if busy is None else not busy),
                     f"nvidia-smi --query-compute-apps=pid,process_name --format=csv -i "
                     f"{target}; fuser -v /dev/nvidia*"),
        Precondition("persistence mode off (nvidia-persistenced holds the device open)",
                     _status(None if persist is None else not persist),
                     f"nvidia-smi -i {target} --query-gpu=persistence_mode --format=csv"),
        Precondition("not in MIG mode (destroy its instances first)",
                     _status(None if mig is None else not mig),
                     f"nvidia-smi -i {target} --query-gpu=mig.mode.current --format=csv"),
        Precondition("no daemon holds the device: DCGM (nv-hostengine), IMEX (nvidia-imex), "
                     "Fabric Manager as its guide requires for NVSwitch systems",
                     "unknown", "systemctl is-active nvidia-dcgm nvidia-imex "
                     "nvidia-fabricmanager; fuser -v /dev/nvidia*"),
    )
    advice = ("NVIDIA's action for Xid 79 is a machine restart (RESTART_BM): a GPU that fell "
              "off the bus rarely answers a reset; if it recurs after the restart, RMA it")
    return ResetPlan(host, gpu, target, pre, f"nvidia-smi --gpu-reset -i {target}", advice)
