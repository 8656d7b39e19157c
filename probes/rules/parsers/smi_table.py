"""The plain ``nvidia-smi`` table of any driver generation, and its error-only output.

The table is a set of boxes: the version header (``NVIDIA-SMI … Driver Version: …``), the
GPU box (two rows per GPU before driver ~450, three with the ``MIG M.`` row after), on MIG
hosts a ``MIG devices:`` box, and the ``Processes:`` box.  Cells are read by splitting a
row on ``|``, never by character position: the box is 79, 91 or ~100 columns wide
depending on the driver, pastes indent it or glue fences and prompts to it, and a value
that fills its cell (``|100%``) leaves no space beside the border.

A row whose right border is missing was cut off mid-line: in its last cell only the tokens
followed by whitespace are kept, so ``644W /  7`` yields no power cap rather than 7 W.

``N/A`` and ``ERR!`` cells read as null.  ``ERR!`` is what nvidia-smi prints when NVML
stops answering for a GPU (fallen off the bus, GSP timeout); judgement call: a GPU whose
name or at least three cells read ``ERR!`` is ``gpu-lost`` ``critical``, one with one or
two such cells (a single failed sensor read) is ``gpu-lost`` ``warning``.

Several snapshots in one paste are merged: a later row for the same GPU (index and bus id)
replaces the earlier one, new GPUs are appended; processes come from the last Processes box.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.rules.busid import normalize_bus_id
from probes.rules.parsers.smi_table_findings import findings
from probes.rules.parsers.smi_table_records import (
    SmiTable,
    SmiTableGpu,
    SmiTableMigDevice,
    SmiTableProcess,
)
from probes.rules.result import KindResult
from probes.rules.text import clean_lines

KIND = "nvidia-smi-table"
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: the table is near the top of what was pasted."""
ERROR_ONLY_OTHER_LINES = 2
"""Unrelated lines an error-only paste may carry (a stray prompt, ``Segmentation fault``)."""
TABLE_IN_LOG_LINES = 20
"""Lines beyond twice the table's own that make an input a log that printed a table."""

_UNAVAILABLE = frozenset({"N/A", "ERR!", "[N/A]", "Unknown", "[Unknown]", "-", ""})
_ERR = "ERR!"
_SMI = re.compile(r"NVIDIA-SMI\s+(?P<smi>\d[\w.\-]*)?")
_DRIVER = re.compile(r"Driver Version:\s*(?P<drv>[\w.\-]+)?")
_CUDA = re.compile(r"CUDA Version:\s*(?P<cuda>[\w.\-/]+)")
_BORDER = re.compile(r"^[+|][+| ]*[-=][-=+| ]*$")
_PREFIX = re.compile(r"^(?:\S{1,64}:\s+|\[[^\]]{1,64}\]:?\s*)(?=[+|])")
"""A launcher or host prefix (``gpu01: ``, ``[rank3]: ``) glued before a box line."""
_LEADING_FENCE = re.compile(r"^(?:>\s?)*`{3,}\s*|^(?:>\s?)+")
"""A markdown fence glued before text (a fence then ``Thu Mar 12 …``; its tag is not eaten), or
quote marks left after indentation (``    > |…``), which the shared cleaner keeps as text."""
_GPU_ROW = re.compile(r"^\s*(?P<idx>\d{1,4})(?:\s+(?P<rest>\S(?:.*\S)?))?\s*$")
_MIG_ROW = re.compile(r"^\s*(?P<gpu>\d{1,4})\s+(?P<gi>\d+|N/A)\s+(?P<ci>\d+|N/A)"
                      r"\s+(?P<dev>\d+|N/A)\s*$")
_PERSISTENCE = frozenset({"On", "Off", "N/A", "ERR!", "WDDM", "TCC", "MCDM"})
"""The last token of the name cell: Persistence-M on Linux, the driver model on Windows."""
_MEM = re.compile(r"(?<!\d)(?P<used>\d+(?:\.\d+)?)\s*(?P<uu>[KMG]i?B)\s*/\s*"
                  r"(?:(?P<total>\d+(?:\.\d+)?)\s*(?P<tu>[KMG]i?B))?")
