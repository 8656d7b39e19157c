"""``nvidia-smi dmon`` (device monitor) and ``nvidia-smi pmon`` (process monitor): scrolling
tables of one row per GPU (dmon) or per process (pmon) per sampling interval.

Both print a names row and a units row, each starting with ``#``::

    # gpu    pwr  gtemp  mtemp     sm    mem  ...        # gpu        pid  type    sm  ...  command
    # Idx      W      C      C      %      %  ...        # Idx          #   C/G     %  ...  name

``-o DT`` adds date and time columns in front (``#Date       Time        gpu …`` /
``#YYYYMMDD   HH:MM:SS    Idx …``); ``-s`` picks metric groups, so any column set can appear
(``jpg ofa``, ``fb bar1 ccpm``, ``pviol tviol``, ``sbecc dbecc pci``, ``rxpci txpci``).  Cells
are separated by whitespace and hold no spaces, except pmon's last column, the command name,
which takes the rest of the line.  ``-`` means "no value" (no process on that GPU, or a metric
the GPU does not have) and reads as null; other cells follow the shared rule of ``smi_cells``.

Judgement calls:

* A names row equal to the current one is a repeat (nvidia-smi reprints it) and is skipped; a
  different one starts another table (two runs pasted together): ``parsed`` reports the first
  table and every later table with the same columns, findings come from all.
* A row with fewer cells than columns was cut: its last, possibly partial, cell is dropped and
  the row kept with the cells before it.  A dmon row with more cells than columns, or whose gpu
  cell is not an index, is not a row of the table and is skipped.
* Findings stay modest, because dmon shows rates, not states: ``tviol`` (thermal violation) > 0
  is ``clocks-throttled``; ``pviol`` (power-cap violation) > 0 is only when the GPU is busy
  (``sm`` > 0, or no ``sm`` column to say otherwise); ``dbecc`` (double-bit, uncorrectable ECC
  errors) > 0 is ``ecc-uncorrectable``.  A GPU that drops out of the rows cannot be told from a
  ``-i`` selection, so it is no finding.  pmon gives none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.rules.parsers.smi_cells import Cell, cell_value
from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import Code, Severity, Step

KIND = "dmon"
PMON_KIND = "pmon"
LOOKS_LIKE_LINES = 5000
"""How far the recogniser reads: the names and units rows open every dmon/pmon output."""

_PREFIX = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]{0,63}|\[[^\]\s]{1,64}\]):\s+(?=\S)")
"""A launcher prefix (pdsh ``gpu01: ``, srun ``13: ``) before the output."""
_FENCE = re.compile(r"^`{3,}")
_NAMES = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu(?:\s+\S+)+$", re.IGNORECASE)
_UNITS = re.compile(r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx(?:\s+\S+)+$")
_TOKEN = re.compile(r"\S+")
_INDEX = re.compile(r"^\d{1,4}$")

ACTION_THROTTLE = ("Check cooling (inlet air, fans, heatsink), power delivery and the power "
                   "limit (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE) while it is loaded")
ACTION_ECC = ("Drain the GPU; check nvidia-smi -q -d ECC,ROW_REMAPPER (PAGE_RETIREMENT on older "
              "GPUs) for pending remaps; reset the GPU to apply them, RMA if remapping failed")


@dataclass(frozen=True)
class DmonRow:
    """One data row: ``cells`` as printed, ``values`` by the shared cell rule, ``names`` the
    table's columns; ``line`` is 1-based and ``text`` the line, for evidence."""

    line: int
    text: str
    cells: tuple[str, ...]
    values: tuple[Cell, ...]
    names: tuple[str, ...]
    host: str | None = None
    cut: bool = False
    """The row was short (cut off); its last, possibly partial, cell was dropped."""

    def value(self, name: str) -> Cell:
        """The value of a column (``pwr``, ``sm``, ``pid``); None when absent or ``-``."""
        return dict(zip(self.names, self.values, strict=False)).get(name)


@dataclass(frozen=True)
class DmonTable:
    """One names row, its units row (empty when the paste lacks it) and the rows under it."""

    columns: tuple[str, ...]
    units: tuple[str, ...]
    rows: tuple[DmonRow, ...]
    line: int

    @property
    def is_pmon(self) -> bool:
        return "pid" in self.columns


