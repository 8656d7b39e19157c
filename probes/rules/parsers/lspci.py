"""``lspci -vv`` (whole, ``-s`` one device, or an excerpt): each device's PCIe link state.

What matters for triage is LnkCap (what the link can do) against LnkSta (what it trained
to).  Excerpts pasted from issues often start in the middle of a block, so a LnkCap or
LnkSta seen before any device header opens an anonymous device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.rules.busid import normalize_bus_id
from probes.rules.parsers.pcie import link_shortfall
from probes.rules.result import ExplainFinding, KindResult, merge_same
from probes.rules.text import clean_lines
from probes.triage import Code, Severity, Step

KIND = "lspci"
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: device headers and link lines start early in any excerpt."""

_BDF = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_CLASS_WORD = (r"(?:controller|bridge|device|memory|peripheral|processor|accelerators?|IOMMU"
               r"|SMBus|class|counters|instrumentation|station|fibre channel)")
_HEADER_BODY = (rf"(?P<bdf>{_BDF})\s+"
                rf"(?P<desc>[^\s:][^:]{{0,80}}?{_CLASS_WORD}[^:]{{0,80}}:.*)$")
_LAUNCHER = r"^\s*(?:[\w.\-\[\]]+:\s+)?"
"""Indentation, or a ``host: `` prefix that pdsh/clush put in front."""
_HEADER = re.compile(r"(?:^|(?<=\s))" + _HEADER_BODY, re.IGNORECASE)
"""``3b:00.0 3D controller: NVIDIA …`` anywhere a word starts: at the line start, after a
launcher prefix, or glued after prose when a paste lost its newline (``…under load 62:00.0
VGA compatible controller: NVIDIA``).  The class name must read like one so that an
``mm:ss.d`` time is not taken for a BDF."""
_HEADER_AT_START = re.compile(_LAUNCHER + _HEADER_BODY, re.IGNORECASE)
"""The header where lspci prints it: what recognises an lspci paste (a log line with a time
and a word like "controller" in it is no reason to read the whole input as lspci)."""
_LNKCAP = re.compile(_LAUNCHER + r"LnkCap:\s*(?P<rest>.*)$")
_LNKSTA = re.compile(_LAUNCHER + r"LnkSta:\s*(?P<rest>.*)$")
"""LnkCap/LnkSta where lspci prints them, first on their line; one further into a line is a
sentence quoting it ("the LnkSta: Speed 2.5GT/s line worries me"), not a link state."""
_NUMA = re.compile(r"^\s*NUMA node:\s*(?P<n>\d{1,6})\s*$")
_CAPS = re.compile(r"^\s*Capabilities:\s*\[[0-9a-fA-F]+\]")
_SPEED = re.compile(r"Speed\s+(?P<v>\d+(?:[.,]\d+)?)\s*(?:GT/s|Gb/s)", re.IGNORECASE)
_WIDTH = re.compile(r"Width\s+x\s?(?P<v>\d{1,3})(?!\d)", re.IGNORECASE)
_SPEED_DOWN = re.compile(r"Speed\s+\S+\s*\(downgraded\)", re.IGNORECASE)
_WIDTH_DOWN = re.compile(r"Width\s+x?\d+\s*\(downgraded\)", re.IGNORECASE)

ACTION_WIDTH = ("Reseat the card or check the riser/slot; compare lspci LnkCap and LnkSta "
                "under load")
ACTION_SPEED = ("Check LnkSta again while the GPU is busy; a link that trains down only when "
                "idle is power saving, one that stays low under load needs a reseat or BIOS check")


@dataclass(frozen=True)
class PcieLink:
    """One PCI function's link as ``lspci -vv`` shows it (LnkCap vs LnkSta).

    ``line`` is the 1-based line of the device header (or of its first link line in a
    header-less excerpt); ``sta_line`` that of LnkSta, the evidence of a downgrade.
    """

    address: str | None
    cap_speed_gts: float | None = None
    cap_width: int | None = None
    sta_speed_gts: float | None = None
    sta_width: int | None = None
    speed_flagged: bool = False
    """LnkSta printed ``(downgraded)`` after the speed."""
    width_flagged: bool = False
    """LnkSta printed ``(downgraded)`` after the width."""
    numa_node: int | None = None
    description: str | None = None
    line: int = 0
    sta_line: int | None = None
    sta_text: str | None = None

    @property
    def downgraded(self) -> bool:
        """LnkSta is below LnkCap, or lspci says ``(downgraded)``."""
        return self.width_flagged or self.speed_flagged or link_shortfall(
            self.cap_speed_gts, self.cap_width, self.sta_speed_gts, self.sta_width) is not None

    @property
    def shortfall(self) -> Severity | None:
        """The shared judgement, falling back on lspci's own ``(downgraded)`` marks.

        A link at x0 has not trained at all: an empty slot's root port, not a slow device
        (an endpoint whose link is down cannot be read by lspci), so it is no finding.
        """
        if self.sta_width == 0:
            return None
        sev = link_shortfall(self.cap_speed_gts, self.cap_width,
                             self.sta_speed_gts, self.sta_width)
        if sev is None and self.width_flagged:
            return Severity.WARNING
        if sev is None and self.speed_flagged:
            return Severity.INFO
        return sev

    def to_parsed(self) -> dict[str, object]:
        """The contract's device object."""
        out: dict[str, object] = {}
        if self.address is not None:
            out["address"] = self.address
        out.update({"cap_speed_gts": _num(self.cap_speed_gts), "cap_width": self.cap_width,
                    "sta_speed_gts": _num(self.sta_speed_gts), "sta_width": self.sta_width,
                    "downgraded": self.downgraded})
        if self.numa_node is not None:
            out["numa_node"] = self.numa_node
        if self.description is not None:
            out["description"] = self.description
        return out