_MEM_ONE = re.compile(r"^(?P<v>\d+(?:\.\d+)?)\s*(?P<u>[KMG]i?B)$")
_TO_MIB = {"KiB": 1 / 1024, "KB": 1 / 1024, "MiB": 1.0, "MB": 1.0, "GiB": 1024.0, "GB": 1024.0}
_PCT = re.compile(r"^(\d+(?:\.\d+)?)%$")
_TEMP = re.compile(r"^(-?\d+(?:\.\d+)?)C$")
_WATTS = re.compile(r"^(\d+(?:\.\d+)?)W$")
_PERF = re.compile(r"^P\d{1,2}$")
_INT = re.compile(r"^\d+$")
_PTYPE = re.compile(r"^(?:C|G|M|C\+G|G\+C|M\+C|M\+G|M\+C\+G)$")
_TIMESTAMP = re.compile(
    r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r" [ \d]\d \d\d:\d\d:\d\d \d{4}$")

_ERROR_LINE = re.compile(
    r"Unable to determine the device handle|\bGPU is lost\b|No devices were found"
    r"|NVIDIA-SMI has failed|Failed to initialize NVML|Driver/library version mismatch"
    r"|infoROM is corrupted|Unable to (?:query|retrieve|get)\b.{0,200}\bGPU", re.IGNORECASE)
"""What nvidia-smi prints instead of (or above) its table when NVML fails."""
_ERROR_ONLY = re.compile(
    r"^(?:Unable to determine the device handle for GPU|No devices were found"
    r"|NVIDIA-SMI has failed because|Failed to initialize NVML)", re.IGNORECASE)
_ROW1_LOOSE = re.compile(
    r"^\|\s*\d{1,4}\s+\S.*\|\s*(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")

# --- cells and values ----------------------------------------------------------------------

def _header(box: str) -> tuple[str | None, str | None, str | None] | None:
    """(nvidia-smi, driver, CUDA) versions of the table's header line, None for another line.

    Three searches, each reading the line once: as one pattern with ``.*?`` between the parts,
    the rest of the line was read again from every ``NVIDIA-SMI`` and every space after it.
    """
    head = _SMI.search(box)
    if head is None:
        return None
    smi_at = head.start("smi") if head.group("smi") else head.end()
    # after the version, or (as the one pattern backtracked) glued to its end
    drv = _DRIVER.search(box, head.end()) or _DRIVER.search(box, smi_at)
    if drv is None:
        return None
    smi = box[smi_at:min(head.end(), drv.start())] or None
    cuda = _CUDA.search(box, drv.end())
    return smi, drv.group("drv"), cuda.group("cuda") if cuda else None


def _box_line(line: str) -> str | None:
    """The box part of a cleaned line (``|…`` or ``+…``), without indentation or prefixes."""
    s = _LEADING_FENCE.sub("", line.strip())
    if s[:1] in ("|", "+"):
        return s
    m = _PREFIX.match(s)
    return s[m.end():] if m else None


def _cells(box: str) -> list[str]:
    """A row's cells; in a row cut off before its right border, the last (partial) token of
    the last cell is dropped, and a cell left empty by that becomes ``None``-valued (``\\0``)."""
    body = box[1:] if box.startswith("|") else box
    cut = not body.endswith("|")
    if not cut:
        body = body[:-1]
    cells = body.split("|")
    if cut:
        last = cells[-1]
        kept = re.sub(r"(?<!\S)\S+$", "", last)
        cells[-1] = kept + "\0"
    return cells


def _trim(cell: str) -> tuple[str, bool]:
    """(cell text without the cut marker, whether the cell was cut)."""
    return (cell[:-1], True) if cell.endswith("\0") else (cell, False)


def _num(text: str | None, pattern: re.Pattern[str]) -> float | None:
    """A number from a unit-suffixed token; int when it is whole, so JSON prints ``62``."""
    if text is None:
        return None
    m = pattern.match(text)
    if m is None:
        return None
    v = float(m.group(1))
    return int(v) if v.is_integer() else v


def _mem(text: str) -> tuple[float | None, float | None]:
    """``27412MiB /  81559MiB`` → (27412, 81559); N/A, ERR!, cut → None where missing."""
    m = _MEM.search(text)
    if m is None:
        return None, None

    def conv(v: str | None, u: str | None) -> float | None:
        if v is None or u is None:
            return None
        x = float(v) * _TO_MIB[u]
        return int(x) if x.is_integer() else round(x, 3)

    return conv(m.group("used"), m.group("uu")), conv(m.group("total"), m.group("tu"))


def _word(tok: str | None) -> str | None:
    """A text cell value; N/A and ERR! are null."""
    return None if tok is None or tok in _UNAVAILABLE else tok


def _int(tok: str | None) -> int | None:
    return int(tok) if tok is not None and _INT.match(tok) else None


# --- the GPU box ---------------------------------------------------------------------------

