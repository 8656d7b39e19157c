"""Output of NVIDIA's nccl-tests (``all_reduce_perf``, ``all_gather_perf``, … ``sendrecv_perf``).

Every binary prints the same frame (``src/util.cu`` / ``src/common.cu`` of NVIDIA/nccl-tests)::

    # nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 …
    # Using devices
    #  Rank  0 Group  0 Pid  41521 on    gpu-a01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    #                                                              out-of-place  …  in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong …
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)         …
             8             2     float     sum      -1    12.90    0.00    0.00      0 …
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 92.3405

Shapes this reads, all seen in public output: the current table (``root`` column,
``#wrong`` counts, ``N/A`` when validation is off with ``-c 0``); the 2019–2022 table without
``root`` whose ``error`` column is a maximum deviation printed ``0e+00``; the first releases'
``bytes N type op … res`` table with times in milliseconds; ``-I`` per-iteration columns;
``-T`` time stamps at the end of a row; rank lines with a ``[0000:18:00]`` PCI address or an
old ``[0x18]`` bus number; ``#`` lost to a markdown renderer; Open MPI's ``[1,0]<stdout>:``
tags and the prefixes :func:`probes.rules.logrules.lines.peel` knows.  Sizes may step by a
factor or by a fixed increment: rows are read one by one, never predicted.

One input may hold several runs (``all_reduce_perf`` then ``all_gather_perf``): ``parsed``
describes the first, and ``tests`` lists every one when there are several.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from probes.rules.busid import normalize_bus_id
from probes.rules.logrules.lines import peel
from probes.rules.result import KindResult

KIND = "nccl-tests"
LOOKS_LIKE_LINES = 4000
"""How far the recogniser reads: a header, a table's rows or its footer lies early in any
nccl-tests output (a tail is all table)."""

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall",
       "alltoallv", "sendrecv", "hypercube", "gather", "scatter")
_OP = re.compile(r"\b(" + "|".join(OPS) + r")_perf\w*")
_COMMAND = re.compile(r"(?:^|[\s/])(" + "|".join(OPS) + r")_perf\w*(?=\s+-|\s*$)")
"""A command line that runs a test (a build's "Linking … all_reduce_perf" is no run)."""
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")
_CONFIG = re.compile(
    r"^#?\s*nThread\s+(?P<threads>\d+)\s+nGpus\s+(?P<gpus>\d+)\s+minBytes\s+(?P<min>\d+)"
    r"\s+maxBytes\s+(?P<max>\d+)\s+step:\s*(?P<step>\d+)\((?P<how>factor|bytes)\)"
    r"(?:.*?warmup iters:\s*(?P<warmup>\d+))?(?:.*?\biters:\s*(?P<iters>\d+))?")
_RANK = re.compile(
    r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<pci>[0-9a-fA-Fx:.]+)\]\s*(?P<name>.*)$")
_HEADER = re.compile(r"^#?\s*(?P<first>size|bytes)\s+(?:count|N)\s+type\b(?P<rest>.*)$")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(?P<n>\d+)")
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<bw>[-+\w.]+)")
_START = re.compile(r"Collective test (?:starting|concluded):\s*(?P<op>\S+)")
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,15}$")
_STAMP = re.compile(r"^(?:\d{4}-\d\d-\d\d(?:[T_]\S*)?|\d\d:\d\d:\d\d(?:\.\d+)?|\d{8,})$")
"""A ``-T`` time stamp's pieces at the end of a row (date, time of day, epoch)."""
NA = "N/A"


@dataclass(frozen=True)
class Rank:
    """One ``#  Rank`` line: which GPU on which host took part."""

    rank: int
    host: str
    device: int
    bus_id: str | None
    """Contract form (``0000:18:00.0``) when the line prints a PCI address; an old
    ``[0x18]`` bus number alone is no address, so it is null there."""
    name: str

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "host": self.host, "device": self.device,
                "bus_id": self.bus_id, "name": self.name}


@dataclass(frozen=True)
class Row:
    """One size of the table; ``ip_`` fields are the in-place half (null when absent)."""

    line: int
    text: str
    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    time_us: float | None
    algbw_gbs: float | None
    busbw_gbs: float | None
    wrong: float | None
    ip_time_us: float | None
    ip_algbw_gbs: float | None
    ip_busbw_gbs: float | None
    ip_wrong: float | None

    @property
    def best_busbw(self) -> float | None:
        """The better of the two halves: what the links can carry at this size."""
        vals = [v for v in (self.busbw_gbs, self.ip_busbw_gbs) if v is not None]
        return max(vals) if vals else None

    def to_json(self) -> dict[str, object]:
        return {"size_bytes": self.size_bytes, "count": self.count, "type": self.type,
                "redop": self.redop, "root": self.root, "time_us": self.time_us,
                "algbw_gbs": self.algbw_gbs, "busbw_gbs": self.busbw_gbs,
                "wrong": _whole(self.wrong), "ip_time_us": self.ip_time_us,
                "ip_algbw_gbs": self.ip_algbw_gbs, "ip_busbw_gbs": self.ip_busbw_gbs,
                "ip_wrong": _whole(self.ip_wrong)}


