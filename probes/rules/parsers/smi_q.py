"""``nvidia-smi -q`` reports: whole, ``-d SECTION``, ``grep`` excerpts, one or many GPUs.

The report is a tree drawn by indentation: ``Key : Value`` lines and section headers (a line
with no `` : ``), each nested under the nearest shallower line before it.  The reader keeps
that stack and looks fields up by the section names above them (the last one or two), never
by column or absolute depth, because key columns are 28, 42 or 55 wide depending on the
driver, ``grep -A`` excerpts start at any depth, and unknown sections must simply be skipped.

GPU blocks start with a ``GPU 00000000:3B:00.0`` line at column 0.  Lines before any such
line (a ``grep`` excerpt) belong to one anonymous GPU with ``bus_id`` null, as the contract
says, even when a ``Bus Id`` field is present (kept apart as ``pci_bus_id``).  In an
anonymous excerpt a field repeated under the same sections starts the next GPU: that is what
``nvidia-smi -q | grep -A 8 'Clocks Throttle'`` prints on a multi-GPU host.

Judgement calls:

* ``pcie_gen_max`` is the ``Max`` line: NVML's "max generation possible with this device
  *and system*", i.e. the link's capability.  Newer drivers add ``Device Max`` (the GPU alone)
  and ``Host Max`` (the root port); ``Host Max : 5`` above ``Max : 4`` on a Gen4 GPU in a Gen5
  slot is a fully trained link, not a downgrade.  Without a ``Max`` line the lower of the two
  is used.
* A GPU is idle when it reads P8 or deeper, or 0 % GPU utilisation.  An idle GPU at a low
  generation is no finding (GPUs train the link down to save power); ``SW Power Cap`` on an
  idle GPU is not throttling either.  Unknown load counts as load.
* Throttling severities: HW Slowdown, HW Thermal / Power Brake and SW Thermal slowdowns are
  ``warning``; SW Power Cap under load is ``info`` (a GPU at its power limit is working as
  designed) unless the enforced limit is below the default, which someone chose: ``warning``.
  Sync Boost or any other active reason is ``info``.  Idle, Applications Clocks Setting,
  Display Clock Setting never count.
* ``Remapped Rows`` ``Pending : Yes`` is ``row-remap-pending`` (the contract's additions of
  2026-12-06): the remap takes effect only after a GPU reset.  Rows remapped for
  uncorrectable errors without a remapping failure are no finding of their own: the repair
  worked, and the aggregate ECC counter that caused it is ``ecc-uncorrectable`` already.
* Several reports of the same GPU in one paste (``-q -l``, or ``-d A`` then ``-d B``) are
  merged field by field, later readings winning; findings look at every block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from probes.rules.busid import BDF_IN_TEXT, normalize_bus_id
from probes.rules.parsers.smi_q_findings import LOST, findings
from probes.rules.result import KindResult
from probes.rules.text import clean_lines

KIND = "nvidia-smi-q"
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: -q reports start with their banner or first fields."""
LOOKS_LIKE_SIGNALS = 2
"""Known -q keys or section names needed when the banner is missing (a grep excerpt)."""
IDLE_PSTATE = 8
"""P-state from which a GPU counts as idle (P8 is nvidia-smi's idle state)."""

_BANNER = re.compile(r"^\s*={3,}\s*NVSMI LOG\s*={3,}\s*$")
_GPU_LINE = re.compile(r"^GPU\s*(?P<bdf>(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
                       r"\s*$")
_KV = re.compile(r"^(?P<ind>\s*)(?P<key>[^\s:](?:[^:]*[^\s:])?)\s+:(?:\s+(?P<val>(?:.*\S)?))?\s*$")
"""``    Key   : value``.  The key and the value end at their last non-space character, read
once: lazy, each was tried again at every space of a long run (the square of the line)."""
_SECTION = re.compile(r"^(?P<ind>\s+)(?P<name>[A-Za-z](?:[\w .\-/()+]*[\w.\-/()+])?)\s*$")
_PREFIX = re.compile(r"^(?:[\w.\-]{1,64}|\[[^\]]{1,64}\]): ")
"""A launcher or host prefix (``gpu01: ``, ``[rank3]: ``, ``10: ``) glued before a line."""
_LEADING_FENCE = re.compile(r"^`{3,}")
_LOST_VALUE = re.compile(r"\bGPU is lost\b", re.IGNORECASE)
_ERROR_LINE = re.compile(
    r"Unable to determine the device handle|\bGPU is lost\b|No devices were found"
    r"|NVIDIA-SMI has failed|Failed to initialize NVML", re.IGNORECASE)

