"""The one thing to do now about an incident's root, in one line, naming host and GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from probes.analysis.findings import Finding
from probes.analysis.job_ranks import rank_where
from probes.analysis.onsets import CAUSE_STEPS
from probes.triage import Code, Step

if TYPE_CHECKING:
    from probes.analysis.first_failure import Culprit

TRACE_HINT = ("set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 (the "
              "flight recorder names the rank that never joined) and NCCL_DEBUG=INFO")

_RESET_XIDS = frozenset({48, 63, 64, 92, 94, 95})
"""Memory faults a GPU reset clears (ECC, row remap); the card goes back if they recur."""


def do_now(f: Finding) -> str:
    """The one action for the operator now, in one line.

    The finding's own action (from the rule or the Xid catalog) says everything and is
    shown with it; this is what to do first, so it names the host and the GPU.
    """
    host, gpu = f.host, (f"GPU{f.gpu}" if f.gpu is not None else "the GPU")
    code = f.code
    if f.xid == 79 or code in (Code.GPU_FALLEN_OFF_BUS, Code.GPU_LOST, Code.GPU_DROPOUT):
        return f"drain {host}, reboot it; RMA {gpu} if it recurs"
    if f.xid in _RESET_XIDS or code == Code.ECC_UNCORRECTABLE:
        return f"drain {host}, reset {gpu} (nvidia-smi -r); RMA it if it recurs"
    if code == Code.ROW_REMAP_FAILURE:
        return f"drain {host}; RMA {gpu}: it has no spare rows left"
    if code == Code.GPU_UNRESPONSIVE:
        return f"drain {host}; if {gpu} stays hung in nvidia-smi, reboot it"
    if code == Code.PCIE_AER:
        return f"drain {host}; reseat {gpu}, check its riser and slot"
    if code == Code.HOST_UNREACHABLE and "refused" in f.summary:
        return (f"{host} answers but refuses SSH: start sshd on it (console or BMC), "
                "then R to retry")
    if code in (Code.HOST_UNREACHABLE, Code.HOST_DOWN, Code.FLEET_DOWN):
        return f"check {host}'s power and network (ping, BMC console)"
    if code == Code.HOST_AUTH_FAILED:
        return f"fix the SSH login to {host} (user, key, agent)"
    if code in (Code.HOST_KEY_CHANGED, Code.HOST_KEY_REFUSED):
        return f"verify {host}'s new host key out of band before trusting it"
    if code == Code.AGENT_FAILED:
        return f"read why the agent failed on {host} (below), fix it, then retry"
    if code == Code.HOST_STALE:
        return f"check whether {host} is overloaded or hung (ssh in, top, dmesg)"
    if code == Code.GPU_COUNT_SHORT:
        return f"check the NVIDIA driver on {host} (nvidia-smi; lsmod | grep nvidia)"
    watcher = _WATCHER_DO.get(code)
    if watcher is not None:
        return watcher.format(host=host)
    fabric = _fabric_do(f, host, gpu)
    if fabric is not None:
        return fabric
    ranked = rank_where(f)
    if code in (Code.NCCL_TIMEOUT, Code.NCCL_ERROR, Code.NCCL_NET_ERROR, Code.RANK_FAILED):
        if ranked is not None and code == Code.RANK_FAILED:
            return f"check {ranked} first (GPU state, kernel log), then its traceback"
        return f"find the stalled rank ({ranked or host}); set TORCH_NCCL_DUMP_ON_TIMEOUT=1"
    if f.step is Step.MODEL:
        if ranked is not None:
            return f"read the traceback of {ranked} in {host}'s job log, then the model code"
        return f"read {host}'s job log and model code"
    warning = _WARNING_DO.get(code)
    if warning is not None:
        where = host + (f" GPU{f.gpu}" if f.gpu is not None else "")
        return warning.format(host=host, gpu=gpu, where=where)
    if f.action:
        first = f.action.split(";")[0].split(". ")[0].split(" (")[0].strip().rstrip(".:")
        if first:
            if len(first) > 64:
                first = first[:64].rsplit(" ", 1)[0] + "…"
            return f"on {host}: {first[0].lower()}{first[1:]}"
    return f"look at {host} ({code})"


_WATCHER_DO: Mapping[str, str] = {
    Code.COLLECTOR_STALLED: "{host} is frozen, not its hosts: check this machine's load",
    Code.COLLECTOR_DIED: "{host} restarts itself; if it keeps dying: dmesg | grep -i oom",
    Code.SOURCE_DOWN: "{host} does not answer (not its hosts): curl its /-/ready",
    Code.SOURCE_SLOW: "{host} answers late: check its load, or raise --refresh",
    Code.HOST_FLAPPING: "drain {host}, it keeps dropping off: check link, power, sshd",
}
"""What to do first about the watcher's own faults (``host`` is the source) and a flapping
host."""


def _fabric_do(f: Finding, host: str, gpu: str) -> str | None:
    """Do-now for the fabric's critical findings (ports, NVLinks, switches, racks)."""
    named = f.details.ports
    port = str(named[0])[:16] if named else "the port"
    switch, rack = (f.details.switch or "")[:16], (f.details.rack or "")[:16]
    if f.code == Code.IB_PORT_DOWN:
        return f"drain {host}, reseat the cable of {port}; check its switch port"
    if f.code == Code.SWITCH_SUSPECT:
        return (f"check switch {switch} first (ports, power, uplinks), not {host} alone"
                if switch else f"check the leaf switch of {host} and its neighbours first")
    if f.code == Code.RACK_SUSPECT:
        return (f"check rack {rack}'s power and cooling, not {host} alone" if rack
                else f"check the power and cooling of {host}'s rack first")
    if f.code == Code.FABRIC_MANAGER_ERROR:
        return f"drain {host}; restart nvidia-fabricmanager, reset its GPUs"
    if f.code == Code.DCGM_DIAG_FAIL:
        return f"drain {host}; rerun dcgmi diag on {gpu}, RMA it if it fails again"
    return None