@dataclass
class _GpuBuild:
    index: int
    line: int
    text: str
    values: dict[str, object] = field(default_factory=dict)
    errs: list[str] = field(default_factory=list)
    rows: int = 1

    def err(self, name: str, tok: str | None) -> None:
        if tok == _ERR and name not in self.errs:
            self.errs.append(name)

    def freeze(self) -> SmiTableGpu:
        v = self.values
        return SmiTableGpu(
            self.index, _s(v.get("name")), _s(v.get("bus_id")), _s(v.get("persistence")),
            _f(v.get("fan_pct")), _f(v.get("temp_c")), _s(v.get("perf")), _f(v.get("power_w")),
            _f(v.get("power_cap_w")), _f(v.get("mem_used_mib")), _f(v.get("mem_total_mib")),
            _f(v.get("util_pct")), _s(v.get("compute_mode")), _s(v.get("mig_mode")),
            _i(v.get("ecc_uncorr")), _s(v.get("disp_a")), tuple(self.errs), self.line, self.text)


def _s(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _f(v: object) -> float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _i(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _row1(cells: list[str], no: int, text: str) -> _GpuBuild | None:
    """``|   0  NVIDIA H100 80GB HBM3   On  |   00000000:00:0B.0 Off |   0 |`` → a new GPU."""
    first, cut0 = _trim(cells[0])
    m = _GPU_ROW.match(first)
    if m is None or (cut0 and not first.strip()):
        return None
    if len(cells) >= 2:
        bus_cell = _trim(cells[1])[0].split()
        if not bus_cell or normalize_bus_id(bus_cell[0]) is None:
            return None
    elif not cut0:
        return None
    g = _GpuBuild(int(m.group("idx")), no, text)
    toks = (m.group("rest") or "").split()
    if toks and toks[-1] in _PERSISTENCE and len(toks) >= 2:
        g.values["persistence"] = _word(toks[-1])
        g.err("persistence", toks[-1])
        toks = toks[:-1]
        name: str | None = " ".join(toks)
    else:
        name = None if cut0 else " ".join(toks) or None
    g.err("name", name)
    g.values["name"] = _word(name)
    if len(cells) >= 2:
        toks, _ = _trim(cells[1])
        parts = toks.split()
        if parts:
            g.values["bus_id"] = normalize_bus_id(parts[0])
        if len(parts) >= 2:
            g.values["disp_a"] = _word(parts[1])
            g.err("disp_a", parts[1])
    if len(cells) >= 3:
        ecc = _trim(cells[2])[0].split()
        if ecc:
            g.values["ecc_uncorr"] = _int(ecc[0])
            g.err("ecc_uncorr", ecc[0])
    return g


def _row2(g: _GpuBuild, cells: list[str]) -> None:
    """``| N/A   62C    P0   644W /  700W |   27412MiB /  81559MiB |   100%   Default |``."""
    toks = _trim(cells[0])[0].split()
    if "/" in toks:
        left, right = toks[:toks.index("/")], toks[toks.index("/") + 1:]
    else:
        left, right = toks, []
    shapes = {"fan_pct": _PCT, "temp_c": _TEMP, "perf": _PERF, "power_w": _WATTS}
    if len(left) >= 4:
        pairs = list(zip(shapes, left[-4:], strict=True))
    else:
        pairs = []
        for tok in left:  # too few tokens: place each by its shape
            name = next((n for n, pat in shapes.items() if pat.match(tok)), None)
            if name is not None and name not in dict(pairs):
                pairs.append((name, tok))
    for name, tok in pairs:
        g.err(name, tok)
        if name == "perf":
            g.values[name] = tok if _PERF.match(tok) else None
        else:
            g.values[name] = _num(tok, shapes[name])
    if right:
        g.err("power_cap_w", right[0])
        g.values["power_cap_w"] = _num(right[0], _WATTS)
    if len(cells) >= 2:
        mem = _trim(cells[1])[0]
        g.values["mem_used_mib"], g.values["mem_total_mib"] = _mem(mem)
        for tok in mem.split():
            g.err("mem_used_mib", tok)
    if len(cells) >= 3:
        util = _trim(cells[2])[0].split()
        if util:
            g.err("util_pct", util[0])
            g.values["util_pct"] = _num(util[0], _PCT)
        if len(util) >= 2:
            mode = " ".join(util[1:])
            g.err("compute_mode", mode)
            g.values["compute_mode"] = _word(mode)


def _row3(g: _GpuBuild, cells: list[str]) -> None:
    """``|                |                |   Disabled |``: the MIG M. cell of newer drivers."""
    if len(cells) >= 3:
        mig = _trim(cells[-1])[0].strip()
        if mig:
            g.err("mig_mode", mig)
            g.values["mig_mode"] = _word(mig)


# --- the MIG and process boxes ---------------------------------------------------------------

@dataclass
class _MigBuild:
    dev: SmiTableMigDevice
    rows: int = 1


def _mig_row1(cells: list[str], no: int, text: str) -> SmiTableMigDevice | None:
    """``|  0    1   0   0  |  19MiB /  9984MiB | 14      0 |  1   0    0    0    0 |``."""
    m = _MIG_ROW.match(_trim(cells[0])[0])
    if m is None or _trim(cells[0])[1]:
        return None
    used = total = None
    sm = ecc = None
    if len(cells) >= 2:
        used, total = _mem(_trim(cells[1])[0])
    if len(cells) >= 3:
        toks = _trim(cells[2])[0].split()
        sm = _int(toks[0]) if toks else None
        ecc = _int(toks[1]) if len(toks) >= 2 else None
    return SmiTableMigDevice(int(m.group("gpu")), _int(m.group("gi")), _int(m.group("ci")),
                             _int(m.group("dev")), used, total, None, None, sm, ecc, no, text)


def _process(cell: str, header: str) -> SmiTableProcess | None:
    """One Processes row; header-driven (GI/CI, Type), shape-driven when the header is cut."""
    text, _cut = _trim(cell)
    spans = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    toks = [t for t, _, _ in spans]
    if len(toks) < 2 or not _INT.match(toks[0]):
        return None
    if header:
        has_gi = bool(re.search(r"\bGI\b", header))
        has_type = bool(re.search(r"\bType\b", header))
    else:
        has_gi = len(toks) >= 4 and all(t == "N/A" or _INT.match(t) for t in toks[1:4])
        has_type = True
    i = 1
    gi = ci = None
    if has_gi:
        if len(toks) < 4:
            return None
        gi, ci, i = _int(toks[1]), _int(toks[2]), 3
    if i >= len(toks) or not _INT.match(toks[i]):
        return None
    pid = int(toks[i])
    i += 1
    ptype = None
    if has_type and i < len(toks) and _PTYPE.match(toks[i]):
        ptype, i = toks[i], i + 1
    mem: float | None = None
    end = len(spans)
    if end > i and (toks[-1] in _UNAVAILABLE or _MEM_ONE.match(toks[-1])):
        m = _MEM_ONE.match(toks[-1])
        if m:
            x = float(m.group("v")) * _TO_MIB[m.group("u")]
            mem = int(x) if x.is_integer() else round(x, 3)
        end -= 1
    name = text[spans[i][1]:spans[end - 1][2]] if end > i else None
    return SmiTableProcess(_int(toks[0]), gi, ci, pid, ptype, name, mem)


# --- the whole table -------------------------------------------------------------------------

@dataclass
class _Snapshot:
    gpus: list[_GpuBuild] = field(default_factory=list)
    procs: list[SmiTableProcess] | None = None
    migs: list[_MigBuild] = field(default_factory=list)


@dataclass
class _State:
    section: str | None = None
    head: bool = False
    header_text: str = ""
    gpu: _GpuBuild | None = None
    mig: _MigBuild | None = None


def parse_smi_table(lines: list[str]) -> SmiTable:
    """The table (or error lines) in an ``nvidia-smi`` paste; empty when there is none.

    Args:
        lines: the input's lines, raw (fences, quotes, indentation, prefixes tolerated).

    Returns:
        Versions, GPUs, processes, MIG devices and nvidia-smi's error lines.
    """
    snaps: list[_Snapshot] = [_Snapshot()]
    st = _State()
    driver = cuda = smi = stamp = None
    errors: list[str] = []
    error_lines: list[int] = []
    for no, line in enumerate(clean_lines(lines), start=1):
        box = _box_line(line)
        if box is None:
            text = _LEADING_FENCE.sub("", line.strip())
            if _ERROR_LINE.search(text):
                errors.append(text)
                error_lines.append(no)
            elif stamp is None and _TIMESTAMP.match(text):
                stamp = text
            continue
        h = _header(box)
        if h:
            if snaps[-1].gpus or snaps[-1].procs is not None or driver is not None:
                snaps.append(_Snapshot())
            smi, driver, cuda = h
            st = _State("top")
            continue
        if _BORDER.match(box):
            if "=" in box:
                st.head = False
            else:
                st.gpu, st.mig = None, None
            continue
        if "MIG devices:" in box:
            st = _State("mig", True)
            continue
        if re.search(r"\bProcesses:", box):
            st = _State("proc", True)
            snaps[-1].procs = []
            continue
        if re.search(r"Bus-Id|Persistence-M|TCC/WDDM", box):
            st = _State("gpu", True)
            continue
        if st.head:
            st.header_text += " " + box
            continue
        _data_row(box, no, st, snaps[-1])
    return _freeze(snaps, driver, cuda, smi, stamp, errors, error_lines)


def _data_row(box: str, no: int, st: _State, snap: _Snapshot) -> None:
    """Apply one data row to the section it is in (or, before any header, its shape)."""
    cells = _cells(box)
    text = box.strip()
    if st.section in (None, "top", "gpu"):
        g = _row1(cells, no, text)
        if g is not None:
            st.section, st.gpu = "gpu", g
            snap.gpus.append(g)
            return
        if st.section == "gpu" and st.gpu is not None:
            st.gpu.rows += 1
            if st.gpu.rows == 2:
                _row2(st.gpu, cells)
            elif st.gpu.rows == 3:
                _row3(st.gpu, cells)
            return
    if st.section in (None, "top", "gpu", "mig"):
        m = _mig_row1(cells, no, text)  # four integers then memory: never a GPU row
        if m is not None:
            st.section, st.mig = "mig", _MigBuild(m)
            snap.migs.append(st.mig)
            return
        if st.section == "mig" and st.mig is not None and st.mig.rows == 1 and len(cells) >= 2:
            st.mig.rows = 2
            used, total = _mem(_trim(cells[1])[0])
            d = st.mig.dev
            st.mig.dev = SmiTableMigDevice(d.gpu, d.gi, d.ci, d.mig_dev, d.mem_used_mib,
                                           d.mem_total_mib, used, total, d.sm, d.ecc_uncorr,
                                           d.line, d.text)
            return
    if st.section == "proc" and snap.procs is not None:
        p = _process(" ".join(cells), st.header_text)
        if p is not None:
            snap.procs.append(p)


def _freeze(snaps: list[_Snapshot], driver: str | None, cuda: str | None, smi: str | None,
            stamp: str | None, errors: list[str], error_lines: list[int]) -> SmiTable:
    rows = [g.freeze() for s in snaps for g in s.gpus]
    merged: dict[tuple[int, str | None], SmiTableGpu] = {}
    for g in rows:
        merged[(g.index, g.bus_id)] = g
    procs: list[SmiTableProcess] = []
    for s in snaps:
        if s.procs is not None and (s.procs or not procs):
            procs = s.procs
    migs: dict[tuple[int, int | None, int | None, int | None], SmiTableMigDevice] = {}
    for s in snaps:
        for m in s.migs:
            migs[(m.dev.gpu, m.dev.gi, m.dev.ci, m.dev.mig_dev)] = m.dev
    return SmiTable(_word(driver), _word(cuda), tuple(merged.values()), tuple(procs),
                    tuple(errors), tuple(migs.values()), stamp, tuple(rows), tuple(error_lines),
                    _word(smi))


def explain(lines: list[str]) -> KindResult:
    """The contract's ``nvidia-smi-table`` result and its gpu-step findings."""
    table = parse_smi_table(lines)
    return KindResult(KIND, table.to_parsed(), tuple(findings(table)))


def looks_like(lines: list[str]) -> bool:
    """The version header, a border plus a GPU row, or nvidia-smi's error-only output.

    A job log that printed the table at start-up is still a log: when lines outside the
    table's box outnumber it clearly, the log rules must read them.
    """
    border = row = False
    error_only = False
    others = boxes = 0
    for line in clean_lines(lines[:LOOKS_LIKE_LINES]):
        box = _box_line(line)
        if box is not None:
            boxes += 1
            if _header(box) and "Driver Version" in box:
                border = row = True
            border = border or bool(re.match(r"^[+|]-{5,}", box))
            row = row or bool(_ROW1_LOOSE.match(box))
            continue
        text = _LEADING_FENCE.sub("", line.strip())
        if not text:
            continue
        if _ERROR_ONLY.match(text):
            error_only = True
        elif not (_ERROR_LINE.search(text) or "nvidia-smi" in text.lower()
                  or _TIMESTAMP.match(text) or re.match(r"^\S*[#$>%]\s*$", text)):
            others += 1
    if border and row:
        return others <= boxes * 2 + TABLE_IN_LOG_LINES
    return error_only and others <= ERROR_ONLY_OTHER_LINES


__all__ = ["KIND", "SmiTable", "SmiTableGpu", "SmiTableMigDevice", "SmiTableProcess",
           "explain", "looks_like", "parse_smi_table"]