@dataclass(frozen=True)
class Dmon:
    """Every table in a dmon/pmon paste, in input order."""

    tables: tuple[DmonTable, ...]

    @property
    def main(self) -> DmonTable | None:
        return self.tables[0] if self.tables else None

    @property
    def rows(self) -> tuple[DmonRow, ...]:
        """Rows of the first table and of every later table with the same columns."""
        main = self.main
        if main is None:
            return ()
        return tuple(r for t in self.tables if t.columns == main.columns for r in t.rows)

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``dmon``/``pmon`` summary: ``columns``, ``rows`` (and ``units``)."""
        main = self.main
        if main is None:
            return {"columns": [], "rows": []}
        return {"columns": list(main.columns), "rows": [list(r.values) for r in self.rows],
                "units": list(main.units)}


def _strip(raw: str) -> tuple[str | None, str]:
    text = _FENCE.sub("", raw.strip())
    m = _PREFIX.match(text)
    if m is None:
        return None, text.strip()
    return m.group("host"), text[m.end():].strip()


def _header_tokens(text: str) -> list[str]:
    return text.lstrip("#").split()


@dataclass
class _Table:
    columns: tuple[str, ...]
    line: int
    units: tuple[str, ...] = ()
    rows: list[DmonRow] = field(default_factory=list)

    def freeze(self) -> DmonTable:
        return DmonTable(self.columns, self.units, tuple(self.rows), self.line)


def _row(t: _Table, no: int, text: str, host: str | None) -> DmonRow | None:
    """One data line of table ``t``, or None when it is not one."""
    n = len(t.columns)
    spans = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    toks = [text[a:b] for a, b in spans]
    rest_col = t.columns[-1] == "command"
    cut = False
    if len(toks) >= n and rest_col:
        cells = [*toks[:n - 1], text[spans[n - 1][0]:]]
    elif len(toks) == n:
        cells = toks
    elif len(toks) > n:
        return None
    else:
        cells, cut = toks[:-1], True
    gi = t.columns.index("gpu") if "gpu" in t.columns else 0
    if len(cells) <= gi or not _INDEX.match(cells[gi]):
        return None
    return DmonRow(no, text, tuple(cells),
                   tuple(cell_value(c, dash_is_null=True) for c in cells), t.columns, host, cut)


def parse_dmon(lines: list[str]) -> Dmon:
    """The tables of a dmon or pmon paste; no tables when it has no names row.

    Args:
        lines: the input's lines, raw (CRLF, fences, prefixes and cuts tolerated).

    Returns:
        The tables in input order.
    """
    tables: list[_Table] = []
    cur: _Table | None = None
    for no, raw in enumerate(clean_lines(lines), start=1):
        host, text = _strip(raw)
        if not text:
            continue
        if _NAMES.match(text):
            cols = tuple(tok.lower() for tok in _header_tokens(text))
            if cur is None or cols != cur.columns:
                cur = _Table(cols, no)
                tables.append(cur)
            continue
        if _UNITS.match(text):
            if cur is not None and not cur.units:
                cur.units = tuple(_header_tokens(text))
            continue
        if text.startswith("#") or cur is None:
            continue
        row = _row(cur, no, text, host)
        if row is not None:
            cur.rows.append(row)
    return Dmon(tuple(t.freeze() for t in tables))


# --- findings ----------------------------------------------------------------------------------

def _num(v: Cell) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _row_findings(row: DmonRow) -> list[ExplainFinding]:
    idx = row.value("gpu")
    gpu = f"GPU{idx}" if isinstance(idx, int) else None
    who = (gpu or "(GPU not named)") + (f" on {row.host}" if row.host else "")
    date, clock = row.value("date"), row.value("time")
    when = " ".join(str(v) for v in (date, clock) if v is not None) or None
    extra: dict[str, object] = {"host": row.host} if row.host else {}
    out = []
    tviol, pviol, sm = _num(row.value("tviol")), _num(row.value("pviol")), _num(row.value("sm"))
    busy = sm is None or sm > 0
    why = []
    if tviol:
        why.append(f"thermal violation {tviol:g} %")
    if pviol and busy:
        why.append(f"power-cap violation {pviol:g} %")
    if why:
        out.append(ExplainFinding(Step.GPU, Code.CLOCKS_THROTTLED, Severity.WARNING, row.line,
                                  row.text, f"GPU {who} clocks held down: {', '.join(why)} of "
                                  "the interval", ACTION_THROTTLE, gpu=gpu, time=when,
                                  extra=extra))
    dbecc = _num(row.value("dbecc"))
    if dbecc:
        out.append(ExplainFinding(Step.GPU, Code.ECC_UNCORRECTABLE, Severity.CRITICAL, row.line,
                                  row.text, f"GPU {who} reports {dbecc:g} double-bit "
                                  "(uncorrectable) ECC error(s)", ACTION_ECC, gpu=gpu,
                                  time=when, extra={**extra, "count_ecc": int(dbecc)}))
    return out


def _findings(d: Dmon) -> list[ExplainFinding]:
    """One finding per (code, host, GPU); the first row is the evidence, the rest counted."""
    found: dict[tuple[str, object, str | None], ExplainFinding] = {}
    for t in d.tables:
        if t.is_pmon:
            continue
        for row in t.rows:
            for f in _row_findings(row):
                k = (f.code, f.extra.get("host"), f.gpu)
                old = found.get(k)
                found[k] = f if old is None else ExplainFinding(
                    old.step, old.code, old.severity, old.line, old.evidence, old.summary,
                    old.action, old.xid, old.gpu, old.time, old.count + 1, old.extra)
    return sorted(found.values(), key=lambda f: (-f.severity.rank, f.line))


# --- which kind ------------------------------------------------------------------------------

def _header_pair(lines: list[str]) -> list[str] | None:
    """The first names row that a units row follows (blank lines between allowed)."""
    names: list[str] | None = None
    for raw in clean_lines(lines[:LOOKS_LIKE_LINES]):
        text = _strip(raw)[1]
        if not text:
            continue
        if names is not None and _UNITS.match(text):
            return names
        names = [t.lower() for t in _header_tokens(text)] if _NAMES.match(text) else None
    return None


def kind_of(lines: list[str]) -> str:
    """``pmon`` when the first table has a ``pid`` column, else ``dmon``."""
    pair = _header_pair(lines)
    if pair is not None:
        return PMON_KIND if "pid" in pair else KIND
    d = parse_dmon(lines)
    return PMON_KIND if d.main is not None and d.main.is_pmon else KIND


def looks_like(lines: list[str]) -> bool:
    """dmon or pmon: a ``# gpu …`` names row directly followed by its ``# Idx …`` units row."""
    return _header_pair(lines) is not None


def explain(lines: list[str]) -> KindResult:
    """The contract's ``dmon`` or ``pmon`` result and its gpu-step findings."""
    d = parse_dmon(lines)
    return KindResult(kind_of(lines), d.to_parsed(), tuple(_findings(d)))


__all__ = ["KIND", "PMON_KIND", "Dmon", "DmonRow", "DmonTable", "explain", "kind_of",
           "looks_like", "parse_dmon"]
