"""``iostat -x`` text of any sysstat version (9.x to 12.x), basic ``iostat -d``, and ``-o JSON``.

Columns are found by name, never by position, because every sysstat version moved them
(10.x ``avgqu-sz`` and one ``await``, 11.x ``aqu-sz``, 12.x discard/flush columns and
``--pretty`` with Device last).  Only the last complete report counts: the first report
of ``iostat -x 1`` is the average since boot, the last is what the disk does now.

A report counts as cut off when input ends inside it with a partial row, or ends (no
blank line after it) with fewer devices than the report before; then the report before
counts.  A lone report counts with the rows it has, since that is all there is.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate

from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import DISK_SATURATED_UTIL, Code, Severity, Step
from probes.wire.samples import DiskStats

KIND = "iostat"
LONG_QUEUE = 32.0
"""aqu-sz that means saturation where %util is missing: a full SATA NCQ queue."""

_KB, _MB, _SEC = 1.0, 1024.0, 0.5
_FIELDS: dict[str, tuple[str, float]] = {
    "r/s": ("r_s", 1.0), "r": ("r_s", 1.0), "w/s": ("w_s", 1.0), "w": ("w_s", 1.0),
    "rkb/s": ("rkb_s", _KB), "rkb": ("rkb_s", _KB), "rmb/s": ("rkb_s", _MB),
    "rsec/s": ("rkb_s", _SEC), "kb_read/s": ("rkb_s", _KB), "kb_read_per_sec": ("rkb_s", _KB),
    "mb_read/s": ("rkb_s", _MB), "mb_read_per_sec": ("rkb_s", _MB),
    "blk_read/s": ("rkb_s", _SEC),
    "wkb/s": ("wkb_s", _KB), "wkb": ("wkb_s", _KB), "wmb/s": ("wkb_s", _MB),
    "wsec/s": ("wkb_s", _SEC), "kb_wrtn/s": ("wkb_s", _KB), "kb_wrtn_per_sec": ("wkb_s", _KB),
    "mb_wrtn/s": ("wkb_s", _MB), "mb_wrtn_per_sec": ("wkb_s", _MB),
    "blk_wrtn/s": ("wkb_s", _SEC),
    "r_await": ("r_await", 1.0), "w_await": ("w_await", 1.0),
    "aqu-sz": ("aqu_sz", 1.0), "avgqu-sz": ("aqu_sz", 1.0),
    "%util": ("util", 1.0), "util": ("util", 1.0),
}
"""Column (lowercased) → DiskStats field and factor to kB/s (sectors and blocks are 512 B)."""
_SIZE_FIELDS = frozenset({"rkb_s", "wkb_s"})
_OTHER_COLUMNS = frozenset({
    "rrqm/s", "wrqm/s", "%rrqm", "%wrqm", "avgrq-sz", "rareq-sz", "wareq-sz", "areq-sz",
    "svctm", "await", "tps", "kb_read", "kb_wrtn", "kb_dscd/s", "kb_dscd", "mb_read",
    "mb_wrtn", "blk_read", "blk_wrtn", "d/s", "dkb/s", "dmb/s", "dsec/s", "drqm/s", "%drqm",
    "d_await", "dareq-sz", "f/s", "f_await", "kb/s", "mb/s", "sec/s", "rqm/s",
})
_JSON_ONLY = frozenset({"r", "w", "rkb", "wkb", "util"})
"""sysstat 11.5 JSON keys; as bare words in text they would make prose look like a header."""
_KNOWN = (frozenset(_FIELDS) | _OTHER_COLUMNS) - _JSON_ONLY
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: an iostat header is near the top of its output."""
_DEVICE = frozenset({"device", "device:", "dev", "dev:"})
_NUM = re.compile(r"^(-?\d+(?:[.,]\d+)?)([BkMGTP%]?)$")
_HUMAN = {"": 1.0, "%": 1.0, "B": 1 / 1024, "k": 1.0, "M": 1024.0, "G": 1024.0 ** 2,
          "T": 1024.0 ** 3, "P": 1024.0 ** 4}
"""``--human`` suffixes on size columns, relative to kB (sysstat uses powers of 1024)."""
_COUNT_HUMAN = {"": 1.0, "%": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}

_JSON_DISK = re.compile(r'"disk"\s*:\s*\[')
_JSON_OBJ = re.compile(r"\{[^{}]*\}")
_JSON_KV = re.compile(r'"(?P<k>[^"\\]{1,40})"\s*:\s*(?:"(?P<s>[^"\\]{0,400})"'
                      r"|(?P<n>-?\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?))")
_JSON_NAME_KEYS = ("disk_device", "disk-device", "device")