@dataclass(frozen=True)
class NcclTest:
    """One run of one nccl-tests binary as far as the input shows it."""

    op: str | None
    rows: tuple[Row, ...]
    ranks: tuple[Rank, ...]
    avg_busbw_gbs: float | None
    avg_line: int | None
    out_of_bounds: int | None
    oob_line: int | None
    oob_text: str
    wrong_is_count: bool
    """``#wrong`` counts elements; the old ``error`` column was a deviation, not a count."""
    config: dict[str, object]
    first_line: int

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def separate_processes(self) -> bool:
        """The same rank number printed twice: each process ran its own one-rank test (a
        binary built without ``MPI=1`` started by ``mpirun``; NVIDIA/nccl-tests #107, #294),
        so the rank lines describe no single communicator."""
        numbers = [r.rank for r in self.ranks]
        return len(numbers) != len(set(numbers))

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``nccl-tests`` summary, plus ``devices``, ``hosts`` and ``config``."""
        out: dict[str, object] = {
            "op": self.op, "rows": [r.to_json() for r in self.rows],
            "avg_busbw_gbs": self.avg_busbw_gbs, "out_of_bounds": self.out_of_bounds,
            "ranks": len(self.ranks), "devices": [r.to_json() for r in self.ranks],
            "hosts": list(self.hosts)}
        if self.separate_processes:
            out["separate_processes"] = True
        if self.config:
            out["config"] = dict(self.config)
        return out


@dataclass
class _Layout:
    """What the header says about the columns (defaults fit a headerless tail)."""

    root: bool | None = None
    group: int = 4
    time_scale: float = 1.0
    wrong_is_count: bool | None = None


@dataclass
class _Builder:
    first_line: int
    op: str | None = None
    rows: list[Row] = field(default_factory=list)
    ranks: list[Rank] = field(default_factory=list)
    avg: float | None = None
    avg_line: int | None = None
    oob: int | None = None
    oob_line: int | None = None
    oob_text: str = ""
    layout: _Layout = field(default_factory=_Layout)
    config: dict[str, object] = field(default_factory=dict)
    counted_wrong: bool = True

    @property
    def started(self) -> bool:
        return bool(self.rows or self.avg_line or self.oob_line)

    def freeze(self) -> NcclTest:
        return NcclTest(self.op, tuple(self.rows), tuple(self.ranks), self.avg, self.avg_line,
                        self.oob, self.oob_line, self.oob_text, self.counted_wrong,
                        dict(self.config), self.first_line)


def _whole(v: float | None) -> float | int | None:
    if v is None or not math.isfinite(v):
        return v
    return int(v) if v == int(v) else v


def _num(tok: str) -> float | None:
    """A cell's value: a number, or null for ``N/A``."""
    if tok == NA or not _NUMBER.match(tok):
        return None
    return float(tok)


def message(raw: str) -> str:
    """A line without launcher prefixes or Open MPI's ``[1,0]<stdout>:`` tag."""
    text = peel(raw)[0]
    for _ in range(2):
        m = _MPI_TAG.match(text)
        if m is None:
            break
        text = peel(text[m.end():])[0]
    return text


def _header(rest: str, first: str) -> _Layout:
    words = rest.split()
    return _Layout(root="root" in words, group=8 if "i_min" in words else 4,
                   time_scale=1000.0 if first == "bytes" else 1.0,
                   wrong_is_count="#wrong" in words)


def parse_row(text: str, layout: _Layout | None = None, line: int = 0) -> Row | None:
    """One table row, or None when ``text`` is not one (or is cut short)."""
    lay = layout or _Layout()
    toks = text.split()
    if len(toks) < 11 or not (toks[0].isdigit() and toks[1].isdigit()) \
            or not _TYPE.match(toks[2]):
        return None
    rest = toks[3:]
    redop: str | None = None
    if rest and rest[0] != NA and not _NUMBER.match(rest[0]):
        redop = rest.pop(0)
    while rest and _STAMP.match(rest[-1]) and len(rest) % lay.group not in (0, 1):
        rest.pop()
    if any(t != NA and not _NUMBER.match(t) for t in rest):
        return None
    g = lay.group if lay.group == 8 or len(rest) not in (16, 17) else 8
    has_root = lay.root if lay.root is not None else len(rest) % 4 == 1
    root: int | None = None
    if has_root:
        if not rest or not re.match(r"^-?\d+$", rest[0]):
            return None
        root = int(rest.pop(0))
    if len(rest) != 2 * g:
        return None
    vals = [_num(t) for t in rest]
    oop, inp = vals[:g], vals[g:]
    scale = lay.time_scale
    return Row(line, text, int(toks[0]), int(toks[1]), toks[2], redop, root,
               _scaled(oop[0], scale), oop[1], oop[2], oop[3],
               _scaled(inp[0], scale), inp[1], inp[2], inp[3])


