"""Xid lines: one finding per distinct Xid code, decoded with ``probes.rules.xid_catalog``.

Every line of one code is folded together (the worst line is the evidence), with the GPUs,
processes, earlier Xids it was caused by and the driver's recovery action; Xid 119 and 120
also imply a ``gsp-timeout``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from probes.rules.logrules.common import CRIT, INFO, WARN
from probes.rules.logrules.kernel.reading import GPU_NAME, Hit, bus_id, evidence
from probes.rules.logrules.lines import LogLine
from probes.rules.result import ExplainFinding
from probes.rules.xid_catalog import XidInfo, lookup
from probes.triage import Code, Severity, Step

XID = re.compile(r"(?<![A-Za-z])Xid\s*\((?P<dev>[^()]{0,48})\)\s*(?::\s*)?(?P<code>\d{1,5})(?!\d)")
_XID_DEV = re.compile(
    r"^\s*(?:PCI:)?(?P<bdf>(?:[0-9A-Fa-f]{1,8}:)?[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2})"
    r"(?P<fn>\.[0-7])?\s*$")
_PROC = re.compile(r"pid='?(?P<pid><unknown>|\d+)'?(?:,\s*name=(?P<name>[^,]*))?,?\s*")
_CAUSED_BY = re.compile(r"caused by previous Xid (?P<code>\d{1,5})")
_RECOVERY = re.compile(r"recovery action changed from .{0,80}?to\s+(?:0x[0-9A-Fa-f]+\s*)?"
                       r"\((?P<act>[^)]{1,80})\)", re.IGNORECASE)
_NONFATAL = re.compile(r"\bNon-?fatal\b", re.IGNORECASE)
_FATAL = re.compile(r"(?<!Non-)\bFatal\b", re.IGNORECASE)
_FAILED = re.compile(r"fail", re.IGNORECASE)
_TIMEOUT = re.compile(r"time(?:d ?)?out", re.IGNORECASE)

_RECOVERY_SEVERITY: Mapping[str, Severity] = {
    "none": INFO, "drain p2p": WARN, "drain and reset": CRIT, "gpu reset required": CRIT,
    "node reboot required": CRIT}


ACTION_GSP = (
    "Reset the GPU (nvidia-smi -r) or power-cycle the node if it persists; update the driver "
    "(the GSP firmware ships with it); if it returns after a power cycle, follow NVIDIA's GPU "
    "debug guidelines")


# --- Xid -----------------------------------------------------------------------------------


@dataclass
class XidAcc:
    """Every line of one Xid code folded together; the worst line is the evidence."""

    info: XidInfo
    line: LogLine
    time: str | None
    severity: Severity
    detail: str
    count: int = 0
    gpus: list[str] = field(default_factory=list)
    caused_by: list[int] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    recovery: str | None = None


def _xid_gpu(dev: str, rest: str) -> str | None:
    """The Xid's ``(PCI:dddd:bb:dd)`` as a bus id; a redacted one falls back to ``GPU6``."""
    m = _XID_DEV.match(dev)
    if m:
        return bus_id(m.group("bdf") + (m.group("fn") or ".0"))
    name = GPU_NAME.search(rest)
    return f"GPU{int(name.group('n'))}" if name else None


def _xid_severity(info: XidInfo, rest: str, recovery: str | None) -> Severity:
    """The catalog's severity, refined by what this line says about itself."""
    if 144 <= info.code <= 150:
        if _NONFATAL.search(rest):
            return WARN
        if _FATAL.search(rest):
            return CRIT
    if info.code in (63, 64) and _FAILED.search(rest):
        return CRIT
    if info.code == 154 and recovery is not None:
        return _RECOVERY_SEVERITY.get(recovery.strip().lower(), WARN)
    return info.severity


def _xid_detail(rest: str) -> tuple[str, str | None]:
    """The message after the code, without pid/name; and the process as ``name (pid)``."""
    rest = rest.lstrip(" ,")
    proc = None
    m = _PROC.match(rest)
    if m:
        name = (m.group("name") or "").strip().strip("'\"")
        pid = m.group("pid")
        if name and name != "<unknown>":
            proc = f"{name} ({pid})" if pid != "<unknown>" else name
        elif pid != "<unknown>":
            proc = f"pid {pid}"
        rest = rest[m.end():]
    detail = _CAUSED_BY.sub("", rest).strip().rstrip("\"'").strip().rstrip(".")
    return (detail[:117] + "…" if len(detail) > 120 else detail), proc


