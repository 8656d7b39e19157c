"""What an ``nvidia-smi -q`` report means for triage: its ``gpu``-step findings and actions.

Kept apart from the reader (``smi_q``) because the reader's job is the tree of fields and
this one's is judgement and wording: which clock reasons count as throttling, when a PCIe
link is short, what ECC and row-remap fields call for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from probes.rules.busid import BDF_IN_TEXT, normalize_bus_id
from probes.rules.parsers.pcie import gen_shortfall
from probes.rules.result import ExplainFinding, merge_same
from probes.triage import Code, Severity, Step

if TYPE_CHECKING:
    from probes.rules.parsers.smi_q import SmiQGpu, SmiQReport

LOST = re.compile(r"Unable to determine the device handle|\bGPU is lost\b", re.IGNORECASE)
_BENIGN_REASONS = frozenset({"idle", "applications clocks setting", "display clock setting",
                             "user defined clocks"})
_HARD_REASONS = frozenset({"hw slowdown", "hw thermal slowdown", "hw power brake slowdown",
                           "sw thermal slowdown"})

ACTION_LOST = ("Check the kernel log for Xid 79 / 'fallen off the bus' and GSP timeouts on this "
               "GPU; drain the node, reset the GPU (nvidia-smi -r) or reboot; reseat or RMA it "
               "if it recurs")
ACTION_THROTTLE_HW = ("Check GPU temperature, fans and airflow (nvidia-smi -q -d TEMPERATURE,"
                      "PERFORMANCE); HW Power Brake means the board or chassis asserted a power "
                      "brake: check PSU and power cabling and the BMC event log; drain the node "
                      "if it persists under load")
ACTION_THROTTLE_POWER = ("Compare Current/Enforced with Default Power Limit (nvidia-smi -q -d "
                         "POWER); restore the default with nvidia-smi -pl if it was lowered, "
                         "otherwise the GPU is at its power budget, as expected at full load")
ACTION_THROTTLE_OTHER = ("Check which clock event reason is active with nvidia-smi -q -d "
                         "PERFORMANCE; Sync Boost follows the slowest GPU of its group")
ACTION_WIDTH = ("Reseat the GPU or check the riser, slot and cabling; compare lspci -vv LnkCap "
                "and LnkSta: lost lanes cut host-device bandwidth whatever the load")
ACTION_GEN = ("Recheck under load (nvidia-smi -q -d PCIE while busy); a link that stays below "
              "its max generation under load needs a reseat, a riser check or the BIOS PCIe "
              "speed setting")
ACTION_ECC = ("Drain the GPU; check nvidia-smi -q -d ECC,ROW_REMAPPER (PAGE_RETIREMENT on older "
              "GPUs); reset the GPU to apply pending remaps or retirements; RMA it if "
              "uncorrectable errors recur or remapping fails")
ACTION_REMAP_FAIL = ("Drain the GPU and open an RMA: row remapping failed, so the bad memory "
                     "cannot be repaired in the field; keep it out of service")
ACTION_PENDING = ("Reset the GPU (nvidia-smi -r with no processes on it, or reboot) so the "
                  "pending page retirement / row remap takes effect; until then the bad memory "
                  "can still be used")


def _label(g: SmiQGpu, ordinal: int) -> str:
    """The finding's ``gpu``: the bus id, else the excerpt's PCI Bus Id, else ``GPU<n>`` by
    position in the input (nvidia-smi's index is not printed in -q)."""
    return g.bus_id or g.pci_bus_id or f"GPU{ordinal}"


def _ev(g: SmiQGpu, name: str) -> tuple[int, str]:
    return g.evidence.get(name, (g.line, ""))


def _gpu_findings(g: SmiQGpu, ordinal: int) -> list[ExplainFinding]:
    out: list[ExplainFinding] = []
    who = gpu = _label(g, ordinal)
    load = (f"{g.pstate or 'P?'}, "
            f"{'?' if g.util_gpu_pct is None else g.util_gpu_pct} % util")

    def add(code: Code, sev: Severity, where: tuple[int, str], summary: str, action: str,
            **extra: object) -> None:
        no, text = where
        out.append(ExplainFinding(Step.GPU, code, sev, no, text or f"GPU {who}", summary,
                                  action, gpu=gpu, time=g.time, extra=extra))

    for no, text in g.lost_lines[:1]:
        add(Code.GPU_LOST, Severity.CRITICAL, (no, text),
            f"nvidia-smi -q reports GPU {who} as lost: NVML cannot talk to it", ACTION_LOST)

    slow: list[tuple[Severity, str, int, str]] = []
    for name, no, text in g.reason_lines:
        low = name.lower()
        if low in _BENIGN_REASONS:
            continue
        if low in _HARD_REASONS:
            slow.append((Severity.WARNING, name, no, text))
        elif low == "sw power cap":
            if g.idle:
                continue
            lowered = (g.power_limit_w is not None and g.power_default_limit_w is not None
                       and g.power_limit_w < g.power_default_limit_w)
            slow.append((Severity.WARNING if lowered else Severity.INFO, name, no, text))
        else:
            slow.append((Severity.INFO, name, no, text))
    if slow:
        worst = max(slow, key=lambda s: s[0].rank)
        names = ", ".join(s[1] for s in slow)
        power = ""
        if g.power_draw_w is not None or g.power_limit_w is not None:
            power = f", {g.power_draw_w} W of {g.power_limit_w} W limit"
            if g.power_default_limit_w is not None:
                power += f" (default {g.power_default_limit_w} W)"
        temp = f", {g.temp_c} C" if g.temp_c is not None else ""
        hard = any(s[1].lower() in _HARD_REASONS for s in slow)
        action = (ACTION_THROTTLE_HW if hard else ACTION_THROTTLE_POWER
                  if any(s[1].lower() == "sw power cap" for s in slow) else ACTION_THROTTLE_OTHER)
        add(Code.CLOCKS_THROTTLED, worst[0], (worst[2], worst[3]),
            f"GPU {who} clocks are held down: {names} Active ({load}{temp}{power})", action,
            reasons=[s[1] for s in slow])

    sev = gen_shortfall(g.pcie_gen_max, g.pcie_width_max, g.pcie_gen_current,
                        g.pcie_width_current)
    if sev is Severity.WARNING:
        add(Code.PCIE_LINK_DOWNGRADED, sev, _ev(g, "pcie_width_current"),
            f"GPU {who} PCIe link runs x{g.pcie_width_current} of x{g.pcie_width_max} lanes "
            f"(Gen{g.pcie_gen_current} of Gen{g.pcie_gen_max})", ACTION_WIDTH)
    elif sev is Severity.INFO and not g.idle:
        add(Code.PCIE_LINK_DOWNGRADED, sev, _ev(g, "pcie_gen_current"),
            f"GPU {who} PCIe link runs at Gen{g.pcie_gen_current} of Gen{g.pcie_gen_max} while "
            f"not idle ({load})", ACTION_GEN)

    vol, agg = g.ecc_volatile_uncorrectable, g.ecc_aggregate_uncorrectable
    if (vol or 0) > 0 or (agg or 0) > 0:
        where = _ev(g, "ecc_volatile_uncorrectable" if (vol or 0) > 0
                    else "ecc_aggregate_uncorrectable")
        add(Code.ECC_UNCORRECTABLE, Severity.CRITICAL, where,
            f"GPU {who} has uncorrectable ECC errors: {vol if vol is not None else '?'} volatile "
            f"(since driver load), {agg if agg is not None else '?'} aggregate (lifetime)",
            ACTION_ECC, count_ecc=vol or agg)

    if g.remapping_failure:
        add(Code.ROW_REMAP_FAILURE, Severity.CRITICAL, _ev(g, "remapping_failure"),
            f"GPU {who} row remapping failed (Remapping Failure Occurred: Yes; "
            f"{g.remapped_rows_uncorrectable} rows remapped for uncorrectable, "
            f"{g.remapped_rows_correctable} for correctable errors)", ACTION_REMAP_FAIL)

    if g.retired_pages_pending:
        add(Code.RETIRED_PAGES_PENDING, Severity.WARNING, _ev(g, "retired_pages_pending"),
            f"GPU {who} has page retirements pending a reset (single bit "
            f"{g.retired_pages_single_bit}, double bit {g.retired_pages_double_bit} retired)",
            ACTION_PENDING)
    if g.remapped_rows_pending:
        add(Code.ROW_REMAP_PENDING, Severity.WARNING, _ev(g, "remapped_rows_pending"),
            f"GPU {who} has row remaps pending a reset (Remapped Rows Pending: Yes; "
            f"{g.remapped_rows_uncorrectable} uncorrectable, {g.remapped_rows_correctable} "
            "correctable rows)", ACTION_PENDING)
    return out


def findings(report: SmiQReport, views: Sequence[tuple[int, SmiQGpu]]) -> list[ExplainFinding]:
    """Every block's findings, plus handle-lost error lines; one finding per code, its
    evidence the worst (then first) case, with every GPU it was seen on in ``gpus``."""
    found: list[ExplainFinding] = []
    for pos, view in views:
        found.extend(_gpu_findings(view, pos))
    claimed = {no for g in report.blocks for no, _ in g.lost_lines}
    for no, text in report.errors:
        if no in claimed or not LOST.search(text):
            continue
        m = BDF_IN_TEXT.search(text)
        bus = normalize_bus_id(m.group()) if m else None
        why = text.rsplit(":", 1)[-1].strip() if ":" in text else ""
        found.append(ExplainFinding(
            Step.GPU, Code.GPU_LOST, Severity.CRITICAL, no, text,
            f"nvidia-smi cannot get a handle to GPU {bus or '(bus id not shown)'}"
            + (f" ({why})" if why and why != text else "") + ": NVML has lost it",
            ACTION_LOST, gpu=bus, time=report.timestamp))
    unique = {(f.code, f.gpu, f.line): f for f in found}
    found = sorted(unique.values(), key=lambda f: (-f.severity.rank, f.line))
    gpus: dict[str, list[str]] = {}
    for f in found:
        seen = gpus.setdefault(f.code, [])
        if f.gpu is not None and f.gpu not in seen:
            seen.append(f.gpu)
    out = []
    for f in merge_same(found):
        extra = {**f.extra, "gpus": gpus.get(f.code, [])}
        out.append(ExplainFinding(f.step, f.code, f.severity, f.line, f.evidence, f.summary,
                                  f.action, f.xid, f.gpu, f.time, f.count, extra))
    return out