def _num(v: float | None) -> float | int | None:
    """``16.0`` → ``16`` so the JSON reads as lspci printed it."""
    if v is not None and v.is_integer():
        return int(v)
    return v


@dataclass
class _Block:
    """A device being read; frozen into a PcieLink at the end."""

    address: str | None
    line: int
    description: str | None = None
    cap: tuple[float | None, int | None] | None = None
    sta: tuple[float | None, int | None, bool, bool] | None = None
    sta_line: int | None = None
    sta_text: str | None = None
    numa: int | None = None

    def freeze(self) -> PcieLink:
        cap_gts, cap_w = self.cap or (None, None)
        sta_gts, sta_w, s_flag, w_flag = self.sta or (None, None, False, False)
        return PcieLink(self.address, cap_gts, cap_w, sta_gts, sta_w, s_flag, w_flag,
                        self.numa, self.description, self.line, self.sta_line, self.sta_text)


def _speed(text: str) -> float | None:
    m = _SPEED.search(text)
    if m is None:
        return None
    try:
        return float(m.group("v").replace(",", "."))
    except ValueError:
        return None


def _width(text: str) -> int | None:
    m = _WIDTH.search(text)
    return int(m.group("v")) if m else None


def parse_lspci(lines: list[str]) -> tuple[PcieLink, ...]:
    """Every device of an ``lspci -vv`` text, in order; an empty tuple for no lspci at all.

    Args:
        lines: the input's lines, raw (fences, quotes and padding are tolerated).

    Returns:
        One PcieLink per device header, plus anonymous ones for header-less link lines.
    """
    blocks: list[_Block] = []
    cur: _Block | None = None
    for no, line in enumerate(clean_lines(lines), start=1):
        m = _HEADER.search(line)
        if m:
            cur = _Block(normalize_bus_id(m.group("bdf")), no, m.group("desc").strip())
            blocks.append(cur)
            continue
        cur = _read_field(line, no, cur, blocks)
    if not blocks and any(_CAPS.match(line) for line in clean_lines(lines)):
        blocks.append(_Block(None, 0))
    return tuple(b.freeze() for b in blocks)


def _read_field(line: str, no: int, cur: _Block | None, blocks: list[_Block]) -> _Block | None:
    """Apply one body line to the current block; returns the (possibly new) current block."""
    cap, sta, numa = _LNKCAP.search(line), _LNKSTA.search(line), _NUMA.match(line)
    if not (cap or sta or numa):
        return cur
    if cur is None or (cur.address is None and (
            (cap and cur.cap is not None) or (sta and cur.sta is not None))):
        cur = _Block(None, no)
        blocks.append(cur)
    if cap and cur.cap is None:
        rest = cap.group("rest")
        cur.cap = (_speed(rest), _width(rest))
    elif sta and cur.sta is None:
        rest = sta.group("rest")
        cur.sta = (_speed(rest), _width(rest), bool(_SPEED_DOWN.search(rest)),
                   bool(_WIDTH_DOWN.search(rest)))
        cur.sta_line, cur.sta_text = no, line.strip()
    elif numa:
        cur.numa = int(numa.group("n"))
    return cur


def _finding(dev: PcieLink) -> ExplainFinding | None:
    sev = dev.shortfall
    if sev is None:
        return None
    name = dev.address or "PCIe device"
    cap = f"{_fmt(dev.cap_speed_gts)} GT/s x{dev.cap_width or '?'}"
    sta = f"{_fmt(dev.sta_speed_gts)} GT/s x{dev.sta_width or '?'}"
    what = "width" if sev is Severity.WARNING else "speed"
    return ExplainFinding(
        Step.GPU, Code.PCIE_LINK_DOWNGRADED, sev, dev.sta_line or dev.line, dev.sta_text or "",
        f"{name}: PCIe link {what} below capability (running {sta}, capable of {cap})",
        ACTION_WIDTH if sev is Severity.WARNING else ACTION_SPEED, gpu=dev.address)


def _fmt(v: float | None) -> str:
    return "?" if v is None else f"{_num(v)}"


def explain(lines: list[str]) -> KindResult:
    """The contract's ``lspci`` result: devices and a ``pcie-link-downgraded`` finding."""
    devices = parse_lspci(lines)
    findings = [f for f in (_finding(d) for d in devices) if f is not None]
    findings.sort(key=lambda f: (-f.severity.rank, f.line))
    return KindResult(KIND, {"devices": [d.to_parsed() for d in devices]},
                      tuple(merge_same(findings)))


def looks_like(lines: list[str]) -> bool:
    """A device header line, a LnkCap/LnkSta line or a ``Capabilities: [xx]`` line."""
    for line in clean_lines(lines[:LOOKS_LIKE_LINES]):
        if _HEADER_AT_START.match(line) or _LNKCAP.search(line) or _LNKSTA.search(line) or \
                _CAPS.match(line):
            return True
    return False
