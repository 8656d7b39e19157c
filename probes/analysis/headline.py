"""A finding as one verdict-led line: "GPU6 LOST · Xid 79", "GPU5 THROTTLED 91 °C".

The fleet table's worst-finding column is cut at 80 columns; a summary that starts with
"GPU 6 (0000:ba:00.0) is missing…" loses its meaning first.  The headline puts the GPU and
the verdict (the words of ``judge.GpuVerdict``, upper case) first and the detail after
" · ", so whatever survives truncation still says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from probes.analysis.findings import Finding
from probes.analysis.judge import HOT_CODES, LEAK_CODES, LOST_CODES, THROTTLE_CODES, GpuVerdict
from probes.analysis.reachability import REACHABILITY_CODES
from probes.analysis.watcher import SOURCE_CODES
from probes.triage import Code, Severity

SEP = " · "
XID_LOST = frozenset({79})
"""Xids that mean the GPU is gone (fallen off the bus)."""
_LOST_WORDS = LOST_CODES | {Code.GPU_FALLEN_OFF_BUS}
_VERDICT_LED = REACHABILITY_CODES | SOURCE_CODES | {
    Code.GPU_COUNT_SHORT, Code.FLEET_DOWN, Code.HOST_FLAPPING, Code.RECOVERED}
"""Codes whose summary already leads with its verdict (``probes.analysis.reachability``,
``probes.analysis.watcher``, ``probes.analysis.alerts``)."""
_WORDS: dict[str, str] = {
    Code.GPU_UNRESPONSIVE: GpuVerdict.UNRESPONSIVE.value.upper(),
    Code.PCIE_LINK_DOWNGRADED: "LINK DOWN-TRAINED",
    Code.LINK_DOWNGRADE_APPEARED: "LINK DOWN-TRAINED",
    Code.NVLINK_DOWN: "NVLINK DOWN",
    Code.NVLINK_SLOW: "NVLINK SLOW",
    Code.NVLINK_ERRORS: "NVLINK ERRORS",
    Code.IB_PORT_DOWN: "IB PORT DOWN",
    Code.IB_LINK_DEGRADED: "IB LINK SLOW",
    Code.IB_ERRORS_RISING: "IB ERRORS",
    Code.SWITCH_SUSPECT: "SWITCH SUSPECT",
    Code.RACK_SUSPECT: "RACK SUSPECT",
    Code.FABRIC_MANAGER_ERROR: "FABRIC MANAGER",
    Code.DCGM_DIAG_FAIL: "DCGM DIAG FAILED",
    Code.ECC_UNCORRECTABLE: "ECC ERRORS",
    Code.ECC_INCREASING: "ECC RISING",
    Code.ROW_REMAP_FAILURE: "REMAP FAILED",
    Code.ROW_REMAP_PENDING: "REMAP PENDING",
    Code.REMAP_INCREASING: "REMAPS RISING",
    Code.RETIRED_PAGES_PENDING: "PAGES PENDING",
    Code.POWER_PINNED: "POWER PINNED",
    Code.DISK_SATURATED: "DISK SATURATED",
    Code.DATA_STARVATION: "DATA STARVED",
    Code.HOST_SWAPPING: "SWAPPING",
    Code.SWAP_ACTIVITY: "SWAPPING",
    Code.TOPOLOGY_CROSS_NUMA: "FAR NICS",
    Code.PCIE_AER: "PCIe AER",
    Code.OOM_KILLER: "OOM KILLER",
    Code.GSP_TIMEOUT: "GSP TIMEOUT",
    Code.CPU_THERMAL: "CPU THROTTLED",
    Code.NVRM_API_MISMATCH: "DRIVER MISMATCH",
    Code.RM_INIT_ADAPTER_FAILED: "GPU INIT FAILED",
    Code.KERNEL_LOG_UNREADABLE: "KERNEL LOG UNREADABLE",
    Code.JOB_LOG_REFUSED: "JOB LOG REFUSED",
    Code.NCCL_TIMEOUT: "NCCL TIMEOUT",
    Code.NCCL_NET_ERROR: "NCCL NET ERROR",
    Code.NCCL_ERROR: "NCCL ERROR",
    Code.RANK_FAILED: "RANK FAILED",
    Code.COLLECTIVE_HANG: "COLLECTIVE HUNG",
    Code.CLOCK_SKEW: "CLOCK SKEW",
    Code.NCCL_TESTS_WRONG: "NCCL WRONG RESULTS",
    Code.NCCL_BANDWIDTH_LOW: "NCCL SLOW",
    Code.CUDA_OOM: "CUDA OOM",
    Code.ILLEGAL_MEMORY_ACCESS: "ILLEGAL ADDRESS",
    Code.DEVICE_SIDE_ASSERT: "DEVICE ASSERT",
    Code.LOSS_NAN: "LOSS NaN",
    Code.LOSS_SCALE_OVERFLOW: "LOSS SCALE OVERFLOW",
}
_GPU_PREFIX = re.compile(r"^(GPU ?\d+|GPU [0-9a-fA-F:.]+)( \([0-9a-fA-F:.]+\))?:? ?")
"""A summary's own leading "GPU 5 " / "GPU5: " / "GPU 0000:ba:00.0 ", dropped after the verdict."""


