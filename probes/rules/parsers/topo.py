"""``nvidia-smi topo -m`` (also ``-mp`` and ``-p2p r|w|n|a``): the GPU/NIC connection matrix.

Cells are read as whitespace-separated tokens whether the tool printed TABs or spaces:
nvidia-smi pads TAB fields (`` X ``) and leaves an empty field before ``GPU NUMA ID``,
and terminals expand TABs on copy, so positions in characters mean nothing.  The header
names the devices; a row's first cells are links to them in header order, the rest are
its affinity values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import Code, Severity, Step

KIND = "topo"
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: the matrix is near the top of what was pasted."""

_GPU = re.compile(r"^GPU\d+$")
_DEVICE = re.compile(r"^[A-Za-z][\w.\-]*\d$")
"""A device column: GPU3, NIC0, mlx5_0, mlx4_0, bnxt_re1, rocep1s0f0 …"""
_LINK = re.compile(r"^(?:[A-Z][A-Z0-9#]{0,7}|N/A)$")
"""A cell: X, NV12, SYS, NODE, PHB, PXB, PIX, SOC (old SYS) and -p2p's OK, NS, CNS, TNS, U …"""
_NVLINK = re.compile(r"^NV\d+$")
_CROSS = frozenset({"SYS", "SOC"})
"""SOC is the pre-2017 name of SYS (PCIe plus the SMP link between sockets)."""
_PREFIX = re.compile(r"^[^\s:]{1,64}:$")
"""A launcher prefix token (``host:``, ``[rank3]:``, ``10:``) before the first cell."""
_AFFINITY = (("CPU Affinity", "cpu_affinity"), ("NUMA Affinity", "numa_affinity"),
             ("GPU NUMA ID", "gpu_numa_id"))
_CELL_WORD = re.compile(r"^(?:X|NV\d+|SYS|SOC|NODE|PHB|PXB|PIX|PSB|OK|NS|CNS|GNS|TNS|U|N/A)$")
"""Values a header never holds, so a row is never taken for the header."""
_ANSI = re.compile(r"(?:\x1b|\\x1b)\[[0-9;?]*[ -/]*[@-~]")
"""Terminal escapes around header cells (a terminal that underlines or colours the header),
raw or as the ``\\x1b`` text that ``explain``'s input cleaning shows them as."""
_AFFINITY_VALUE = re.compile(r"^\d[\d,\-]*$")
"""A CPU list or NUMA id (``0-15,32-47``, ``1``): never a link cell."""
_NIC_LEGEND = re.compile(r"^\s*(?P<nic>NIC\d+)\s*:\s*(?P<name>\S+)\s*$")
_LEGEND = re.compile(r"^\s*(?:NIC\s+)?Legend\s*(?::\s*)?$", re.IGNORECASE)

ACTION_NIC = ("Give each GPU a NIC on its own socket (NCCL_IB_HCA / NCCL_SOCKET_IFNAME) and pin "
              "ranks to the GPU's NUMA node; check which slots the HCAs sit in")
ACTION_GPU = ("Keep tensor/pipeline groups within one socket (CUDA_VISIBLE_DEVICES) or expect "
              "lower P2P bandwidth across the inter-socket link")
ACTION_INFO = ("NVLink carries GPU traffic; the SYS paths matter only for host-staged copies; "
               "pin data loaders to each GPU's NUMA node")