_UNAVAILABLE = frozenset({
    "n/a", "not supported", "requested functionality has been deprecated", "unknown error",
    "unknown", "not available", "insufficient permissions", "no permission", "gpu is lost",
    "not found", "err!", ""})
_INT = re.compile(r"^-?\d+$")
_NUM = re.compile(r"^(-?\d+(?:\.\d+)?)(?!\d)\s*(?P<unit>\S*)$")
_WIDTH = re.compile(r"^(?:(\d{1,2})\s?x|x\s?(\d{1,2}))$", re.IGNORECASE)
_PSTATE = re.compile(r"^P(\d{1,2})$")

_REPORT_KEYS = frozenset({"timestamp", "driver version", "cuda version", "attached gpus",
                          "nvsmi log"})
_REASON_SECTIONS = frozenset({"clocks throttle reasons", "clocks event reasons",
                              "clock throttle reasons", "clock event reasons"})
_REASONS = frozenset({
    "idle", "applications clocks setting", "sw power cap", "hw slowdown", "hw thermal slowdown",
    "hw power brake slowdown", "sync boost", "sw thermal slowdown", "display clock setting",
    "user defined clocks", "unknown"})
_LIST_SECTIONS = re.compile(r"process|mig device", re.IGNORECASE)
"""Sections whose entries repeat the same keys (processes, MIG instances): no GPU boundary."""

_SIGNAL_KEYS = frozenset({
    "product name", "product brand", "product architecture", "display mode", "display active",
    "persistence mode", "performance state", "bus id", "gpu uuid", "vbios version",
    "minor number", "gpu current temp", "gpu shutdown temp", "gpu slowdown temp",
    "gpu max operating temp", "gpu t.limit temp", "gpu target temperature",
    "memory current temp", "applications clocks setting", "sw power cap", "hw slowdown",
    "hw thermal slowdown", "hw power brake slowdown", "sw thermal slowdown",
    "display clock setting", "power draw", "enforced power limit", "current power limit",
    "default power limit", "average power draw", "instantaneous power draw", "fan speed",
    "compute mode", "remapping failure occurred", "pending page blacklist", "single bit ecc",
    "double bit ecc", "replays since reset", "tx throughput", "rx throughput", "sub system id",
    "dram uncorrectable", "sram uncorrectable", "dram correctable", "sram correctable",
    "accounting mode", "multigpu board", "gpu part number", "inforom version",
    "remapped rows", "attached gpus", "device id", "gsp firmware version", "addressing mode"})
_SIGNAL_SECTIONS = frozenset({
    *_REASON_SECTIONS, "clocks event reasons counters", "temperature", "gpu link info",
    "pcie generation", "link width", "fb memory usage", "bar1 memory usage", "ecc mode",
    "ecc errors", "retired pages", "remapped rows", "power readings", "gpu power readings",
    "max clocks", "applications clocks", "default applications clocks", "inforom version",
    "mig mode", "driver model", "encoder stats", "clock policy", "gpu operation mode",
    "utilization", "supported clocks", "bridge chip"})



@dataclass(frozen=True)
class SmiQGpu:
    """One GPU of a ``-q`` report; None where the report lacks the field or marks it N/A.

    ``line`` is the 1-based line of its ``GPU <bus id>`` line (or its first field in an
    excerpt); ``evidence`` maps a field name to the (line, text) it was read from, and
    ``reason_lines`` the active clock reasons to theirs, for findings.
    """

    line: int
    bus_id: str | None = None
    name: str | None = None
    clock_event_reasons_active: tuple[str, ...] | None = None
    pstate: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_gen_device_current: int | None = None
    pcie_gen_device_max: int | None = None
    pcie_gen_host_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pci_bus_id: str | None = None
    util_gpu_pct: float | None = None
    util_memory_pct: float | None = None
    fan_pct: float | None = None
    fb_total_mib: float | None = None
    fb_used_mib: float | None = None
    ecc_mode: str | None = None
    ecc_volatile_uncorrectable: int | None = None
    ecc_aggregate_uncorrectable: int | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapping_failure: bool | None = None
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_max_operating_c: float | None = None
    temp_target_c: float | None = None
    temp_tlimit_c: float | None = None
    mem_temp_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    time: str | None = None
    evidence: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    reason_lines: tuple[tuple[str, int, str], ...] = ()
    lost_lines: tuple[tuple[int, str], ...] = ()

    @property
    def idle(self) -> bool:
        """P8 or deeper, or 0 % utilisation; unknown load is not idle."""
        m = _PSTATE.match(self.pstate or "")
        return (m is not None and int(m.group(1)) >= IDLE_PSTATE) or self.util_gpu_pct == 0

    def to_parsed(self) -> dict[str, object]:
        """The contract's GPU object: its keys first, then the extra readings."""
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name in ("line", "time", "evidence", "reason_lines", "lost_lines"):
                continue
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        rows = {"correctable": self.remapped_rows_correctable,
                "uncorrectable": self.remapped_rows_uncorrectable,
                "pending": self.remapped_rows_pending, "failure": self.remapping_failure}
        if any(v is not None for v in rows.values()):
            out["remapped_rows"] = rows
        return out


