"""GPUs through ``nvidia-smi --query-gpu``: the fallback when NVML is not importable."""

from __future__ import annotations

import csv
import re

from .attribution import attribute
from .commands import run_command
from .proc import process_owner
from .values import decode_reasons, normalise_bus_id, parse_int, parse_number, parse_str, parse_yes

SMI_TIMEOUT_S = 5.0
SMI_PROCS_EVERY = 5
"""Ticks between two process queries (processes change slowly; each query costs a fork)."""
SMI_MAX_PROCESSES = 64

SMI_FIELDS = (
    ("index", ()), ("uuid", ()), ("pci.bus_id", ()), ("name", ()),
    ("memory.total", ()), ("memory.used", ()),
    ("utilization.gpu", ()), ("utilization.memory", ()), ("temperature.gpu", ()),
    ("power.draw", ()), ("enforced.power.limit", ("power.limit",)),
    ("clocks.sm", ()), ("clocks.max.sm", ()),
    ("clocks_event_reasons.active", ("clocks_throttle_reasons.active",)),
    ("pcie.link.gen.gpucurrent", ("pcie.link.gen.current",)), ("pcie.link.gen.max", ()),
    ("pcie.link.width.current", ()), ("pcie.link.width.max", ()),
    ("temperature.memory", ()), ("clocks.current.memory", ("clocks.mem",)),
    ("clocks.max.memory", ("clocks.max.mem",)), ("pstate", ()),
    ("ecc.errors.corrected.volatile.total", ()), ("ecc.errors.uncorrected.volatile.total", ()),
    ("ecc.errors.corrected.aggregate.total", ()), ("ecc.errors.uncorrected.aggregate.total", ()),
    ("retired_pages.pending", ()), ("remapped_rows.correctable", ()),
    ("remapped_rows.uncorrectable", ()), ("remapped_rows.pending", ()),
    ("remapped_rows.failure", ()), ("persistence_mode", ()),
)
"""What the fallback asks for; a field an older driver rejects is renamed or dropped."""
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
_NO_HANDLE = re.compile(
    r"Unable to determine the device handle for GPU\s*"
    r"((?:[0-9A-Fa-f]+:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


class SmiBackend(object):
    """GPUs through ``nvidia-smi --query-gpu``, learning which field names this driver accepts."""

    name = "nvidia-smi"

    def __init__(self, path):
        self.path = path
        self.fields = [(f, list(alts)) for f, alts in SMI_FIELDS]
        self.known = {}
        self.ticks = 0
        self.procs = None
        """Bus id -> the GPU's processes, from the newest process query (None: unknown)."""
        self.attr = {}

    def _query(self):
        """Run the query; drop or rename fields the driver rejects (older/newer drivers)."""
        for _ in range(len(self.fields) + 1):
            names = [f for f, _ in self.fields]
            rc, out, err = run_command(
                [self.path, "--query-gpu=" + ",".join(names), "--format=csv,noheader,nounits"],
                SMI_TIMEOUT_S)
            if rc is None:
                raise ProbeTimeout("nvidia-smi " + err)
            m = _INVALID_FIELD.search(out + err)
            if m and rc != 0:
                self._replace_field(m.group(1))
                continue
            return names, rc, out, err
        raise ProbeFailed("nvidia-smi rejected every field")

    def _replace_field(self, bad):
        for i, (f, alts) in enumerate(self.fields):
            if f == bad:
                if alts:
                    self.fields[i] = (alts[0], alts[1:])
                else:
                    del self.fields[i]
                return
        raise ProbeFailed("nvidia-smi rejected field %r" % bad)

    def sample(self):
        """Every GPU as a sample sends it: the name is the hello's and is not repeated."""
        gpus = self._gpus()
        if self.ticks % SMI_PROCS_EVERY == 0 or self.procs is None:
            self.procs = self._processes()
        self.ticks += 1
        for g in gpus:
            g.pop("name", None)
            if self.procs is not None and g.get("state") != "lost":
                g["processes"] = self.procs.get(g.get("bus_id"), [])
        return gpus

    def _processes(self):
        """Compute processes by the bus id of their GPU (``--query-compute-apps`` names a GPU
        by bus id; its index is not in the answer, and need not be NVML's); None when the
        query fails."""
        rc, out, _ = run_command(
            [self.path, "--query-compute-apps=gpu_bus_id,pid,used_memory",
             "--format=csv,noheader,nounits"], SMI_TIMEOUT_S)
        if rc != 0:
            return None
        by_bus = {}
        for bus, pid, used in parse_compute_apps(out)[:SMI_MAX_PROCESSES]:
            name, user = process_owner(pid)
            info = {"pid": pid, "name": name, "user": user, "used_mib": used}
            if pid not in self.attr:
                if len(self.attr) > 4 * SMI_MAX_PROCESSES:
                    self.attr.clear()
                self.attr[pid] = attribute(pid)
            info.update(self.attr[pid])
            by_bus.setdefault(bus, []).append(info)
        return by_bus

    def _gpus(self):
        """Every row of the query as a GPU, and the GPUs it says are lost."""
        names, rc, out, err = self._query()
        canon = dict((f, SMI_CANON.get(f, f)) for f in names)
        lost = [normalise_bus_id(b) for b in _NO_HANDLE.findall(out + "\n" + err)]
        gpus = []
        for row in csv.reader(out.splitlines(), skipinitialspace=True):
            if len(row) != len(names):
                continue
            values = dict((canon[n], v) for n, v in zip(names, row))
            gpu = smi_row_to_gpu(values)
            if gpu is not None:
                gpus.append(gpu)
        if rc != 0 and not gpus and not lost:
            raise ProbeFailed("nvidia-smi exit %s: %s" % (rc, (err or out).strip()[:300]))
        by_bus = dict((g.get("bus_id"), g) for g in gpus)
        for bus in lost:
            known = self.known.get(bus)
            if bus not in by_bus:
                gpus.append({"index": known["index"] if known else -1, "uuid":
                             known.get("uuid") if known else None, "bus_id": bus,
                             "state": "lost"})
        return gpus

    def _fact_rows(self):
        """The hello-time query (SMI_FACT_FIELDS) as {field: text} per GPU; a field this
        driver rejects is dropped and the query asked again."""
        names = list(SMI_FACT_FIELDS)
        for _ in range(len(SMI_FACT_FIELDS)):
            rc, out, err = run_command(
                [self.path, "--query-gpu=" + ",".join(names), "--format=csv,noheader,nounits"],
                SMI_TIMEOUT_S)
            m = _INVALID_FIELD.search(out + err)
            if rc is not None and rc != 0 and m and m.group(1) in names[1:]:
                names.remove(m.group(1))
                continue
            return [dict(zip(names, row)) for row in csv.reader(out.splitlines(),
                                                                skipinitialspace=True)
                    if len(row) == len(names)]
        return []

    def facts(self):
        gpus = [g for g in self._gpus() if g.get("state") != "lost"]
        self.known = dict((g["bus_id"], g) for g in gpus)
        rows = self._fact_rows()
        driver = parse_str(rows[0].get("driver_version")) if rows else None
        by_index = dict((parse_int(r.get("index")), r) for r in rows)
        _, out, _ = run_command([self.path], SMI_TIMEOUT_S)
        m = re.search(r"CUDA Version:\s*([\d.]+)", out or "")
        info = []
        for g in gpus:
            one = dict((k, g.get(k)) for k in ("index", "uuid", "bus_id", "name", "mem_total_mib"))
            one.update(smi_gpu_facts(by_index.get(g["index"]) or {}))
            info.append(one)
        return {"driver_version": driver, "cuda_version": m.group(1) if m else None,
                "gpus": info}


def parse_compute_apps(text):
    """``--query-compute-apps=gpu_bus_id,pid,used_memory --format=csv,noheader,nounits`` ->
    [(bus id, pid, MiB or None)]; ``[N/A]`` memory (MIG, containers) is None, and the "No
    running processes found" line of some drivers is no row."""
    out = []
    for row in csv.reader((text or "").splitlines(), skipinitialspace=True):
        if len(row) != 3:
            continue
        bus, pid = normalise_bus_id(row[0].strip()), parse_int(row[1])
        if bus is None or pid is None:
            continue
        out.append((bus, pid, parse_number(row[2])))
    return out


SMI_FACT_FIELDS = ("index", "driver_version", "serial", "vbios_version", "persistence_mode",
                   "ecc.mode.current", "ecc.mode.pending", "mig.mode.current",
                   "power.default_limit")
"""Asked once for the hello; ``index`` first: it is never dropped."""


def smi_gpu_facts(v):
    """One row of the hello-time query -> the GPU's static facts ([N/A] -> None)."""
    return {"serial": parse_str(v.get("serial")), "vbios": parse_str(v.get("vbios_version")),
            "persistence_mode": parse_yes(v.get("persistence_mode")),
            "ecc_mode": parse_yes(v.get("ecc.mode.current")),
            "ecc_mode_pending": parse_yes(v.get("ecc.mode.pending")),
            "mig_mode": parse_yes(v.get("mig.mode.current")),
            "power_limit_default_w": parse_number(v.get("power.default_limit"))}


SMI_CANON = {
    "power.limit": "enforced.power.limit",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "pcie.link.gen.current": "pcie.link.gen.gpucurrent",
    "clocks.mem": "clocks.current.memory",
    "clocks.max.mem": "clocks.max.memory",
}


def smi_row_to_gpu(v):
    index = parse_int(v.get("index"))
    if index is None:
        return None
    mask = None
    reasons_text = parse_str(v.get("clocks_event_reasons.active"))
    if reasons_text:
        try:
            mask = int(reasons_text, 16)
        except ValueError:
            mask = None
    return {
        "index": index,
        "uuid": parse_str(v.get("uuid")),
        "bus_id": normalise_bus_id(parse_str(v.get("pci.bus_id"))),
        "name": parse_str(v.get("name")),
        "state": "ok",
        "mem_used_mib": parse_number(v.get("memory.used")),
        "mem_total_mib": parse_number(v.get("memory.total")),
        "util_pct": parse_number(v.get("utilization.gpu")),
        "mem_util_pct": parse_number(v.get("utilization.memory")),
        "temp_c": parse_number(v.get("temperature.gpu")),
        "power_w": parse_number(v.get("power.draw")),
        "power_limit_w": parse_number(v.get("enforced.power.limit")),
        "sm_clock_mhz": parse_number(v.get("clocks.sm")),
        "sm_clock_max_mhz": parse_number(v.get("clocks.max.sm")),
        "clock_reasons": decode_reasons(mask),
        "pcie_gen": parse_int(v.get("pcie.link.gen.gpucurrent")),
        "pcie_gen_max": parse_int(v.get("pcie.link.gen.max")),
        "pcie_width": parse_int(v.get("pcie.link.width.current")),
        "pcie_width_max": parse_int(v.get("pcie.link.width.max")),
        "temp_mem_c": parse_number(v.get("temperature.memory")),
        "mem_clock_mhz": parse_number(v.get("clocks.current.memory")),
        "mem_clock_max_mhz": parse_number(v.get("clocks.max.memory")),
        "pstate": parse_str(v.get("pstate")),
        "ecc_corrected_volatile": parse_int(v.get("ecc.errors.corrected.volatile.total")),
        "ecc_uncorrected_volatile": parse_int(v.get("ecc.errors.uncorrected.volatile.total")),
        "ecc_corrected_aggregate": parse_int(v.get("ecc.errors.corrected.aggregate.total")),
        "ecc_uncorrected_aggregate": parse_int(v.get("ecc.errors.uncorrected.aggregate.total")),
        "retired_pages_pending": parse_yes(v.get("retired_pages.pending")),
        "remap_correctable": parse_int(v.get("remapped_rows.correctable")),
        "remap_uncorrectable": parse_int(v.get("remapped_rows.uncorrectable")),
        "remap_pending": parse_yes(v.get("remapped_rows.pending")),
        "remap_failure": parse_yes(v.get("remapped_rows.failure")),
        "persistence": parse_yes(v.get("persistence_mode")),
    }


class ProbeTimeout(Exception):
    pass


class ProbeFailed(Exception):
    pass
