"""``nvidia-smi --query-gpu=…`` / ``--query-compute-apps=…`` / ``--query-retired-pages`` /
``--query-remapped-rows`` (any ``--query-*``) with ``--format=csv[,noheader][,nounits]``.

The output is a header of field names as nvidia-smi prints them (``fan.speed [%]``, units in
brackets) and one row per GPU (or process, page, …) per sample, cells joined by ``, ``.  Pastes
add an echoed command line or a prompt before it, ``host: `` prefixes (pdsh), CRLF, a missing
final newline, or a cut.  Cells are read by the shared rule of ``smi_cells``.

Judgement calls:

* ``noheader`` output has no ``columns`` in ``parsed``; the field list of an echoed
  ``--query-gpu=a,b,c`` names the cells for findings only.
* A row with fewer cells than the header (or the query's field list) was cut: its last cell
  may be a fragment (``700.00 W`` cut to ``7``), so it is dropped and the row is kept with the
  cells before it.  A row left with no cell is dropped.  A cut inside the last cell of a
  full-width row (``27412 MiB`` cut to ``2741``) cannot be told from a value and is read as one.
* A second, different header starts another block (two queries pasted together): ``parsed``
  reports the first block and every later block with the same header; findings come from all.
* Rows of ``--query-retired-pages`` whose address is ``[N/A]`` are the per-cause placeholder
  rows of a row-remapping GPU, not retired pages; no row of that query is a finding by itself.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from probes.rules.busid import BDF_IN_TEXT, normalize_bus_id
from probes.rules.parsers import smi_csv_names as csv_names
from probes.rules.parsers.pcie import gen_shortfall
from probes.rules.parsers.smi_cells import Cell, cell_value
from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import Code, Severity, Step
from probes.wire.clock_reasons import POWER_CAP, SLOWDOWN_REASONS

KIND = "nvidia-smi-csv"
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: the header or command line is at the top of a paste."""
LOOKS_LIKE_SHARE = 0.6
"""Share of non-blank lines that must be CSV (header, rows, command) for the input to be CSV."""
IDENTITY_FIELDS = frozenset({"index", "pci.bus_id", "pci.device_id", "pci.sub_device_id",
                             "name", "uuid", "serial", "timestamp", "driver_version",
                             "vbios_version", "minor_number", "pci.domain", "pci.bus",
                             "pci.device", "count"})
"""Columns NVML answers from the device handle alone: readable even on a GPU it cannot talk to."""
IDLE_PSTATE = 8
"""P-state from which a GPU is idle (P8 and deeper): a slow link there is power saving."""

THROTTLE_REASONS = SLOWDOWN_REASONS
"""Reasons that slow a GPU whatever its load (``sw_power_cap`` counts only under load): the
same set the live judgement reads (``probes.analysis.judge``)."""

_PREFIX = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]{0,63}|\[[^\]\s]{1,64}\]):\s+(?=\S)")
"""A launcher prefix (pdsh ``gpu01: ``, srun ``13: ``, ``[host]: ``) before the output."""
_FENCE = re.compile(r"^`{3,}")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?: \[[^\[\]]{1,16}\])?$")
_COMMAND = re.compile(r"(?:^|[\s/\\$#>%;|&(])nvidia-smi(?:\.exe)?(?:\s|$)", re.IGNORECASE)
_QUERY = re.compile(r"--query-(?P<what>[a-z][a-z-]{0,40})(?:=|\s+)"
                    r"(?:\"(?P<dq>[^\"]*)\"?|'(?P<sq>[^']*)'?|(?P<bare>[^\s\"']+))")
_FORMAT = re.compile(r"--format(?:=|\s+)[\"']?(?P<fmt>[\w,]+)")
_NOTE = re.compile(r"^(?:#|//|--\s|\(.*\)$)")
"""A comment or note pasted between blocks (``# after the restart:``); a root prompt's
``# nvidia-smi …`` is a command and is read before this."""
_PROSE = re.compile(r"^[A-Za-z][A-Za-z' ,;\-]*[:.!?]?$")
"""A line of plain words and no number: a sentence with a comma, not a row."""
_PROMPT = re.compile(r"^\S{0,64}[$#>%]$")
_ERROR_LINE = re.compile(
    r"Unable to determine the device handle|\bGPU is lost\b|No devices were found"
    r"|NVIDIA-SMI has failed|Failed to initialize NVML|Driver/library version mismatch"
    r"|is not a valid field to query|Invalid combination of input arguments", re.IGNORECASE)