ACTION = ("Find what fills the disk (iotop, pidstat -d 1); move datasets and checkpoints to "
          "local NVMe or raise data-loader prefetch so the GPUs are not starved")


@dataclass(frozen=True)
class IostatReport:
    """The report that counts: its devices (as the live console's ``DiskStats``) and where
    each row is in the input (1-based), for evidence."""

    devices: tuple[DiskStats, ...] = ()
    lines: Mapping[str, int] = field(default_factory=dict)
    texts: Mapping[str, str] = field(default_factory=dict)
    complete: bool = True
    json: bool = False

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``parsed`` object."""
        return {"devices": {d.name: {"r_s": d.r_s, "w_s": d.w_s, "rkb_s": d.rkb_s,
                                     "wkb_s": d.wkb_s, "r_await": d.r_await,
                                     "w_await": d.w_await, "aqu_sz": d.aqu_sz, "util": d.util}
                            for d in self.devices}}


@dataclass
class _Report:
    """A report being read: rows as (name, {column: text}, line number, line text)."""

    rows: list[tuple[str, dict[str, str], int, str]] = field(default_factory=list)
    terminated: bool = False
    cut: bool = False


def _number(text: str, size: bool) -> float | None:
    """``12.5``, ``0,00`` (de_DE), ``9.4k`` / ``6.1G`` (``--human``), ``6.6%`` → float."""
    m = _NUM.match(text)
    if m is None:
        return None
    scale = (_HUMAN if size else _COUNT_HUMAN).get(m.group(2))
    if scale is None:
        return None
    return float(m.group(1).replace(",", ".")) * scale


def _stats(name: str, values: Mapping[str, str]) -> DiskStats:
    """DiskStats from a row's raw values, by column name; None where the column is absent."""
    out: dict[str, float | None] = {}
    for col, text in values.items():
        spec = _FIELDS.get(col.lower())
        if spec is None or spec[0] in out:
            continue
        v = _number(text.strip(), spec[0] in _SIZE_FIELDS)
        out[spec[0]] = None if v is None else round(v * spec[1], 6)
    return DiskStats(name, **out)


def _header(toks: list[str]) -> tuple[int, list[str], str] | None:
    """(prefix length, value columns, device position) of a device header, else None."""
    known = sum(1 for t in toks if t.lower() in _KNOWN)
    dev = next((i for i, t in enumerate(toks) if t.lower() in _DEVICE), None)
    if known < 2 or (dev is None and known < 3) or any(_NUM.match(t) for t in toks):
        return None
    if dev is None:
        return 0, toks, "auto"
    if dev == len(toks) - 1 and dev > 0 and toks[0].lower() in _KNOWN:
        return 0, toks[:dev], "last"
    return dev, toks[dev + 1:], "first"


def _split_row(toks: list[str], n: int, where: str) -> tuple[str, list[str]] | None:
    if where == "auto":
        where = "last" if _NUM.match(toks[0]) else "first"
    if where == "first":
        return toks[0], toks[1:]
    return " ".join(toks[n:]), toks[:n]


def _text_reports(cleaned: list[str]) -> list[_Report]:
    """Every device report of a text input, in order."""
    reports: list[_Report] = []
    cur: _Report | None = None
    head: tuple[int, list[str], str] = (0, [], "first")
    pending: str | None = None
    for no, line in enumerate(cleaned, start=1):
        toks = line.split()
        h = _header(toks)
        if h is not None:
            if cur is not None:
                cur.terminated = True
            cur, head, pending = _Report(), h, None
            reports.append(cur)
            continue
        if cur is None:
            continue
        if not toks:
            cur.terminated, cur = True, None
            continue
        toks = toks[head[0]:]
        state = _row(cur, toks, head, pending, no, line)
        if state == "end":
            cur.terminated, cur = True, None
        pending = toks[0] if state == "name" else None
    return reports


def _row(cur: _Report, toks: list[str], head: tuple[int, list[str], str], pending: str | None,
         no: int, line: str) -> str:
    """Add one data line to ``cur``: ``row``, ``name`` (``-h`` name-only line), ``cut``, ``end``."""
    cols = head[1]
    n = len(cols)
    if len(toks) == 1 and not _NUM.match(toks[0]) and head[2] != "last":
        return "name"
    if pending is not None and len(toks) == n and all(_NUM.match(t) for t in toks):
        cur.rows.append((pending, dict(zip(cols, toks, strict=True)), no, line.strip()))
        return "row"
    split = _split_row(toks, n, head[2]) if toks else None
    if split is None or not split[0] or _NUM.match(split[0]):
        return "end"
    name, values = split
    if not all(_NUM.match(v) for v in values):
        return "end"
    if len(values) < n:
        cur.cut = True
        return "cut"
    if len(values) > n:
        return "end"
    cur.rows.append((name, dict(zip(cols, values, strict=True)), no, line.strip()))
    return "row"