@dataclass(frozen=True)
class SmiQReport:
    """Everything read: GPUs merged by bus id, every GPU block as read, and error lines."""

    gpus: tuple[SmiQGpu, ...] = ()
    blocks: tuple[SmiQGpu, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    timestamp: str | None = None
    errors: tuple[tuple[int, str], ...] = ()

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``parsed`` object."""
        return {"gpus": [g.to_parsed() for g in self.gpus],
                "driver_version": self.driver_version, "cuda_version": self.cuda_version,
                "attached_gpus": self.attached_gpus, "timestamp": self.timestamp,
                "errors": [text for _, text in self.errors]}


# --- values ------------------------------------------------------------------------------------

def _avail(val: str | None) -> str | None:
    """The value, or None for nvidia-smi's unavailable markers (bracketed or not)."""
    if val is None:
        return None
    v = val.strip()
    bare = v[1:-1].strip() if v.startswith("[") and v.endswith("]") else v
    return None if bare.lower() in _UNAVAILABLE else v


def _int(val: str | None) -> int | None:
    v = _avail(val)
    return int(v) if v is not None and _INT.match(v) else None


def _num(val: str | None, unit: str) -> float | None:
    """A number that must carry ``unit`` (``49 C``, ``97.18 W``, ``11 %``): a value cut off
    before its unit by truncation is not read as a smaller number."""
    v = _avail(val)
    m = _NUM.match(v) if v is not None else None
    if m is None or m.group("unit").lower() != unit.lower():
        return None
    x = float(m.group(1))
    return int(x) if x.is_integer() else x


def _width(val: str | None) -> int | None:
    v = _avail(val)
    m = _WIDTH.match(v) if v is not None else None
    return int(m.group(1) or m.group(2)) if m else None


def _yes(val: str | None) -> bool | None:
    v = (_avail(val) or "").lower()
    return True if v == "yes" else False if v == "no" else None


def _line_body(line: str) -> str:
    """A cleaned line without a launcher prefix or a glued fence, indentation kept."""
    line = _LEADING_FENCE.sub("", line).expandtabs(8)
    m = _PREFIX.match(line)
    return line[m.end():] if m else line


# --- reading -----------------------------------------------------------------------------------

@dataclass
class _Ecc:
    """Uncorrectable counts of one scope (volatile / aggregate), old and new key styles."""

    new_sum: int | None = None
    old_total: int | None = None
    old_parts: int | None = None
    lines: dict[str, tuple[int, str]] = field(default_factory=dict)

    def add(self, attr: str, n: int, no: int, text: str) -> None:
        setattr(self, attr, (getattr(self, attr) or 0) + n)
        if n > 0:
            self.lines.setdefault(attr, (no, text))

    @property
    def total(self) -> int | None:
        old = self.old_total if self.old_total is not None else self.old_parts
        if self.new_sum is None and old is None:
            return None
        return (self.new_sum or 0) + (old or 0)

    @property
    def first(self) -> tuple[int, str] | None:
        """The line that shows the count: a new-style key, else the Double Bit total (or,
        without one, its first non-zero part)."""
        old = "old_total" if self.old_total is not None else "old_parts"
        return self.lines.get("new_sum") or self.lines.get(old)


@dataclass
class _Build:
    line: int
    bus_id: str | None
    time: str | None
    values: dict[str, object] = field(default_factory=dict)
    evidence: dict[str, tuple[int, str]] = field(default_factory=dict)
    reasons: list[tuple[str, int, str]] | None = None
    reasons_na: bool = False
    ecc: dict[str, _Ecc] = field(default_factory=lambda: {"volatile": _Ecc(),
                                                          "aggregate": _Ecc()})
    seen: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    lost: list[tuple[int, str]] = field(default_factory=list)

    def put(self, name: str, value: object, no: int, text: str) -> None:
        if value is None:
            return
        self.values[name] = value
        self.evidence[name] = (no, text)

    def freeze(self) -> SmiQGpu:
        v = dict(self.values)
        for name, sources in _FALLBACKS.items():
            if v.get(name) is None:
                for src in sources:
                    if v.get(src) is not None:
                        v[name] = v[src]
                        self.evidence[name] = self.evidence[src]
                        break
        if v.get("pcie_gen_max") is None:
            caps = [c for c in (v.get("pcie_gen_device_max"), v.get("pcie_gen_host_max"))
                    if isinstance(c, int)]
            if caps:
                v["pcie_gen_max"] = min(caps)
        for scope in ("volatile", "aggregate"):
            acc = self.ecc[scope]
            v[f"ecc_{scope}_uncorrectable"] = acc.total
            if acc.first is not None:
                self.evidence[f"ecc_{scope}_uncorrectable"] = acc.first
        names = {f.name for f in fields(SmiQGpu)}
        kwargs: dict[str, Any] = {k: val for k, val in v.items() if k in names}
        reasons = None
        if self.reasons is not None and not (self.reasons_na and not self.reasons):
            reasons = tuple(r[0] for r in self.reasons)
        return SmiQGpu(line=self.line, bus_id=self.bus_id, time=self.time,
                       clock_event_reasons_active=reasons, evidence=dict(self.evidence),
                       reason_lines=tuple(self.reasons or ()), lost_lines=tuple(self.lost),
                       **kwargs)


_FALLBACKS: dict[str, tuple[str, ...]] = {
    "power_draw_w": ("power_draw_avg_w", "power_draw_inst_w"),
    "power_limit_w": ("power_limit_current_w", "power_limit_plain_w"),
    "pcie_gen_current": ("pcie_gen_device_current",),
}
"""Fields read under another name on some drivers, in order of preference."""

_TEMPS: dict[str, str] = {
    "gpu current temp": "temp_c", "gpu shutdown temp": "temp_shutdown_c",
    "gpu slowdown temp": "temp_slowdown_c", "gpu max operating temp": "temp_max_operating_c",
    "gpu target temperature": "temp_target_c", "gpu t.limit temp": "temp_tlimit_c",
    "memory current temp": "mem_temp_c"}
_POWER: dict[str, str] = {
    "power draw": "power_draw_w", "average power draw": "power_draw_avg_w",
    "instantaneous power draw": "power_draw_inst_w", "enforced power limit": "power_limit_w",
    "current power limit": "power_limit_current_w", "power limit": "power_limit_plain_w",
    "default power limit": "power_default_limit_w"}


def _field(b: _Build, path: tuple[str, ...], key: str, raw_key: str, val: str | None,
           no: int, text: str) -> None:
    """Store one ``Key : Value`` line by the sections above it; anything else is skipped."""
    last = path[-1] if path else ""
    if any("mig device" in p for p in path):
        return
    if not path:
        if key == "product name":
            b.put("name", _avail(val), no, text)
        elif key == "performance state":
            v = _avail(val)
            b.put("pstate", v if v and _PSTATE.match(v) else None, no, text)
        elif key == "fan speed":
            b.put("fan_pct", _num(val, "%"), no, text)
        elif key in _REASON_SECTIONS:
            b.reasons_na = True
            if b.reasons is None:
                b.reasons = []
        elif key in _REASONS and (val or "").lower() in ("active", "not active"):
            _reason(b, raw_key, val, no, text)
        return
    if any(p in _REASON_SECTIONS for p in path) or (
            key in _REASONS and all(p in _REASONS for p in path)
            and (val or "").lower() in ("active", "not active")):
        _reason(b, raw_key, val, no, text)
        return
    if last == "pcie generation":
        name = {"max": "pcie_gen_max", "current": "pcie_gen_current",
                "device max": "pcie_gen_device_max", "host max": "pcie_gen_host_max",
                "device current": "pcie_gen_device_current"}.get(key)
        if name:
            b.put(name, _int(val), no, text)
    elif last == "link width":
        name = {"max": "pcie_width_max", "current": "pcie_width_current"}.get(key)
        if name:
            b.put(name, _width(val), no, text)
    elif last == "pci" and key == "bus id":
        b.put("pci_bus_id", normalize_bus_id(_avail(val)), no, text)
    elif last == "utilization" and key in ("gpu", "memory"):
        b.put("util_gpu_pct" if key == "gpu" else "util_memory_pct", _num(val, "%"), no, text)
    elif last == "fb memory usage" and key in ("total", "used"):
        b.put(f"fb_{key}_mib", _num(val, "MiB"), no, text)
    elif last == "ecc mode" and key == "current":
        b.put("ecc_mode", _avail(val), no, text)
    elif "volatile" in path or "aggregate" in path:
        _ecc(b, path, key, val, no, text)
    elif "retired pages" in path:
        if key in ("pending page blacklist", "pending", "pending page retirement"):
            b.put("retired_pages_pending", _yes(val), no, text)
        elif key in ("single bit ecc", "double bit ecc") or (
                key == "count" and last in ("single bit ecc", "double bit ecc")):
            which = key if key != "count" else last
            b.put(f"retired_pages_{which.split()[0]}_bit", _int(val), no, text)
    elif last == "remapped rows":
        name = {"correctable error": "remapped_rows_correctable",
                "uncorrectable error": "remapped_rows_uncorrectable"}.get(key)
        if name:
            b.put(name, _int(val), no, text)
        elif key == "pending":
            b.put("remapped_rows_pending", _yes(val), no, text)
        elif key == "remapping failure occurred":
            b.put("remapping_failure", _yes(val), no, text)
    elif last == "temperature" and key in _TEMPS:
        b.put(_TEMPS[key], _num(val, "C"), no, text)
    elif last in ("power readings", "gpu power readings") and key in _POWER:
        b.put(_POWER[key], _num(val, "W"), no, text)


def _reason(b: _Build, raw_key: str, val: str | None, no: int, text: str) -> None:
    if b.reasons is None:
        b.reasons = []
    if (val or "").strip().lower() == "active":
        b.reasons.append((raw_key.strip(), no, text))


def _ecc(b: _Build, path: tuple[str, ...], key: str, val: str | None, no: int,
         text: str) -> None:
    """New style sums every ``… Uncorrectable …`` key; old style reads the ``Double Bit``
    block's ``Total``, or the sum of its parts when the total is missing (cut off)."""
    n = _int(val)
    if n is None:
        return
    acc = b.ecc["volatile" if "volatile" in path else "aggregate"]
    if "double bit" in path:
        acc.add("old_total" if key == "total" else "old_parts", n, no, text)
    elif "uncorrectable" in key and "single bit" not in path:
        acc.add("new_sum", n, no, text)


def parse_smi_q(lines: list[str]) -> SmiQReport:
    """Read every GPU block of every report in ``lines``; never raises on text."""
    blocks: list[_Build] = []
    cur: _Build | None = None
    stack: list[tuple[int, str]] = []
    report: dict[str, str] = {}
    errors: list[tuple[int, str]] = []
    header = False  # between a report's banner (or its first host key) and its first GPU line
    host_block = False  # inside a host-level block of the header (``vGPU Driver Capability``)
    for no, line in enumerate(clean_lines(lines), start=1):
        body = _line_body(line)
        text = body.strip()
        if not text:
            continue
        if _BANNER.match(body):
            cur, stack, header, host_block = None, [], True, False
            continue
        if _ERROR_LINE.search(text) and not _KV.match(body):
            errors.append((no, text))
            if LOST.search(text):
                m = BDF_IN_TEXT.search(text)
                target = cur if cur is not None and (
                    m is None or normalize_bus_id(m.group()) == cur.bus_id) else None
                if target is not None:
                    target.lost.append((no, text))
            stack = []
            continue
        gm = _GPU_LINE.match(body)
        if gm:
            cur = _Build(no, normalize_bus_id(gm.group("bdf")), report.get("timestamp"))
            blocks.append(cur)
            stack, header, host_block = [], False, False
            continue
        kv = _KV.match(body)
        indent = len(body) - len(body.lstrip(" "))
        if header and indent > 0 and host_block:
            continue  # a host-level block's keys (recent drivers): not a GPU
        if indent == 0:
            stack, host_block = [], False
            if header and cur is None:
                # the host part of a report: every key there is the host's, and a block
                # that opens there (``vGPU Driver Capability``) is the host's too
                if kv is None:
                    host_block = True
                else:
                    report.setdefault(kv.group("key").strip().lower(),
                                      (kv.group("val") or "").strip())
                continue
            if kv is None:
                if text != "--":  # grep's group separator: the same GPU goes on
                    cur = None  # a prompt, a command echo, a GPU line cut short
                continue
            key0 = kv.group("key").strip().lower()
            if key0 in _REPORT_KEYS:
                report[key0] = (kv.group("val") or "").strip()
                header = cur is None
                continue
        if kv is not None:
            raw_key, val = kv.group("key").strip(), kv.group("val")
        else:
            sm = _SECTION.match(body)
            if sm is None:
                stack = []
                continue
            raw_key, val = sm.group("name").strip(), None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(name for _, name in stack)
        key = raw_key.lower()
        if cur is None or (cur.bus_id is None and (path, key) in cur.seen
                           and not any(_LIST_SECTIONS.search(p) for p in path)):
            cur = _Build(no, None, report.get("timestamp"))
            blocks.append(cur)
        cur.seen.add((path, key))
        stack.append((indent, key))
        if kv is None:
            if key in _REASON_SECTIONS and cur.reasons is None:
                cur.reasons = []
            continue
        if val is not None and _LOST_VALUE.search(val):
            cur.lost.append((no, text))
        _field(cur, path, key, raw_key, val, no, text)
    frozen = [b.freeze() for b in blocks]
    return SmiQReport(tuple(_views(tuple(frozen))[1]), tuple(frozen),
                      _avail(report.get("driver version")), _avail(report.get("cuda version")),
                      _int(report.get("attached gpus")),
                      _avail(report.get("timestamp")), tuple(errors))


def _overlay(old: SmiQGpu, new: SmiQGpu) -> SmiQGpu:
    """``old`` updated with ``new``'s readings; ``new``'s nulls (a ``-d`` report that lacks
    the section) do not erase earlier ones.  The first block's line is kept."""
    kw: dict[str, Any] = {}
    for f in fields(SmiQGpu):
        value = getattr(new, f.name)
        if f.name not in ("line", "evidence", "reason_lines") and value is not None:
            kw[f.name] = value
    if new.clock_event_reasons_active is not None:
        kw["reason_lines"] = new.reason_lines
    kw["evidence"] = {**old.evidence, **new.evidence}
    return replace(old, **kw)


def _views(blocks: tuple[SmiQGpu, ...]) -> tuple[list[tuple[int, SmiQGpu]], list[SmiQGpu]]:
    """For each block, its GPU's position and the GPU as known after it; and the final list.

    Blocks of the same bus id fold into one entry in first-seen order, later readings winning;
    anonymous excerpts each stay their own.
    """
    merged: list[SmiQGpu] = []
    index: dict[str, int] = {}
    views: list[tuple[int, SmiQGpu]] = []
    for g in blocks:
        if g.bus_id is not None and g.bus_id in index:
            pos = index[g.bus_id]
            merged[pos] = _overlay(merged[pos], g)
        else:
            pos = len(merged)
            if g.bus_id is not None:
                index[g.bus_id] = pos
            merged.append(g)
        views.append((pos, merged[pos]))
    return views, merged


def explain(lines: list[str]) -> KindResult:
    """The contract's ``nvidia-smi-q`` result and its gpu-step findings."""
    report = parse_smi_q(lines)
    return KindResult(KIND, report.to_parsed(), tuple(findings(report, _views(report.blocks)[0])))


def looks_like(lines: list[str]) -> bool:
    """The ``NVSMI LOG`` banner, or enough indented -q key / section names (an excerpt).

    Only `` : `` with a space before the colon counts as a field, so the table's
    ``Driver Version:`` box and lspci's ``LnkSta:`` never do.
    """
    signals = 0
    for line in clean_lines(lines[:LOOKS_LIKE_LINES]):
        body = _line_body(line)
        if _BANNER.match(body):
            return True
        if _GPU_LINE.match(body):
            signals += 1
        elif body[:1] == " ":
            kv = _KV.match(body)
            if kv is not None:
                hit = kv.group("key").strip().lower() in _SIGNAL_KEYS
            else:
                sm = _SECTION.match(body)
                hit = sm is not None and sm.group("name").strip().lower() in _SIGNAL_SECTIONS
            signals += hit
        if signals >= LOOKS_LIKE_SIGNALS:
            return True
    return False


__all__ = ["KIND", "SmiQGpu", "SmiQReport", "explain", "looks_like", "parse_smi_q"]