"""What nvidia-smi prints instead of (or between) its rows when NVML or the query fails."""
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_LOST = re.compile(r"Unable to determine the device handle for GPU|\bGPU is lost\b",
                   re.IGNORECASE)
_BDF_CELL = re.compile(r"^(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_UUID_CELL = re.compile(r"^(?:GPU|MIG)-(?:[0-9a-fA-F]{8}-[0-9a-fA-F-]{4,}|<[^>]*>)")
_MARKER_CELL = re.compile(
    r"^\[(?:N/A|Not Supported|Unknown Error|GPU is lost|Insufficient Permissions|Not Found"
    r"|Requested functionality has been deprecated)\]$", re.IGNORECASE)
_PSTATE = re.compile(r"^P(\d{1,2})$")

_LOST_MARKERS = frozenset({"[gpu is lost]", "[unknown error]"})
def _without_unit(name: str) -> str:
    r"""``memory.used [MiB]`` → ``memory.used``: the last ``[…]`` at the end and the spaces
    before it go.  A string search: ``\s*\[[^\]]*\]\s*$`` restarted at every space and
    every ``[`` of a long header, the square of its length."""
    stripped = name.rstrip()
    if not stripped.endswith("]"):
        return name
    start = stripped.find("[", stripped.rfind("]", 0, len(stripped) - 1) + 1)
    return name if start < 0 else stripped[:start]


def normalize_field(name: str) -> str:
    """``fan.speed [%]`` → ``fan.speed``; old and query-only names → the header's name.

    ``clocks_throttle_reasons.*`` (drivers before 535) reads as ``clocks_event_reasons.*``
    and ``gpu_bus_id`` (the query name) as ``pci.bus_id``, so one lookup serves every driver.
    """
    n = _without_unit(name).strip().lower()
    if n.startswith("clocks_throttle_reasons"):
        n = "clocks_event_reasons" + n[len("clocks_throttle_reasons"):]
    return csv_names.ALIASES.get(n, n)


def _known(printed: str) -> bool:
    n = normalize_field(printed)
    return n in csv_names.KNOWN_FIELDS or (
        "." in n and n.split(".", 1)[0] in csv_names.KNOWN_GROUPS)


def _distinctive(printed: str) -> bool:
    """A known name no other tool prints: dotted, underscored, or with a bracketed unit."""
    return _known(printed) and ("." in printed or "_" in printed or "[" in printed)


@dataclass(frozen=True)
class SmiCsvRow:
    """One data row.  ``cells`` are the trimmed, unquoted cells as printed; ``values`` their
    JSON values; ``names`` the normalised field names (from the header, else the echoed query;
    empty when neither is known).  ``line`` is 1-based, ``text`` the line for evidence."""

    line: int
    text: str
    cells: tuple[str, ...]
    values: tuple[Cell, ...]
    names: tuple[str, ...] = ()
    host: str | None = None
    cut: bool = False
    """The row was short (cut off); its last, possibly partial, cell was dropped."""

    @property
    def fields(self) -> dict[str, Cell]:
        """Values keyed by normalised field name (``utilization.gpu``, ``pci.bus_id``)."""
        return dict(zip(self.names, self.values, strict=False))

    def value(self, name: str) -> Cell:
        """The value of a field by its normalised (or query, or old) name; None if absent."""
        return self.fields.get(normalize_field(name))

    def raw(self, name: str) -> str | None:
        """The cell of a field as printed; None if the row has no such field."""
        return dict(zip(self.names, self.cells, strict=False)).get(normalize_field(name))


@dataclass(frozen=True)
class SmiCsvBlock:
    """One header (or header-less query) and the rows under it.

    ``columns`` is the header as printed, None for ``noheader`` output; ``names`` the
    normalised field names the rows are keyed by; ``query`` what ``--query-…`` asked for
    (``gpu``, ``compute-apps``) when the command line was echoed.
    """

    columns: tuple[str, ...] | None
    names: tuple[str, ...]
    rows: tuple[SmiCsvRow, ...]
    query: str | None = None
    line: int = 0


@dataclass(frozen=True)
class SmiCsv:
    """Everything a CSV paste says: its blocks and nvidia-smi's error lines."""

    blocks: tuple[SmiCsvBlock, ...]
    errors: tuple[str, ...] = ()
    error_lines: tuple[int, ...] = ()
    commands: int = 0
    """Echoed ``nvidia-smi`` command lines seen."""

    @property
    def main(self) -> SmiCsvBlock | None:
        """The block ``parsed`` reports: the first with a header or rows."""
        return next((b for b in self.blocks if b.columns is not None or b.rows), None)

    @property
    def rows(self) -> tuple[SmiCsvRow, ...]:
        """Rows of the main block and of every later block with the same header."""
        main = self.main
        if main is None:
            return ()
        return tuple(r for b in self.blocks
                     if b.columns == main.columns and b.names == main.names for r in b.rows)

    @property
    def all_rows(self) -> tuple[SmiCsvRow, ...]:
        return tuple(r for b in self.blocks for r in b.rows)

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``nvidia-smi-csv`` summary (``columns`` only when printed)."""
        out: dict[str, object] = {}
        main = self.main
        if main is not None and main.columns is not None:
            out["columns"] = list(main.columns)
        out["rows"] = [list(r.values) for r in self.rows]
        out["errors"] = list(self.errors)
        return out


# --- reading ----------------------------------------------------------------------------------

def split_cells(text: str) -> list[str]:
    """Cells of one CSV line, trimmed; a double-quoted cell may hold commas (``""`` escapes).

    An unclosed quote (a cut line) runs to the end of the line.
    """
    cells: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == '"':
            i += 1
            buf: list[str] = []
            while i < n:
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            j = text.find(",", i)
            rest = text[i:] if j < 0 else text[i:j]
            cells.append(("".join(buf) + rest.strip()).strip())
        else:
            j = text.find(",", i)
            cells.append((text[i:] if j < 0 else text[i:j]).strip())
        if j < 0:
            return cells
        i = j + 1


def strip_prefix(line: str) -> tuple[str | None, str]:
    """``gpu01: 0, NVIDIA …`` → (``gpu01``, ``0, NVIDIA …``); lines without one unchanged."""
    m = _PREFIX.match(line)
    if m is None:
        return None, line
    return m.group("host"), line[m.end():]


def _query(command: str) -> tuple[str | None, tuple[str, ...], bool | None]:
    """What an echoed command asks for: (query kind, field names, header expected or None)."""
    what: str | None = None
    fields: tuple[str, ...] = ()
    m = _QUERY.search(command)
    if m:
        what = m.group("what")
        spec = m.group("dq") or m.group("sq") or m.group("bare") or ""
        fields = tuple(f.strip() for f in spec.split(",") if f.strip())
    header: bool | None = None
    f = _FORMAT.search(command)
    if f and "csv" in f.group("fmt").lower():
        header = "noheader" not in f.group("fmt").lower()
    return what, fields, header


def _is_header(cells: list[str]) -> bool:
    return bool(cells) and all(_FIELD.match(c) for c in cells) and any(_known(c) for c in cells)


@dataclass
class _Block:
    columns: tuple[str, ...] | None = None
    names: tuple[str, ...] = ()
    query: str | None = None
    expect_header: bool | None = None
    line: int = 0
    rows: list[tuple[int, str, list[str], str | None]] = field(default_factory=list)

    def freeze(self) -> SmiCsvBlock:
        width = len(self.columns) if self.columns is not None else len(self.names)
        if not width and self.rows:
            width = Counter(len(c) for _, _, c, _ in self.rows).most_common(1)[0][0]
        rows = []
        for no, text, cells, host in self.rows:
            cut = 0 < len(cells) < width
            kept = cells[:-1] if cut else cells
            if not kept:
                continue
            rows.append(SmiCsvRow(no, text, tuple(kept), tuple(cell_value(c) for c in kept),
                                  self.names, host, cut))
        return SmiCsvBlock(self.columns, self.names, tuple(rows), self.query, self.line)


def parse_smi_csv(lines: list[str]) -> SmiCsv:
    """The CSV blocks (header, rows) and error lines in a paste; empty when there are none.

    Args:
        lines: the input's lines, raw (CRLF, fences, prefixes and cuts tolerated).

    Returns:
        The blocks in input order and nvidia-smi's error lines.
    """
    blocks: list[_Block] = [_Block()]
    errors: list[str] = []
    error_lines: list[int] = []
    commands = 0
    continued = ""
    for no, raw in enumerate(clean_lines(lines), start=1):
        host, text = strip_prefix(_FENCE.sub("", raw.strip()))
        text = text.strip()
        if continued:
            text = continued + " " + text
            continued = ""
        if not text or _PROMPT.match(text):
            continue
        if _ERROR_LINE.search(_BRACKETS.sub("", text)):  # not a row's [GPU is lost] cell
            errors.append(text)
            error_lines.append(no)
            continue
        if "--query-" in text or "--format" in text or _COMMAND.search(text):
            if text.endswith("\\"):
                continued = text[:-1]
                continue
            commands += 1
            what, fields, header = _query(text)
            if what is not None:
                blocks.append(_Block(None, tuple(normalize_field(f) for f in fields), what,
                                     header, no))
            # else a command that names no query (a copy cut before ``--query-gpu=``): a note
            # between blocks, and the rows below it go on under the block they match
            continue
        _data_line(blocks, no, text, host)
    return SmiCsv(tuple(b.freeze() for b in blocks if b.columns is not None or b.rows
                        or b.query is not None),
                  tuple(errors), tuple(error_lines), commands)


def _data_line(blocks: list[_Block], no: int, text: str, host: str | None) -> None:
    """A header, a repeated header, or a row of the current block; notes are none of these."""
    b = blocks[-1]
    if _NOTE.match(text):
        return
    cells = split_cells(text)
    if b.columns is not None and tuple(cells) == b.columns:
        return
    looks_header = _is_header(cells)
    if looks_header and b.columns is None and not b.rows and b.expect_header is not False:
        b.columns = tuple(cells)
        b.names = tuple(normalize_field(c) for c in cells)
        b.line = b.line or no
        return
    if (b.expect_header is True and b.columns is None and not b.rows
            and all(_FIELD.match(c) for c in cells)):
        b.columns = tuple(cells)
        b.names = tuple(normalize_field(c) for c in cells)
        return
    if looks_header and b.rows and sum(_distinctive(c) for c in cells) >= 2:
        for old in blocks:  # a header seen before: rows under it join that header again
            if old.columns == tuple(cells):
                blocks.append(_Block(old.columns, old.names, old.query, True, no))
                return
        blocks.append(_Block(tuple(cells), tuple(normalize_field(c) for c in cells), None,
                             True, no))
        return
    width = len(b.columns) if b.columns is not None else len(b.names)
    if "," not in text and width != 1:
        return
    if width and len(cells) != width and _PROSE.match(text):
        return  # "then, after the job started:" between two blocks
    b.rows.append((no, text, cells, host))


# --- findings ----------------------------------------------------------------------------------

def _num(v: Cell) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: Cell) -> int | None:
    n = _num(v)
    return int(n) if n is not None and n.is_integer() else None


def _gpu_of(row: SmiCsvRow) -> str | None:
    """The row's bus id in contract form, else ``GPU<index>``, else a bus-id-shaped cell."""
    bus = normalize_bus_id(row.raw("pci.bus_id"))
    if bus is not None:
        return bus
    idx = _int(row.value("index"))
    if idx is not None:
        return f"GPU{idx}"
    if not row.names:
        for c in row.cells:
            if _BDF_CELL.match(c):
                return normalize_bus_id(c)
    return None


def _readings(row: SmiCsvRow) -> list[Cell]:
    """The row's numeric readings, without the columns a handle alone answers (index, ids)."""
    if row.names:
        pairs = [v for n, v in zip(row.names, row.values, strict=False)
                 if n not in IDENTITY_FIELDS]
    else:
        pairs = list(row.values[1:])  # noheader, names unknown: the first cell is the index
    return [v for v in pairs if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _busy(row: SmiCsvRow) -> bool | None:
    """True under load, False when idle (P8+ or 0 % util), None when the row cannot say."""
    util = _num(row.value("utilization.gpu"))
    if util is not None:
        return util > 0
    p = row.value("pstate")
    m = _PSTATE.match(p) if isinstance(p, str) else None
    if m:
        return int(m.group(1)) < IDLE_PSTATE
    return None


def _active_reasons(row: SmiCsvRow) -> set[str]:
    """Active throttle reasons: per-reason ``Active`` cells and the ``.active`` bitmask."""
    active = set()
    for reason in (*THROTTLE_REASONS, POWER_CAP):
        v = row.value(f"clocks_event_reasons.{reason}")
        if isinstance(v, str) and v.strip().lower() == "active":
            active.add(reason)
    mask = row.value("clocks_event_reasons.active")
    if isinstance(mask, str) and re.match(r"^0x[0-9A-Fa-f]{1,16}$", mask.strip()):
        bits = int(mask.strip(), 16)
        active |= {name for bit, name in csv_names.REASON_BITS if bits & bit}
    return active


def _yes(v: Cell) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("yes", "true")
    n = _num(v)
    return n is not None and n > 0


def _ecc(row: SmiCsvRow, scope: str) -> int | None:
    """Uncorrectable ECC count of a scope (``volatile``/``aggregate``): the total, else the
    largest of its per-location counters."""
    total = _int(row.value(f"ecc.errors.uncorrected.{scope}.total"))
    if total is not None:
        return total
    prefix = f"ecc.errors.uncorrected.{scope}."
    counts = [n for k, v in row.fields.items() if k.startswith(prefix) and "threshold" not in k
              and (n := _int(v)) is not None]
    return max(counts) if counts else None


def _row_findings(row: SmiCsvRow) -> list[ExplainFinding]:
    gpu = _gpu_of(row)
    who = (gpu or "(GPU not named)") + (f" on {row.host}" if row.host else "")
    stamp = row.value("timestamp")
    time = stamp if isinstance(stamp, str) else None
    out: list[ExplainFinding] = []

    def add(code: Code, sev: Severity, summary: str, action: str,
            extra: dict[str, object] | None = None) -> None:
        more = dict(extra or {})
        if row.host:
            more["host"] = row.host
        out.append(ExplainFinding(Step.GPU, code, sev, row.line, row.text, summary, action,
                                  gpu=gpu, time=time, extra=more))

    lost = [c for c in row.cells if c.strip().lower() in _LOST_MARKERS]
    if lost:
        if "[gpu is lost]" in (c.strip().lower() for c in lost) or not _readings(row):
            add(Code.GPU_LOST, Severity.CRITICAL,
                f"GPU {who} reads {lost[0]} in {len(lost)} field(s) and nothing else: NVML has "
                "lost it", csv_names.ACTION_LOST)
            return out
        unread = [n for n, c in zip(row.names, row.cells, strict=False)
                  if c.strip().lower() in _LOST_MARKERS]
        add(Code.GPU_SENSOR_UNREADABLE, Severity.WARNING,
            f"GPU {who} reads {lost[0]} in {', '.join(unread) or f'{len(lost)} field(s)'} "
            "while its other readings answer: a sensor NVML cannot read, not a lost GPU",
            csv_names.ACTION_SENSOR, {"fields": unread})
    if not row.names:
        return out
    busy = _busy(row)
    active = _active_reasons(row)
    throttled = sorted(active & THROTTLE_REASONS)
    if "sw_power_cap" in active and busy:
        throttled.append("sw_power_cap")
    if throttled:
        add(Code.CLOCKS_THROTTLED, Severity.WARNING,
            f"GPU {who} clocks held down: {', '.join(throttled)} active", csv_names.ACTION_THROTTLE,
            {"reasons": throttled})
    cur_gen = _int(row.value("pcie.link.gen.gpucurrent"))
    if cur_gen is None:
        cur_gen = _int(row.value("pcie.link.gen.current"))
    cap_gen = _int(row.value("pcie.link.gen.max"))
    if cap_gen is None:
        caps = [g for g in (_int(row.value("pcie.link.gen.gpumax")),
                            _int(row.value("pcie.link.gen.hostmax"))) if g is not None]
        cap_gen = min(caps) if caps else None
    cur_w = _int(row.value("pcie.link.width.current"))
    cap_w = _int(row.value("pcie.link.width.max"))
    link = gen_shortfall(cap_gen, cap_w, cur_gen, cur_w)
    if link is Severity.WARNING:
        add(Code.PCIE_LINK_DOWNGRADED, Severity.WARNING,
            f"GPU {who} PCIe link runs x{cur_w} of x{cap_w}", csv_names.ACTION_WIDTH)
    elif link is Severity.INFO and busy is not False:
        add(Code.PCIE_LINK_DOWNGRADED, Severity.INFO,
            f"GPU {who} PCIe link at Gen{cur_gen} of Gen{cap_gen}"
            + (" under load" if busy else ""), csv_names.ACTION_SPEED)
    vol, agg = _ecc(row, "volatile"), _ecc(row, "aggregate")
    if vol:
        add(Code.ECC_UNCORRECTABLE, Severity.CRITICAL,
            f"GPU {who} has {vol} uncorrectable ECC error(s) since the driver loaded",
            csv_names.ACTION_ECC, {"count_ecc": vol})
    elif agg:
        add(Code.ECC_UNCORRECTABLE, Severity.INFO,
            f"GPU {who} has {agg} uncorrectable ECC error(s) in its lifetime (none since the "
            "driver loaded)", csv_names.ACTION_ECC, {"count_ecc": agg})
    if _yes(row.value("retired_pages.pending")):
        add(Code.RETIRED_PAGES_PENDING, Severity.WARNING,
            f"GPU {who}: retired pages wait for a driver reload", csv_names.ACTION_RETIRED)
    if _yes(row.value("remapped_rows.failure")):
        add(Code.ROW_REMAP_FAILURE, Severity.CRITICAL,
            f"GPU {who}: row remapping failed (no spare rows); the card needs service",
            csv_names.ACTION_REMAP)
    return out


def _fold(findings: list[ExplainFinding]) -> list[ExplainFinding]:
    """One finding per (code, host, GPU): the first row is the evidence, the rest are counted."""
    found: dict[tuple[str, object, str | None], ExplainFinding] = {}
    for f in findings:
        k = (f.code, f.extra.get("host"), f.gpu)
        old = found.get(k)
        if old is None:
            found[k] = f
            continue
        sev = f.severity if f.severity.rank > old.severity.rank else old.severity
        found[k] = ExplainFinding(old.step, old.code, sev, old.line, old.evidence, old.summary,
                                  old.action, old.xid, old.gpu, old.time, old.count + f.count,
                                  old.extra)
    return sorted(found.values(), key=lambda f: (-f.severity.rank, f.line))


def _findings(csv: SmiCsv) -> list[ExplainFinding]:
    out: list[ExplainFinding] = []
    for text, no in zip(csv.errors, csv.error_lines, strict=True):
        if not _LOST.search(text):
            continue
        m = BDF_IN_TEXT.search(text)
        bus = normalize_bus_id(m.group()) if m else None
        out.append(ExplainFinding(
            Step.GPU, Code.GPU_LOST, Severity.CRITICAL, no, text,
            f"nvidia-smi cannot get a handle to GPU {bus or '(bus id not shown)'}: NVML has "
            "lost it", csv_names.ACTION_LOST, gpu=bus))
    for row in csv.all_rows:
        out.extend(_row_findings(row))
    return _fold(out)


def explain(lines: list[str]) -> KindResult:
    """The contract's ``nvidia-smi-csv`` result and its gpu-step findings."""
    csv = parse_smi_csv(lines)
    return KindResult(KIND, csv.to_parsed(), tuple(_findings(csv)))


# --- recognising -------------------------------------------------------------------------------

def _signature(cells: tuple[str, ...]) -> bool:
    return any(_BDF_CELL.match(c) or _UUID_CELL.match(c) or _MARKER_CELL.match(c)
               for c in cells)


def looks_like(lines: list[str]) -> bool:
    """nvidia-smi CSV: a header of nvidia-smi field names, an echoed ``--query-*`` command
    with rows after it, or header-less rows of one width carrying bus ids, ``GPU-`` UUIDs or
    nvidia-smi's ``[N/A]``-style markers; and CSV makes up most of the input."""
    head = lines[:LOOKS_LIKE_LINES]
    csv = parse_smi_csv(head)
    content = 0
    for raw in clean_lines(head):
        text = strip_prefix(_FENCE.sub("", raw.strip()))[1].strip()
        if text and not _PROMPT.match(text):
            content += 1
    rows = csv.all_rows
    headers = [b for b in csv.blocks if b.columns is not None]
    claimed = len(rows) + len(headers) + csv.commands + (len(csv.errors) if rows else 0)
    if not content or claimed < LOOKS_LIKE_SHARE * content:
        return False
    for b in headers:
        if sum(_distinctive(c) for c in b.columns or ()) >= 1 and \
                2 * sum(_known(c) for c in b.columns or ()) >= len(b.columns or ()):
            return True
    if any(b.query is not None and b.rows for b in csv.blocks):
        return True
    widths = {len(r.cells) + (1 if r.cut else 0) for r in rows}
    return bool(rows) and len(widths) == 1 and min(widths) >= 2 and \
        any(_signature(r.cells) for r in rows)


__all__ = ["KIND", "SmiCsv", "SmiCsvBlock", "SmiCsvRow", "explain", "looks_like",
           "normalize_field", "parse_smi_csv", "split_cells", "strip_prefix"]
