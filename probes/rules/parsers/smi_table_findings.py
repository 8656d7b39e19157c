"""What an ``nvidia-smi`` table means for triage: its ``gpu``-step findings and actions."""

from __future__ import annotations

import re

from probes.rules.busid import BDF_IN_TEXT, normalize_bus_id
from probes.rules.parsers.smi_table_records import SmiTable
from probes.rules.result import ExplainFinding
from probes.triage import Code, Severity, Step

VITAL_FIELDS = frozenset({"temp_c", "mem_used_mib", "util_pct"})
"""A GPU is lost when its name or all of these read ``ERR!``; otherwise an ``ERR!`` cell is
one sensor NVML cannot read (a power or fan sensor), and the GPU still answers."""
LOST = re.compile(r"Unable to determine the device handle for GPU|\bGPU is lost\b",
                   re.IGNORECASE)

ACTION_LOST = ("Check the kernel log for Xid 79 / 'fallen off the bus' and GSP timeouts on this "
               "GPU; drain the node, reset the GPU (nvidia-smi -r) or reboot; reseat or RMA it "
               "if it recurs")
ACTION_ERR = ("NVML cannot read this GPU: check the kernel log for Xid 79 / 119 on its bus id, "
              "drain the node and reset or reboot; a single ERR! sensor (fan) alone can be a "
              "failing fan or sensor")
ACTION_SENSOR = ("One sensor of this GPU cannot be read while the GPU answers: watch it; check "
                 "the kernel log for Xid errors on its bus id, and the fan/power hardware if "
                 "it persists (a driver update sometimes fixes a sensor that always reads ERR!)")
ACTION_ECC = ("Drain the GPU; check nvidia-smi -q -d ECC,ROW_REMAPPER (PAGE_RETIREMENT on older "
              "GPUs) for pending remaps; reset the GPU to apply them, RMA if remapping failed")


def findings(table: SmiTable) -> list[ExplainFinding]:
    """gpu-lost (error lines, ERR! rows) and ecc-uncorrectable, one per GPU and code."""
    found: dict[tuple[str, str | None], ExplainFinding] = {}

    def add(f: ExplainFinding) -> None:
        k = (f.code, f.gpu)
        old = found.get(k)
        if old is None:
            found[k] = f
            return
        sev = f.severity if f.severity.rank > old.severity.rank else old.severity
        found[k] = ExplainFinding(old.step, old.code, sev, old.line, old.evidence, old.summary,
                                  old.action, old.xid, old.gpu, old.time, old.count + 1,
                                  old.extra)

    for text, no in zip(table.errors, table.error_lines, strict=True):
        if not LOST.search(text):
            continue
        m = BDF_IN_TEXT.search(text)
        bus = normalize_bus_id(m.group()) if m else None
        why = text.rsplit(":", 1)[-1].strip() if ":" in text else ""
        add(ExplainFinding(
            Step.GPU, Code.GPU_LOST, Severity.CRITICAL, no, text,
            f"nvidia-smi cannot get a handle to GPU {bus or '(bus id not shown)'}"
            + (f" ({why})" if why and why != text else "") + ": NVML has lost it",
            ACTION_LOST, gpu=bus, time=table.timestamp))
    for g in table.gpu_rows:
        if g.err_fields:
            errs = set(g.err_fields)
            if "name" in errs or errs >= VITAL_FIELDS:
                add(ExplainFinding(
                    Step.GPU, Code.GPU_LOST, Severity.CRITICAL, g.line, g.text,
                    f"GPU {g.index} ({g.bus_id or 'bus id not shown'}) reads ERR! in "
                    f"{len(g.err_fields)} field(s) ({', '.join(g.err_fields)}): NVML cannot "
                    "talk to it", ACTION_ERR, gpu=g.bus_id, time=table.timestamp))
            else:
                add(ExplainFinding(
                    Step.GPU, Code.GPU_SENSOR_UNREADABLE, Severity.WARNING, g.line, g.text,
                    f"GPU {g.index} ({g.bus_id or 'bus id not shown'}) reads ERR! in "
                    f"{', '.join(g.err_fields)} while its other readings answer: a sensor NVML "
                    "cannot read, not a lost GPU", ACTION_SENSOR, gpu=g.bus_id,
                    time=table.timestamp, extra={"fields": list(g.err_fields)}))
        if g.ecc_uncorr:
            add(ExplainFinding(
                Step.GPU, Code.ECC_UNCORRECTABLE, Severity.CRITICAL, g.line, g.text,
                f"GPU {g.index} ({g.bus_id or 'bus id not shown'}) has {g.ecc_uncorr} volatile "
                "uncorrectable ECC error(s) since the driver loaded",
                ACTION_ECC, gpu=g.bus_id, time=table.timestamp, extra={"count_ecc": g.ecc_uncorr}))
    bus_of = {g.index: g.bus_id for g in table.gpus}
    for d in table.mig_devices:
        if d.ecc_uncorr:
            add(ExplainFinding(
                Step.GPU, Code.ECC_UNCORRECTABLE, Severity.CRITICAL, d.line, d.text,
                f"GPU {d.gpu} MIG device {d.mig_dev} (GI {d.gi}, CI {d.ci}) has {d.ecc_uncorr} "
                "volatile uncorrectable ECC error(s)",
                ACTION_ECC, gpu=bus_of.get(d.gpu), time=table.timestamp))
    return sorted(found.values(), key=lambda f: (-f.severity.rank, f.line))