def _scaled(v: float | None, scale: float) -> float | None:
    return None if v is None else v * scale


def parse(lines: list[str]) -> list[NcclTest]:
    """Every nccl-tests run in ``lines``, in input order (empty when there is none)."""
    tests: list[_Builder] = []
    cur: _Builder | None = None

    def fresh(i: int) -> _Builder:
        nonlocal cur
        if cur is None or cur.started:
            cur = _Builder(i)
            tests.append(cur)
        return cur

    for i, raw in enumerate(lines, 1):
        text = message(raw)
        if not text:
            continue
        m = _CONFIG.match(text)
        if m is not None:
            b = fresh(i)
            b.config = {"threads": int(m["threads"]), "gpus_per_thread": int(m["gpus"]),
                        "min_bytes": int(m["min"]), "max_bytes": int(m["max"]),
                        "step": int(m["step"]), "step_kind": m["how"]}
            continue
        if (m := _START.search(text)) is not None:
            op = _OP.search(m["op"] + "_perf" if "_perf" not in m["op"] else m["op"])
            if "starting" in text:
                fresh(i)
            if cur is not None and op is not None and cur.op is None:
                cur.op = op.group(1)
            continue
        if (m := _RANK.match(text)) is not None:
            b = cur if cur is not None and not cur.started else fresh(i)
            b.ranks.append(Rank(int(m["rank"]), m["host"], int(m["device"]),
                                _pci(m["pci"]), m["name"].strip()))
            continue
        if (m := _HEADER.match(text)) is not None:
            b = cur if cur is not None and not (cur.avg_line or cur.oob_line) else fresh(i)
            b.layout = _header(m["rest"], m["first"])
            b.counted_wrong = bool(b.layout.wrong_is_count)
            continue
        if (m := _OOB.match(text)) is not None:
            b = cur if cur is not None else fresh(i)
            b.oob, b.oob_line, b.oob_text = int(m["n"]), i, raw
            continue
        if (m := _AVG.match(text)) is not None:
            b = cur if cur is not None else fresh(i)
            b.avg, b.avg_line = _num(m["bw"]), i
            continue
        if (cur is None or not cur.rows) and (op := _COMMAND.search(text)) is not None \
                and "Linking" not in text:
            fresh(i).op = op.group(1)  # the command line: "$ ./build/all_reduce_perf -b 8"
            continue
        row = parse_row(text, cur.layout if cur is not None else None, i)
        if row is not None:
            b = cur if cur is not None and not (cur.avg_line or cur.oob_line) else fresh(i)
            if b.layout.wrong_is_count is None:
                b.counted_wrong = b.counted_wrong and _looks_counted(row.text)
            b.rows.append(row)
    return [t.freeze() for t in tests if t.rows or t.avg_line or t.oob_line]


def _looks_counted(text: str) -> bool:
    """Without a header, a ``#wrong`` count prints as an integer, a deviation as ``0e+00``."""
    return "e+" not in text and "e-" not in text


def _pci(cell: str) -> str | None:
    """``[0000:18:00]`` (domain, bus, device) in contract form; ``[0x18]`` gives none."""
    parts = cell.split(":")
    if len(parts) != 3:
        return None
    return normalize_bus_id(f"{cell}.0")


def looks_like(lines: list[str]) -> bool:
    """Two table rows, or a footer line beside a header or a row: nccl-tests' own shape."""
    rows = footer = header = 0
    for raw in lines[:LOOKS_LIKE_LINES]:
        text = message(raw)
        if _OOB.match(text) or _AVG.match(text):
            footer += 1
        elif _HEADER.match(text) or _CONFIG.match(text):
            header += 1
        elif parse_row(text) is not None:
            rows += 1
        if rows >= 2 or (footer and (header or rows)):
            return True
    return False


def explain(lines: list[str]) -> KindResult:
    """The ``nccl-tests`` kind's summary; findings come from the log rules' nccl-tests family
    (:mod:`probes.rules.logrules.nccl_tests`), which ``explain`` runs over the same lines so
    NCCL warnings printed beside the table are read too."""
    tests = parse(lines)
    if not tests:
        return KindResult(KIND, {"op": None, "rows": [], "avg_busbw_gbs": None,
                                 "out_of_bounds": None, "ranks": 0})
    parsed = tests[0].to_parsed()
    if len(tests) > 1:
        parsed["tests"] = [t.to_parsed() for t in tests]
    return KindResult(KIND, parsed)
