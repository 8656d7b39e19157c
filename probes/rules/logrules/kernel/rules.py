"""Kernel-log rules: the ``syslog`` step of triage (and PCIe link lines for the ``gpu`` step).

Lines arrive peeled by ``probes.rules.logrules.lines``; every rule still matches with
``re.search`` on the message so that a prefix the peeler does not know (``kernel: ``,
``<4>``, a scanner's ``[XID found] "…"`` quoting) cannot hide a line.  Terminal hard-wraps
are undone two ways: a long run of spaces inside a line is squeezed out, and a message that
is cut between two lines is matched on the pair (only when the match spans the cut, so one
line is never counted twice).

Codes follow ``shared/EXPLAIN-CONTRACT.md``: ``xid`` (one finding per distinct Xid code,
decoded with ``probes.rules.xid_catalog``), ``gpu-fallen-off-bus``, ``pcie-aer``, ``oom-killer``,
``gsp-timeout``, ``cpu-thermal``, ``pcie-link-downgraded`` (step ``gpu``), and two more:
``nvrm-api-mismatch`` and ``rm-init-adapter-failed``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from probes.rules.busid import BDF_IN_TEXT
from probes.rules.logrules.common import CRIT, INFO, WARN
from probes.rules.logrules.kernel.reading import (
    NVRM_LEAD,
    Hit,
    bus_id,
    continues,
    evidence,
    gpu_around,
    gpu_in,
    line_times,
    squeeze,
)
from probes.rules.logrules.kernel.xid import (
    ACTION_GSP,
    XID,
    XidAcc,
    add_xid,
    xid_finding,
    xid_gsp,
)
from probes.rules.logrules.lines import LogLine
from probes.rules.parsers.pcie import link_shortfall, parse_speed_gts, parse_width
from probes.rules.result import ExplainFinding, merge_same
from probes.triage import Code, Severity, Step

Builder = Callable[[re.Match[str], str, Sequence[LogLine], int], Hit | None]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    build: Builder


# --- rules ---------------------------------------------------------------------------------

ACTION_OFF_BUS = (
    "Reboot the node (a GPU reset seldom brings it back). If it recurs, look for PCIe AER "
    "errors before it, check the slot, riser and power cables, then contact the vendor")
ACTION_OOM = (
    "Host RAM ran out: cut per-process host memory (dataloader workers, pinned buffers, "
    "prefetch, caching datasets in RAM) or add RAM; if a memory cgroup was the limit "
    "(CONSTRAINT_MEMCG), raise the job's memory request")
ACTION_CPU_THERMAL = (
    "Check CPU cooling (heatsink seating, fans, airflow, inlet temperature) and the BIOS power "
    "limits: a throttled CPU starves the GPUs of input")
ACTION_API_MISMATCH = (
    "Load the matching kernel module: reboot, or unload and reload the nvidia modules. It "
    "follows a driver upgrade without a reboot, or two installs mixed (package and .run)")
ACTION_RM_INIT = (
    "The driver could not bring the GPU up: read the Xid, GSP or fallen-off-the-bus lines "
    "just before it; reset the GPU or power-cycle the node; check power cables and seating "
    "and that this driver (open or proprietary module) supports the GPU")
ACTION_AER: Mapping[Severity, str] = {
    INFO: "Corrected in hardware; a steady stream points at a marginal link (slot, riser, "
          "cable): watch the rate and reseat if it grows",
    WARN: "A transaction was lost: check the device's health, reseat the card or riser and "
          "look for Xid 79 or fallen-off-the-bus after it",
    CRIT: "A fatal PCIe error takes the link down: expect the device to drop off the bus; "
          "reboot, then reseat or replace the card or riser and check the slot",
}
ACTION_LINK: Mapping[Severity, str] = {
    WARN: "Lanes are missing whatever the load: reseat the card, check the riser or cable "
          "and the slot's lane (bifurcation) setting in the BIOS",
    INFO: "Check the link under load (nvidia-smi -q -d PCIE, lspci -vv LnkSta): GPUs train "
          "down when idle; if it stays low under load check the BIOS PCIe generation, risers "
          "and retimers",
}

MEMCG = " (memory cgroup limit)"

_OFF_BUS = re.compile(r"fallen\s+off\s+the\s+bus", re.IGNORECASE)
_OOM = re.compile(
    r"invoked oom-killer|[Oo]ut of memory: Kill(?:ed)? process|\boom-kill:"
    r"|oom_reaper: reaped process|\bKilled process \d+ \([^)]{0,64}\).{0,40}total-vm")
_OOM_VICTIM = re.compile(r"(?:Kill(?:ed)?|reaped) process (?P<pid>\d+) \((?P<name>[^)]{0,64})\)")
"""The victim's name is the kernel's 15-character ``comm``: bounded, a line of repeated
``Killed process 1 (`` is not read to its end from each."""
_OOM_INVOKER = re.compile(r"(?<!\S)(?P<name>\S+) invoked oom-killer")
_CPU_THERMAL = re.compile(
    r"(?P<cpu>CPU\d+): (?P<kind>Core|Package) temperature above threshold"
    r"|cpu clock throttled|(?P<crit>[Cc]ritical temperature reached)")
_EVENTS = re.compile(r"total events = (?P<n>\d+)")
_GSP = re.compile(
    r"Timeout after \d+s of waiting for RPC response from GPU\s*(?:\d+\s*)?GSP"
    r"|_kgspIsHeartbeatTimedOut|(?<!\*)\*{3,}\s*GSP Timeout\s*\*{3,}|\bGSP (?:RPC )?[Tt]imeout\b"
    r"|rpcRecvPoll timedout|kgsp\w{0,60}Timeout"
    r"|(?P<broad>\bGSP\b.{0,400}?\b(?:[Tt]imed ?out|[Tt]imeout)\b)")
"""The broad form reads at most 400 characters past each ``GSP``: unbounded, a line of
``GSP GSP …`` was read to its end from every one."""
_AER = re.compile(
    r"(?:Multiple\s+)?(?P<sev>Corrected|Uncorrect(?:ed|able)\s*\((?:Non-Fatal|Fatal)\))"
    r" error (?:received|message)"
    r"|PCIe Bus Error: severity=(?P<sev2>[^,]+)"
    r"|(?P<sd>Surprise Down|\bSDES\b)|(?P<dpc>\bDPC: containment event)"
    r"|(?P<ghes>\[Hardware Error\]:.{0,512}?section_type: PCIe error)")
_AER_SOURCE = re.compile(r"error (?:message )?received(?: from|:)\s*(?P<dev>[0-9A-Fa-f:.]+)")
_API = re.compile(r"API mismatch: the client has the version (?P<client>[\w.\-]*\w)")
_API_KERNEL = re.compile(r"kernel module has the version (?P<kernel>[\w.\-]*\w)")
_RM_INIT = re.compile(r"RmInitAdapter failed|rm_init_adapter failed")
_RM_CODE = re.compile(r"\((?P<code>0x[0-9A-Fa-f]+:0x[0-9A-Fa-f]+:\d+)\)")
_PCIE_BW = re.compile(
    r"available PCIe bandwidth, limited by (?P<cur>.{1,60}?) link at (?P<port>\S{1,60}?)\s*"
    r"\(capable of [^)]{0,60}?with (?P<cap>.{1,60}?) link\)")
"""Each part bounded (a real one is ``8.0 GT/s PCIe x4``): lazy and unbounded, every repeat of
the line's words read the rest of the line again."""


def _off_bus(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit:
    gpu = gpu_around(lines, i, text)
    return Hit(Code.GPU_FALLEN_OFF_BUS, CRIT,
                f"GPU {gpu or '(bus id not shown)'} has fallen off the bus: it no longer "
                "answers over PCIe", ACTION_OFF_BUS, gpu=gpu)


def _oom(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit:
    victim = _OOM_VICTIM.search(text)
    summary = "The kernel OOM killer ran"
    extra: dict[str, object] = {}
    if victim:
        killed = f"{victim.group('name')} (pid {victim.group('pid')})"
        summary += f" and killed {killed}"
        extra["killed"] = [killed]
    else:
        invoker = _OOM_INVOKER.search(text)
        if invoker:
            summary += f", invoked by {invoker.group('name')}"
    if "CONSTRAINT_MEMCG" in text or "Memory cgroup" in text:
        summary += MEMCG
        extra["limit"] = ["memory cgroup"]
    return Hit(Code.OOM_KILLER, CRIT, summary, ACTION_OOM, extra=extra)


def _cpu_thermal(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit:
    if m.group("crit"):
        return Hit(Code.CPU_THERMAL, CRIT, f"Critical temperature reached: {text.strip()[:120]}",
                    ACTION_CPU_THERMAL)
    cpu = m.group("cpu")
    kind = (m.group("kind") or "CPU").lower()
    events = _EVENTS.search(text)
    summary = f"{cpu or 'CPU'} {kind} temperature above threshold, clock throttled"
    if events:
        summary += f" ({events.group('n')} events)"
    return Hit(Code.CPU_THERMAL, WARN, summary, ACTION_CPU_THERMAL,
                extra={"cpus": [cpu]} if cpu else {})


def _gsp(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit | None:
    if m.group("broad") and "NVRM" not in text:
        return None
    gpu = gpu_in(text)
    kind = "heartbeat" if "eartbeat" in m.group(0) else "RPC"
    return Hit(Code.GSP_TIMEOUT, CRIT,
                f"GSP firmware {kind} timeout on {gpu or 'a GPU'}: the GPU's firmware core "
                "stopped answering the driver", ACTION_GSP, gpu=gpu)


def _aer_severity(m: re.Match[str]) -> tuple[Severity, str]:
    if m.group("sd") or m.group("dpc"):
        return CRIT, "surprise link down" if m.group("sd") else "DPC containment"
    if m.group("ghes"):
        return WARN, "firmware-reported"
    word = (m.group("sev") or m.group("sev2") or "").strip()
    if "Non-Fatal" in word or "Non Fatal" in word:
        return WARN, "uncorrected (non-fatal)"
    if "Fatal" in word:
        return CRIT, "uncorrected (fatal)"
    return INFO, "corrected"


def _aer(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit:
    severity, kind = _aer_severity(m)
    src = _AER_SOURCE.search(text)
    dev = bus_id(src.group("dev")) if src else None
    if dev is None:
        first = BDF_IN_TEXT.search(text)
        dev = bus_id(first.group(0)) if first else None
    return Hit(Code.PCIE_AER, severity, f"PCIe AER {kind} error at {dev or 'a PCIe device'}",
                ACTION_AER[severity], extra={"device": dev} if dev else {})


def _api_mismatch(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit:
    kernel = None
    for line in (text, *(ln.text for ln in lines[i + 1:i + 3])):
        k = _API_KERNEL.search(line)
        if k:
            kernel = k.group("kernel")
            break
    summary = (f"NVIDIA driver version mismatch: a client library has {m.group('client')}, "
               f"the loaded kernel module {kernel or 'another version'}")
    return Hit(Code.NVRM_API_MISMATCH, CRIT, summary, ACTION_API_MISMATCH)


def _rm_init(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit:
    gpu = gpu_in(text)
    code = _RM_CODE.search(text)
    summary = f"GPU {gpu or '(bus id not shown)'} failed to initialise (RmInitAdapter failed"
    summary += f", {code.group('code')})" if code else ")"
    return Hit(Code.RM_INIT_ADAPTER_FAILED, CRIT, summary, ACTION_RM_INIT, gpu=gpu)


def _pcie_bw(m: re.Match[str], text: str, lines: Sequence[LogLine], i: int) -> Hit | None:
    cur_gts, cur_w = parse_speed_gts(m.group("cur")), parse_width(m.group("cur"))
    cap_gts, cap_w = parse_speed_gts(m.group("cap")), parse_width(m.group("cap"))
    severity = link_shortfall(cap_gts, cap_w, cur_gts, cur_w)
    if severity is None:
        return None
    dev_m = BDF_IN_TEXT.search(text[:m.start()])
    dev = bus_id(dev_m.group(0)) if dev_m else None
    what = "width" if severity is WARN else "speed"
    summary = (f"{dev or 'PCIe device'}: PCIe link {what} below capability at enumeration "
               f"(running {_gts(cur_gts)} GT/s x{cur_w or '?'}, capable of {_gts(cap_gts)} "
               f"GT/s x{cap_w or '?'}; limited at {m.group('port')})")
    return Hit(Code.PCIE_LINK_DOWNGRADED, severity, summary, ACTION_LINK[severity],
                step=Step.GPU, gpu=dev)


def _gts(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"


_KEYWORDS = (
    "fallen", "gsp", "heartbeat", "rpcrecvpoll", "rminitadapter", "rm_init_adapter",
    "api mismatch", "error received", "error message", "pcie bus error", "surprise down",
    "sdes", "dpc: containment", "section_type: pcie", "oom-kill", "oom_reaper",
    "out of memory", "killed process", "temperature above", "clock throttled",
    "critical temperature", "pcie bandwidth, limited")
"""Lowercase words every rule's match contains: lines without any skip the rules."""


def _maybe(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in _KEYWORDS)


SPLIT_WINDOW = 60
"""Characters each side of a cut that a split message's keyword must fall within."""

_RULES: tuple[_Rule, ...] = (
    _Rule(_OFF_BUS, _off_bus),
    _Rule(_GSP, _gsp),
    _Rule(_RM_INIT, _rm_init),
    _Rule(_API, _api_mismatch),
    _Rule(_AER, _aer),
    _Rule(_OOM, _oom),
    _Rule(_CPU_THERMAL, _cpu_thermal),
    _Rule(_PCIE_BW, _pcie_bw),
)

_ANY = re.compile("|".join(
    ("(?i:{})" if r.pattern.flags & re.IGNORECASE else "(?:{})").format(
        re.sub(r"\(\?P<\w+>", "(?:", r.pattern.pattern)) for r in _RULES))
"""Any rule at all, in one pass: the cheap test before a split pair is tried rule by rule."""


# --- scanning ------------------------------------------------------------------------------


def _line_hits(lines: Sequence[LogLine], i: int) -> list[Hit]:
    """Every rule that matches line ``i`` on its own (as written, or with gaps squeezed)."""
    text = lines[i].text
    squeezed = squeeze(text)
    if not _maybe(squeezed):
        return []
    variants = (text,) if squeezed == text else (text, squeezed)
    hits = []
    for rule in _RULES:
        for variant in variants:
            m = rule.pattern.search(variant)
            hit = rule.build(m, variant, lines, i) if m else None
            if hit is not None:
                hits.append(hit)
                break
    return hits


def _split_hits(lines: Sequence[LogLine], i: int) -> list[Hit]:
    """Rules that match only across the cut between line ``i`` and the next one."""
    if i + 1 >= len(lines) or XID.search(lines[i + 1].text):
        return []
    head = squeeze(lines[i].text).rstrip()
    tail = NVRM_LEAD.sub("", squeeze(lines[i + 1].text)).lstrip()
    if not head or not tail:
        return []
    edge = head[-SPLIT_WINDOW:]
    joins = [j for j in (head + tail, f"{head} {tail}")
             if _maybe(edge + j[len(head):len(head) + SPLIT_WINDOW + 1]) and _ANY.search(j)]
    if not joins:
        return []
    rules = [r for r in _RULES if not r.pattern.search(tail)]
    hits = []
    for joined in joins:
        for rule in rules:
            for m in rule.pattern.finditer(joined):
                if m.start() < len(head) < m.end():
                    hit = rule.build(m, joined, lines, i)
                    if hit is not None:
                        hits.append(hit)
                    break
        if hits:
            break
    return hits


def _finding(hit: Hit, line: LogLine, time: str | None,
             tail: LogLine | None = None) -> ExplainFinding:
    shown = (line,) if tail is None else (line, tail)
    return ExplainFinding(hit.step, hit.code, hit.severity, line.number, evidence(*shown),
                          hit.summary, hit.action, gpu=hit.gpu, time=time, extra=hit.extra)


def _xid_lines(accs: dict[int, XidAcc], line: LogLine, time: str | None,
               matches: list[re.Match[str]], text: str) -> list[ExplainFinding]:
    """Fold each Xid record of a line (a flattened log may hold several) into ``accs``;
    returns the ``gsp-timeout`` findings that Xid 119/120 records imply."""
    out = []
    ends = [m.start() for m in matches[1:]] + [len(text)]
    for m, end in zip(matches, ends, strict=True):
        acc = add_xid(accs, line, time, m, text[:end])
        gsp = xid_gsp(acc, m, text[:end])
        if gsp is not None:
            out.append(_finding(gsp, line, time))
    return out


def _merge(found: list[ExplainFinding]) -> list[ExplainFinding]:
    """One finding per code: the first line at the worst severity is the evidence."""
    ordered = sorted(found, key=lambda f: (-f.severity.rank, f.line))
    lists: dict[tuple[str, str, int | None], dict[str, list[object]]] = {}
    for f in ordered:
        bucket = lists.setdefault(f.key, {})
        for k, v in f.extra.items():
            if isinstance(v, list):
                bucket.setdefault(k, []).extend(x for x in v if x not in bucket.get(k, []))
    out = []
    for f in merge_same(ordered):
        merged = {**f.extra, **lists.get(f.key, {})}
        out.append(_retell(replace(f, extra=merged)))
    return out


def _retell(f: ExplainFinding) -> ExplainFinding:
    """Summaries that speak for the whole incident rather than its first line."""
    cpus = f.extra.get("cpus")
    if f.code == Code.CPU_THERMAL and isinstance(cpus, list) and len(cpus) > 1:
        shown = ", ".join(str(c) for c in cpus[:6]) + (", …" if len(cpus) > 6 else "")
        return replace(f, summary=f"CPU thermal throttling on {len(cpus)} CPUs ({shown}): "
                                  f"temperature above threshold, clock throttled")
    killed = f.extra.get("killed")
    if f.code == Code.OOM_KILLER and isinstance(killed, list) and killed:
        names = ", ".join(str(k) for k in killed[:4]) + (", …" if len(killed) > 4 else "")
        memcg = MEMCG if f.extra.get("limit") else ""
        return replace(f, summary=f"The kernel OOM killer ran and killed {names}{memcg}")
    return f


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """Kernel-log findings of one input, one per distinct (step, code, xid), in line order.

    Args:
        lines: the input's lines as ``probes.rules.logrules.lines.log_lines`` peeled them.

    Returns:
        Findings of the ``syslog`` step (and ``gpu``-step PCIe link findings).
    """
    times, own_time = line_times(lines)
    xids: dict[int, XidAcc] = {}
    found: list[ExplainFinding] = []
    in_xid = False
    for i, line in enumerate(lines):
        text = squeeze(line.text)
        matches = list(XID.finditer(text))
        if matches:
            found.extend(_xid_lines(xids, line, times[i], matches, text))
            in_xid = True
            continue
        if in_xid and continues(lines, own_time, i):
            continue
        in_xid = False
        hits = _line_hits(lines, i)
        found.extend(_finding(h, line, times[i]) for h in hits)
        if not hits and i + 1 < len(lines) and not own_time[i + 1]:
            found.extend(_finding(h, line, times[i], lines[i + 1])
                         for h in _split_hits(lines, i))
    out = _merge(found) + [xid_finding(acc) for acc in xids.values()]
    return sorted(out, key=lambda f: f.line)