def add_xid(accs: dict[int, XidAcc], line: LogLine, time: str | None,
             m: re.Match[str], text: str) -> XidAcc:
    code = int(m.group("code"))
    info = lookup(code)
    rest = text[m.end():]
    detail, proc = _xid_detail(rest)
    rec = _RECOVERY.search(rest)
    recovery = rec.group("act").strip() if rec else None
    severity = _xid_severity(info, rest, recovery)
    acc = accs.get(code)
    if acc is None:
        acc = accs[code] = XidAcc(info, line, time, severity, detail)
    elif severity.rank > acc.severity.rank:
        acc.line, acc.time, acc.severity, acc.detail = line, time, severity, detail
    acc.count += 1
    gpu = _xid_gpu(m.group("dev"), rest)
    for value, bucket in ((gpu, acc.gpus), (proc, acc.processes)):
        if value is not None and value not in bucket:
            bucket.append(value)
    for cause in _CAUSED_BY.finditer(rest):
        if int(cause.group("code")) not in acc.caused_by:
            acc.caused_by.append(int(cause.group("code")))
    acc.recovery = recovery or acc.recovery
    return acc


def _xid_summary(acc: XidAcc) -> str:
    info = acc.info
    out = f"Xid {info.code} ({info.name})"
    if len(acc.gpus) == 1:
        out += f" on {acc.gpus[0]}"
    elif acc.gpus:
        more = ", …" if len(acc.gpus) > 4 else ""
        out += f" on {len(acc.gpus)} GPUs ({', '.join(acc.gpus[:4])}{more})"
    if acc.detail and acc.detail.lower().rstrip(".") != info.name.lower():
        out += f": {acc.detail}"
    if acc.processes:
        out += f"; process {', '.join(acc.processes[:3])}"
    if acc.caused_by:
        causes = ", ".join(f"{c} ({lookup(c).name})" for c in acc.caused_by)
        out += f"; caused by previous Xid {causes}"
    if acc.recovery:
        out += f"; recovery action now: {acc.recovery}"
    return out


def _xid_action(acc: XidAcc) -> str:
    if acc.recovery:
        return f"{acc.recovery}: the driver's own verdict on what this GPU needs [XID_154]"
    if acc.caused_by:
        worst = max((lookup(c) for c in acc.caused_by), key=lambda i: i.severity.rank)
        listed = ", ".join(str(c) for c in acc.caused_by)
        return (f"This is cleanup after Xid {listed}; act on that: Xid {worst.code}: "
                f"{worst.action}")
    return catalog_action(acc.info)


def catalog_action(info: XidInfo) -> str:
    """The catalog's action for an Xid, and what to investigate if it recurs (a kernel
    line's and a DCGM-reported Xid's alike)."""
    if info.investigate.endswith(("[IGNORE]", "[UNUSED]")) or info.investigate == info.action:
        return info.action
    return f"{info.action}. If it recurs: {info.investigate}"


def xid_finding(acc: XidAcc) -> ExplainFinding:
    info = acc.info
    extra: dict[str, object] = {"xid_name": info.name, "category": info.category,
                                "investigate": info.investigate}
    if len(acc.gpus) > 1:
        extra["gpus"] = list(acc.gpus)
    if acc.caused_by:
        extra["caused_by"] = list(acc.caused_by)
    if acc.recovery:
        extra["recovery_action"] = acc.recovery
    return ExplainFinding(
        Step.SYSLOG, Code.XID, acc.severity, acc.line.number, evidence(acc.line),
        _xid_summary(acc), _xid_action(acc), xid=info.code,
        gpu=acc.gpus[0] if acc.gpus else None, time=acc.time, count=acc.count, extra=extra)


def xid_gsp(acc: XidAcc, m: re.Match[str], text: str) -> Hit | None:
    """Xid 119 is a GSP RPC timeout; Xid 120 is one only when its text says so."""
    code = acc.info.code
    rest = text[m.end():]
    if code != 119 and not (code == 120 and _TIMEOUT.search(rest)):
        return None
    gpu = _xid_gpu(m.group("dev"), rest)
    return Hit(Code.GSP_TIMEOUT, CRIT, f"GSP firmware timeout (Xid {code}) on {gpu or 'a GPU'}",
                ACTION_GSP, gpu=gpu)