def headline(f: Finding, context: Iterable[Finding] = ()) -> str:
    """``f`` as a verdict-led line; ``context`` (the host's other findings) lends details
    the finding itself lacks: the Xid behind a lost GPU, a throttled GPU's temperature."""
    others = [o for o in context if o is not f]
    if f.code in _VERDICT_LED:
        return f.summary
    gpu = f"GPU{f.gpu} " if f.gpu is not None and f.gpu >= 0 else ""
    if f.code in _LOST_WORDS or (f.code == Code.XID and f.xid in XID_LOST):
        return gpu + GpuVerdict.LOST.value.upper() + SEP + _lost_detail(f, others)
    if f.code in LEAK_CODES:
        return gpu + GpuVerdict.LEAKING.value.upper() + _leak_detail(f)
    if f.code in THROTTLE_CODES:
        return gpu + GpuVerdict.THROTTLED.value.upper() + _temp(f, others, SEP + _rest(f))
    if f.code in HOT_CODES:
        return gpu + GpuVerdict.HOT.value.upper() + _temp(f, others, SEP + _rest(f))
    if f.code == Code.XID:
        name = f.details.xid_name
        return f"{gpu}XID {f.xid if f.xid is not None else '?'}" + \
            (SEP + name if name else "")
    if f.code in (Code.NCCL_TIMEOUT, Code.NCCL_ERROR, Code.NCCL_NET_ERROR, Code.RANK_FAILED,
                  Code.CUDA_OOM):
        rank = f.details.rank
        word = _WORDS[f.code]
        return word + (f"{SEP}rank {rank}" if rank is not None else SEP + _rest(f))
    word = _WORDS.get(f.code, f.code.upper().replace("-", " "))
    return f"{gpu}{word}{SEP}{_rest(f)}"


def _rest(f: Finding) -> str:
    """The summary after the GPU it names (the headline has named it already)."""
    return _GPU_PREFIX.sub("", f.summary, count=1) if f.gpu is not None else f.summary


def _lost_detail(f: Finding, others: list[Finding]) -> str:
    xids = [o.xid for o in [f, *others]
            if o.code == Code.XID and o.xid is not None and o.gpu == f.gpu]
    if xids:
        return f"Xid {xids[0]}"
    if f.code == Code.GPU_FALLEN_OFF_BUS or any(
            o.code == Code.GPU_FALLEN_OFF_BUS and o.gpu == f.gpu for o in others):
        return "fell off the bus"
    answering, expected = f.details.answering, f.details.expected
    if answering is not None and expected is not None:
        return f"{answering}/{expected} answer"
    return "missing from the samples"


def _leak_detail(f: Finding) -> str:
    slope, hours = f.slope_mib_h, f.hours_to_full
    if slope is None:
        return SEP + _rest(f)
    text = f" +{slope:,.0f} MiB/h"
    return text + (f", full in ~{hours:,.0f} h" if hours is not None else "")


def _temp(f: Finding, others: list[Finding], fallback: str) -> str:
    """" 91 °C" from this finding or a sibling about the same GPU; else ``fallback``."""
    for o in [f, *others]:
        t = o.details.temp_c
        if o.gpu == f.gpu and t is not None:
            return f" {t:.0f} °C"
    return fallback


def worst_headline(found: Iterable[Finding]) -> str | None:
    """The headline of the worst finding, None when there is nothing above information."""
    ranked = sorted(found, key=lambda f: -f.severity.rank)
    if not ranked or ranked[0].severity is Severity.INFO:
        return None
    return headline(ranked[0], ranked)