def _json_reports(cleaned: list[str]) -> list[_Report]:
    """Every ``"disk": [...]`` array of a (possibly invalid or cut) sysstat JSON document."""
    text = "\n".join(cleaned)
    line_starts = list(accumulate((len(c) + 1 for c in cleaned[:-1]), initial=0))
    starts = [m.end() for m in _JSON_DISK.finditer(text)]
    reports: list[_Report] = []
    for i, start in enumerate(starts):
        seg_end = starts[i + 1] if i + 1 < len(starts) else len(text)
        rep = _Report()
        end = start
        for m in _JSON_OBJ.finditer(text, start, seg_end):
            kv = {k.group("k"): k.group("s") if k.group("s") is not None else k.group("n")
                  for k in _JSON_KV.finditer(m.group(0))}
            name = next((kv[k] for k in _JSON_NAME_KEYS if kv.get(k)), None)
            if name is None:
                continue
            no = bisect_right(line_starts, m.start())
            rep.rows.append((name, {k: v for k, v in kv.items() if k not in _JSON_NAME_KEYS},
                             no, cleaned[no - 1].strip()))
            end = m.end()
        rep.terminated = "]" in text[end:seg_end]
        rep.cut = not rep.terminated
        reports.append(rep)
    return reports


def _choose(reports: list[_Report]) -> _Report | None:
    """The last complete report (see the module docstring for "complete")."""
    full = [r for r in reports if r.rows]
    if not full:
        return None
    last = full[-1]
    if len(full) > 1:
        prev = full[-2]
        if last.cut or (not last.terminated and len(last.rows) < len(prev.rows)):
            return prev
    return last


def _is_json(cleaned: list[str]) -> bool:
    text = "\n".join(cleaned[:400])
    return '"sysstat"' in text or '"disk_device"' in text or bool(_JSON_DISK.search(text))


def parse_iostat(lines: list[str]) -> IostatReport:
    """The last complete report of an ``iostat`` text or JSON output.

    Args:
        lines: the input's lines, raw (banners, avg-cpu blocks, timestamps, fences tolerated).

    Returns:
        Its devices; an empty report when the input has no device rows.
    """
    cleaned = clean_lines(lines)
    as_json = _is_json(cleaned)
    reports = _json_reports(cleaned) if as_json else _text_reports(cleaned)
    rep = _choose(reports)
    if rep is None:
        return IostatReport(json=as_json)
    devices = tuple(_stats(name, values) for name, values, _, _ in rep.rows)
    return IostatReport(devices, {r[0]: r[2] for r in rep.rows}, {r[0]: r[3] for r in rep.rows},
                        not rep.cut, as_json)


def _saturated(d: DiskStats) -> bool:
    if d.util is not None:
        return d.util >= DISK_SATURATED_UTIL
    return d.aqu_sz is not None and d.aqu_sz >= LONG_QUEUE


def _finding(rep: IostatReport) -> ExplainFinding | None:
    """One ``disk-saturated`` finding for every busy device of the report that counts.

    %util ≥ 90 is the contract's trigger; where a layout has no %util (basic or read-only
    columns), an aqu-sz of at least LONG_QUEUE stands in for it.
    """
    busy = sorted((d for d in rep.devices if _saturated(d)), key=lambda d: rep.lines[d.name])
    if not busy:
        return None
    parts = []
    for d in busy[:6]:
        util = f"{d.util:.1f} %util" if d.util is not None else "%util unknown"
        queue = f", queue {d.aqu_sz:.1f}" if d.aqu_sz is not None else ""
        parts.append(f"{d.name} {util}{queue}")
    more = f" and {len(busy) - 6} more" if len(busy) > 6 else ""
    first = busy[0]
    return ExplainFinding(Step.GPU, Code.DISK_SATURATED, Severity.WARNING, rep.lines[first.name],
                          rep.texts[first.name], f"disk saturated: {', '.join(parts)}{more}",
                          ACTION, count=len(busy))


def explain(lines: list[str]) -> KindResult:
    """The contract's ``iostat`` result and its ``disk-saturated`` finding, if any."""
    rep = parse_iostat(lines)
    finding = _finding(rep)
    return KindResult(KIND, rep.to_parsed(), (finding,) if finding else ())


def looks_like(lines: list[str]) -> bool:
    """An iostat device header, an ``avg-cpu:`` header, or sysstat JSON."""
    cleaned = clean_lines(lines[:LOOKS_LIKE_LINES])
    if _is_json(cleaned):
        return True
    for line in cleaned:
        toks = line.split()
        if _header(toks) is not None or (toks[:2] == ["avg-cpu:", "%user"]):
            return True
    return False