_WARNING_DO: Mapping[str, str] = {
    Code.MEMORY_LEAK: "checkpoint the job on {where} before it runs out; find what grows",
    Code.CLOCKS_THROTTLED: "check the cooling and power of {where} (fans, inlet air)",
    Code.THROTTLED_WHILE_BUSY: "check the cooling and power of {where} (fans, inlet air)",
    Code.TEMP_NEAR_SLOWDOWN: "check the cooling of {where} before it slows down",
    Code.POWER_PINNED: "check {host}'s power cap (nvidia-smi -q -d POWER)",
    Code.PCIE_LINK_DOWNGRADED: "reseat {gpu} on {host} at its next drain",
    Code.LINK_DOWNGRADE_APPEARED: "reseat {gpu} on {host} at its next drain",
    Code.NVLINK_DOWN: "drain {host}, reset {gpu}; RMA it if links stay down",
    Code.DISK_SATURATED: "find what saturates {host}'s disk (iotop, iostat -x)",
    Code.DATA_STARVATION: "feed {host}'s GPUs faster (loader workers, data on local disk)",
    Code.HOST_SWAPPING: "free memory on {host}: its GPUs wait on swap",
    Code.SWAP_ACTIVITY: "free memory on {host}: its GPUs wait on swap",
    Code.ECC_INCREASING: "drain {host} soon; RMA {gpu} if its ECC errors keep rising",
    Code.REMAP_INCREASING: "drain {host} soon; RMA {gpu} if its row remaps keep rising",
    Code.ROW_REMAP_PENDING: "reset {gpu} on {host} (nvidia-smi -r) at its next drain",
    Code.RETIRED_PAGES_PENDING: "reboot {host} at its next drain to retire the pages",
    Code.COLLECTIVE_HANG: "a collective hangs on {host}: py-spy dump its ranks, find the absent",
    Code.IB_LINK_DEGRADED: "reseat the cable of {host}'s slow IB port at its next drain",
    Code.IB_ERRORS_RISING: "watch {host}'s IB counters (perfquery -x); replace a bad cable",
    Code.NVLINK_SLOW: "reset {gpu} on {host} at its next drain to retrain its NVLink",
    Code.NVLINK_ERRORS: "watch {where}'s NVLink counters (nvidia-smi nvlink -e)",
}
"""What to do first about a chronic condition when it is the earliest thing seen."""



_CULPRIT_DO: Mapping[str, str] = {
    Code.CUDA_OOM: "{where} ran out of GPU memory first: read its traceback; the others "
                   "only waited",
    Code.ILLEGAL_MEMORY_ACCESS: "{where} failed first: read its traceback (CUDA_LAUNCH_BLOCKING"
                                "=1 places the kernel), then its GPU's kernel log",
    Code.DEVICE_SIDE_ASSERT: "{where} failed first: read its assert and traceback",
    Code.NCCL_NET_ERROR: "{where}'s transport failed first: check its NIC and cable (ibstat), "
                         "then the switch port",
    Code.RANK_FAILED: "check {where} first (GPU state, kernel log), then its traceback",
}
"""What to do first when a rank's own failure is the root, by its code."""


def culprit_do_now(root: Finding, culprit: Culprit | None, waiting: Sequence[int],
                   root_waits: bool) -> str | None:
    """Do-now for a job's incident, naming the culprit rank → host → GPU → bus id; None
    where the root's own do-now says it (a hardware fault: drain that host)."""
    if culprit is None:
        return None
    if root_waits:
        if culprit.known:
            return (f"look at {culprit.where}: it never completed the collective the others "
                    "waited on (py-spy dump its process, read its log)")
        who = (f"{len(waiting)} ranks" if len(waiting) > 1 else
               f"rank {waiting[0]}" if waiting else "the ranks")
        return f"culprit unknown, {who} waited: rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000"
    if root.step in CAUSE_STEPS or not culprit.known:
        return None
    form = _CULPRIT_DO.get(root.code, "read the traceback of {where} first, then the model "
                                      "code")
    return form.format(where=culprit.where)