@dataclass(frozen=True)
class TopoMatrix:
    """What ``nvidia-smi topo -m`` shows: devices, link types, affinities.

    ``cpu_affinity`` / ``numa_affinity`` / ``gpu_numa_id`` are None when the header has no
    such column; ``row_lines`` maps a row to its 1-based input line for evidence.
    """

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    links: Mapping[str, Mapping[str, str]]
    cpu_affinity: Mapping[str, str] | None = None
    numa_affinity: Mapping[str, str] | None = None
    gpu_numa_id: Mapping[str, str] | None = None
    nic_legend: Mapping[str, str] = field(default_factory=dict)
    row_lines: Mapping[str, int] = field(default_factory=dict)
    row_text: Mapping[str, str] = field(default_factory=dict)

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``parsed`` object; absent affinity columns are omitted."""
        out: dict[str, object] = {
            "gpus": list(self.gpus), "nics": list(self.nics),
            "links": {row: dict(cells) for row, cells in self.links.items()}}
        for key, values in (("cpu_affinity", self.cpu_affinity),
                            ("numa_affinity", self.numa_affinity),
                            ("gpu_numa_id", self.gpu_numa_id)):
            if values is not None:
                out[key] = dict(values)
        if self.nic_legend:
            out["nic_legend"] = dict(self.nic_legend)
        return out


@dataclass(frozen=True)
class _Header:
    line: int
    prefix: str | None
    devices: tuple[str, ...]
    affinity: tuple[str, ...]


def _tokens(line: str, prefix: str | None = None) -> list[str]:
    """Whitespace tokens, without a leading launcher prefix (``prefix`` if given)."""
    toks = line.split()
    if toks and (toks[0] == prefix or (prefix is None and len(toks) > 1
                                       and _PREFIX.match(toks[0]) and _GPU.match(toks[1]))):
        toks = toks[1:]
    return toks


_RAN_TOGETHER = re.compile(r"^(?:(?:GPU|NIC)\d+){2,}$|^(?:(?:GPU|NIC)\d+)+CPU$")
_NAME_PART = re.compile(r"(?:GPU|NIC)\d+|CPU")


def _split_run_together(toks: list[str]) -> list[str]:
    """Header names a copy ran together (``NIC11NIC12``, ``NIC9CPU Affinity``), apart."""
    out: list[str] = []
    for tok in toks:
        out += _NAME_PART.findall(tok) if _RAN_TOGETHER.match(tok) else [tok]
    return out


def _header(line: str, no: int) -> _Header | None:
    """The matrix header: device names from GPU0 on, then the affinity column names."""
    raw = _split_run_together(line.split())
    prefix = raw[0] if len(raw) > 1 and _PREFIX.match(raw[0]) and _GPU.match(raw[1]) else None
    toks = _split_run_together(_tokens(line, prefix))
    if not toks or not _GPU.match(toks[0]):
        return None
    devices: list[str] = []
    i = 0
    while i < len(toks) and _DEVICE.match(toks[i]):
        if _CELL_WORD.match(toks[i]):
            return None
        devices.append(toks[i])
        i += 1
    if i < len(toks) and _CELL_WORD.match(toks[i]):
        return None
    rest = " ".join(toks[i:])
    found = sorted((rest.find(label), key) for label, key in _AFFINITY if label in rest)
    return _Header(no, prefix, tuple(devices), tuple(key for _, key in found))


def _row(toks: list[str], n: int) -> tuple[list[str], list[str]]:
    """A row's link cells (at most ``n``, while they look like cells) and its other values.

    Link-shaped tokens past the ``n`` the header names (a header that lost a name) are
    dropped rather than read as affinities: ``SYS`` is never a CPU affinity.
    """
    cells: list[str] = []
    i = 0
    while i < len(toks) and _LINK.match(toks[i]) and not _AFFINITY_VALUE.match(toks[i]):
        if len(cells) < n:
            cells.append(toks[i])
        i += 1
    return cells, toks[i:]


def _header_less(cleaned: list[str]) -> _Header | None:
    """A matrix pasted without its header: assume columns are the rows, in order."""
    names: list[str] = []
    first = 0
    for no, line in enumerate(cleaned, start=1):
        toks = _tokens(line)
        if len(toks) > 1 and _DEVICE.match(toks[0]) and "X" in _row(toks[1:], 10_000)[0]:
            first = first or no
            if toks[0] not in names:
                names.append(toks[0])
    if not any(_GPU.match(n) for n in names):
        return None
    return _Header(first - 1, None, tuple(names), ())


def parse_topo(lines: list[str]) -> TopoMatrix:
    """The matrix of a ``topo -m`` / ``-mp`` / ``-p2p`` output; empty when there is none.

    Args:
        lines: the input's lines, raw (prompts, fences, padding, launcher prefixes tolerated).

    Returns:
        The devices the header names (even if rows are cut off) and every cell present.
    """
    cleaned = [_ANSI.sub("", line) for line in clean_lines(lines)]
    head = next((h for no, line in enumerate(cleaned, start=1)
                 if (h := _header(line, no)) is not None), None) or _header_less(cleaned)
    if head is None:
        return TopoMatrix((), (), {})
    links: dict[str, dict[str, str]] = {}
    aff: dict[str, dict[str, str]] = {key: {} for key in head.affinity}
    row_lines: dict[str, int] = {}
    row_text: dict[str, str] = {}
    for no in range(head.line + 1, len(cleaned) + 1):
        line = cleaned[no - 1]
        if _LEGEND.match(line) or (_header(line, no) is not None and links):
            break
        toks = _tokens(line, head.prefix)
        if len(toks) < 2 or toks[0] in links or not _DEVICE.match(toks[0]):
            continue
        cells, values = _row(toks[1:], len(head.devices))
        if not cells:
            continue
        links[toks[0]] = dict(zip(head.devices, cells, strict=False))
        row_lines[toks[0]], row_text[toks[0]] = no, line.strip()
        for key, value in zip(head.affinity, values, strict=False):
            aff[key][toks[0]] = value
    return TopoMatrix(
        tuple(d for d in head.devices if _GPU.match(d)),
        tuple(d for d in head.devices if not _GPU.match(d)), links,
        aff.get("cpu_affinity"), aff.get("numa_affinity"), aff.get("gpu_numa_id"),
        _nic_legend(cleaned), row_lines, row_text)


def _nic_legend(cleaned: list[str]) -> dict[str, str]:
    """``NIC Legend:`` entries (``NIC0: mlx5_0``), read only after that title."""
    out: dict[str, str] = {}
    in_legend = False
    for line in cleaned:
        if re.match(r"^\s*NIC Legend\s*(?::\s*)?$", line, re.IGNORECASE):
            in_legend = True
        elif in_legend and (m := _NIC_LEGEND.match(line)):
            out[m.group("nic")] = m.group("name")
    return out


def _cross_numa(matrix: TopoMatrix) -> ExplainFinding | None:
    """One finding for every GPU–GPU / GPU–NIC SYS cell; NIC–NIC paths are not GPU traffic."""
    nvlink = any(_NVLINK.match(c) for cells in matrix.links.values() for c in cells.values())
    pairs: dict[frozenset[str], Severity] = {}
    first_row: str | None = None
    for row, cells in matrix.links.items():
        for col, cell in cells.items():
            if cell not in _CROSS or row == col or not (_GPU.match(row) or _GPU.match(col)):
                continue
            both_gpu = bool(_GPU.match(row) and _GPU.match(col))
            pairs[frozenset((row, col))] = (Severity.INFO if both_gpu and nvlink
                                            else Severity.WARNING)
            if first_row is None or matrix.row_lines[row] < matrix.row_lines[first_row]:
                first_row = row
    if first_row is None:
        return None
    worst = max(pairs.values(), key=lambda s: s.rank)
    return ExplainFinding(
        Step.GPU, Code.TOPOLOGY_CROSS_NUMA, worst, matrix.row_lines[first_row],
        matrix.row_text[first_row], _summary(pairs, nvlink), _action(pairs),
        count=len({r for r in matrix.links if any(r in p for p in pairs)}))


def _summary(pairs: dict[frozenset[str], Severity], nvlink: bool) -> str:
    names = sorted(("–".join(sorted(p, key=lambda d: (not _GPU.match(d), _natural(d))))
                    for p in pairs), key=lambda n: [_natural(d) for d in n.split("–")])
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    gg = sum(1 for p in pairs if all(_GPU.match(d) for d in p))
    parts = [f"{n} {what}" for n, what in ((gg, "GPU–GPU"), (len(pairs) - gg, "GPU–NIC")) if n]
    note = "; GPU–GPU traffic can still use NVLink" if nvlink and gg else ""
    return f"{' and '.join(parts)} path(s) cross the inter-socket link (SYS): {shown}{note}"


def _action(pairs: dict[frozenset[str], Severity]) -> str:
    if any(not all(_GPU.match(d) for d in p) for p in pairs):
        return ACTION_NIC
    worst = max(pairs.values(), key=lambda s: s.rank)
    return ACTION_GPU if worst is Severity.WARNING else ACTION_INFO


def _natural(name: str) -> tuple[str, int]:
    r"""``GPU12`` → (``GPU``, 12).  A walk from the end: ``^(.*?)(\d+)$`` read the digits
    again from every position, and ``int()`` refuses a run of thousands of digits."""
    start = len(name)
    while start > 0 and name[start - 1].isdecimal():
        start -= 1
    digits = name[start:]
    return (name[:start], int(digits)) if 0 < len(digits) <= 18 else (name, -1)


def explain(lines: list[str]) -> KindResult:
    """The contract's ``topo`` result and its ``topology-cross-numa`` finding, if any."""
    matrix = parse_topo(lines)
    finding = _cross_numa(matrix)
    return KindResult(KIND, matrix.to_parsed(), (finding,) if finding else ())


def looks_like(lines: list[str]) -> bool:
    """A GPU row holding its own ``X`` cell, or a header from GPU0 to an Affinity column."""
    for line in clean_lines(lines[:LOOKS_LIKE_LINES]):
        toks = _tokens(line)
        if len(toks) < 2 or not _GPU.match(toks[0]):
            continue
        if "X" in _row(toks[1:], 10_000)[0]:
            return True
        if toks[0] == "GPU0" and "Affinity" in toks and _header(line, 0) is not None:
            return True
    return False
