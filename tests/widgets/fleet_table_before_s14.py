"""Verbatim copy of widgets/fleet_table.py before session 14 (its table from
``styled_table_before_s14``); the equivalence test drives it beside the new one.

The fleet screen's table (one line per host) and the detail line under it.

A host that cannot be watched says why on its own row: the Status column names the state
in one short word and the last column gives the reason in full (or, for a host that
streams, its worst finding led by the verdict, so truncation keeps the meaning).  Its
last values stay, drawn dim (``cell--old``): they are what it last said, not what it says.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from probes.fleet_state import FleetRow, HostStatus
from tests.widgets.styled_table_before_s14 import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable
from widgets._format import SEVERITY_CLASS, pct_cell, temp_cell

STATUS_CLASS = {
    HostStatus.STREAMING: "cell--ok",
    HostStatus.CONNECTING: "cell--connecting",
    HostStatus.STALE: "cell--stale",
    HostStatus.UNKNOWN: "cell--stale",
}
SHORT_STATUS = {
    HostStatus.HOST_KEY_REFUSED: "key refused",
    HostStatus.AUTH_FAILED: "auth failed",
    HostStatus.AGENT_FAILED: "agent failed",
}
"""The Status column's word where the status's own name is too long for it (the reason
column beside it says the rest)."""
OLD = "cell--old"
_REACH_VERDICTS = ("DOWN", "STALE", "LOGIN REFUSED", "AGENT FAILED", "HOST KEY")
"""How the core's reachability findings begin (``probes.analysis.reachability``): the
detail line already says that much."""


@dataclass(frozen=True)
class FleetLine:
    """A host's row, plus the session's reason for a row built before the core kept one."""

    row: FleetRow
    down_reason: str | None = None


def ago(seconds: float) -> str:
    """``42 s``, ``2 m``, ``3 h``, ``2 d``: an age as an operator says it."""
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s // 60:.0f} m"
    if s < 86400:
        return f"{s // 3600:.0f} h"
    return f"{s // 86400:.0f} d"


def status_cell(row: FleetRow, down_reason: str | None = None) -> Cell:
    """``streaming``, ``stale 42 s``, ``down: reason`` or ``connecting``."""
    text = row.status.value
    if row.status is HostStatus.STALE and row.stale_s is not None:
        text = f"stale {row.stale_s:.0f} s"
    elif row.status.is_down and down_reason:
        text = f"{row.status.value}: {down_reason}"
    return text, STATUS_CLASS.get(row.status, "cell--down")


def is_old(row: FleetRow) -> bool:
    """Whether the row's values are what the host last said rather than what it says now."""
    return row.status.is_down or row.status is HostStatus.STALE or row.reason is not None


def reason_of(line: FleetLine) -> str | None:
    """Why the host is not streaming, in full (the core's, else the session's)."""
    return row_reason(line.row, line.down_reason)


def row_reason(row: FleetRow, down_reason: str | None) -> str | None:
    """``reason_of`` from the row and its session's reason, where no line is built (the
    wall's note, a thousand hosts at a ``w``)."""
    if row.reason:
        return row.reason
    return down_reason if row.status.is_down else None


def why_text(line: FleetLine) -> str:
    """The last column: the reason a host is not streaming, else its worst finding."""
    row = line.row
    reason = reason_of(line)
    if reason and is_old(row):
        return reason
    return row.headline or row.worst_summary or ""


def short_status(row: FleetRow) -> Cell:
    """The Status column: one short word (and the age of a stale host)."""
    if row.status is HostStatus.STALE:
        seen = row.last_seen_s if row.last_seen_s is not None else row.stale_s
        text = f"stale {ago(seen)}" if seen is not None else "stale"
    else:
        text = SHORT_STATUS.get(row.status, row.status.value)
    return text, STATUS_CLASS.get(row.status, "cell--down")


def timing_text(row: FleetRow) -> str:
    """``last seen 2 m ago · next retry in 30 s`` for a host that is not streaming."""
    parts = []
    if row.last_seen_s is not None:
        parts.append(f"last seen {ago(row.last_seen_s)} ago")
    elif is_old(row):
        parts.append("never seen")
    if row.next_retry_s is not None:
        parts.append(f"next retry in {row.next_retry_s:.0f} s" if row.next_retry_s >= 1
                     else "retrying now")
    return " · ".join(parts)


class FleetTable(StyledTable):
    """Hosts in inventory order with their health at a glance."""

    COLUMNS = (
        ColumnSpec("host", "Host", 10),
        ColumnSpec("tags", "Tags", 7, narrow=False),
        ColumnSpec("status", "Status", 12),
        ColumnSpec("gpus", "GPUs", 5, right=True),
        ColumnSpec("temp", "Temp", 6, right=True),
        ColumnSpec("mem", "Mem", 5, right=True),
        ColumnSpec("util", "Util", 5, right=True),
        ColumnSpec("power", "Power", 7, right=True, narrow=False),
        ColumnSpec("findings", "Find", 4, right=True),
        ColumnSpec("worst", "Why / worst finding"),
    )
    WIDE = "worst"
    GIVE_UP = ("util", "mem", "temp", "gpus")
    """At 80 columns the reason is read whole ("GPU2 LINK DOWN-TRAINED · PCIe x8 (capable
    x16)" kept 18 characters): the numbers go first, the wall and host screens have them."""

    hosts: reactive[tuple[FleetLine, ...]] = reactive((), init=False, repaint=False)
    """One line per host in inventory order, replaced as a whole on every refresh."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._formatted: dict[str, tuple[FleetRow, str | None, tuple[Cell, ...]]] = {}
        """Each host's cells and the row they were formatted from: the fleet state hands
        back the same row object while the host is unchanged."""
        self.cells_formatted = 0
        """Rows formatted so far (tests count them)."""
        self._cursor_at = 0
        """Where the cursor's line was last found in ``hosts`` (looked up each tick): the
        same place while the order holds, checked by name."""

    def watch_hosts(self) -> None:
        """Write the new rows into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per host, keyed by host name; unchanged rows keep their cells.

        The kept cells are updated in place (a host hidden by a filter keeps its own until
        it comes back): at a thousand hosts a new dictionary every tick was most of this."""
        out: list[KeyedRow] = []
        kept = self._formatted
        for line in self.hosts:
            row = line.row
            name = row.name
            was = kept.get(name)
            if was is not None and was[0] is row and was[1] == line.down_reason:
                cells = was[2]
            else:
                cells = self.cells(line)
                self.cells_formatted += 1
                kept[name] = (row, line.down_reason, cells)
            out.append((name, cells))
        return out

    def line_at_cursor(self) -> FleetLine | None:
        """The host line under the cursor, if any."""
        key = self._cursor_key()
        if key is None:
            return None
        hosts = self.hosts
        at = self._cursor_at
        if not (at < len(hosts) and hosts[at].row.name == key):  # names are unique
            at = self._cursor_at = next(
                (i for i, line in enumerate(hosts) if line.row.name == key), len(hosts))
        return hosts[at] if at < len(hosts) else None

    @staticmethod
    def cells(line: FleetLine) -> tuple[Cell, ...]:
        """The formatted cells of one host; a host's old values are all drawn dim."""
        row = line.row
        old = is_old(row)
        gpus: Cell = (str(row.gpus_ok), None)
        if row.gpus_expected is not None:
            short = row.gpus_ok < row.gpus_expected
            gpus = (f"{row.gpus_ok}/{row.gpus_expected}", "cell--down" if short else None)
        sev_cls = SEVERITY_CLASS[row.worst] if row.worst else "cell--muted"
        values: tuple[Cell, ...] = (
            gpus,
            temp_cell(row.max_temp_c, row.temp_level),
            pct_cell(row.mem_used_pct, row.mem_high),
            pct_cell(row.mean_util_pct),
            (f"{row.power_w:,.0f} W", None) if row.power_w is not None else MISSING,
        )
        if old:
            values = tuple((text, OLD) for text, _ in values)
        why = why_text(line)
        why_cls = "cell--down" if old and reason_of(line) else sev_cls
        return (
            (row.name, None),
            (",".join(row.tags), "cell--muted"),
            short_status(row),
            *values,
            (str(row.findings), sev_cls),
            (why, why_cls),
        )


class FleetDetail(Static):
    """The selected host in full under the table: the whole reason, its age, the retry.

    At 80 columns the reason column keeps a dozen characters; this line wraps instead.
    """

    line: reactive[FleetLine | None] = reactive(None, init=False, repaint=False)
    """The selected host's line; ``watch_line`` repaints only when what it says changed."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._shown: Text | None = None

    def watch_line(self, line: FleetLine | None) -> None:
        """Show the selected host's state.

        The line is handed over on every tick, and a host's numbers move every second while
        what this line says rarely does; ``update`` asks the screen for a layout (its height
        may change), so it is asked only when the text did change.
        """
        text = detail_text(line)
        if text != self._shown:
            self._shown = text
            self.update(text)
        self.set_class(line is not None and is_old(line.row), "-old")


def detail_text(line: FleetLine | None) -> Text:
    """The selected host in full.

    A host that is not streaming takes two lines, so the 80-column wrap never splits them
    mid-phrase: ``gpu-b02 · UNREACHABLE · last seen 2 m ago · next retry in 30 s``, then the
    reason whole.  A host that streams gets its worst finding led by the verdict.
    """
    if line is None:
        return Text("")
    row = line.row
    text = Text(row.name, style="bold")
    reason = reason_of(line)
    if reason and is_old(row):
        word = SHORT_STATUS.get(row.status, row.status.value).upper()
        text.append(f" · {word}")
        timing = timing_text(row)
        if timing:
            text.append(f" · {timing}")
        text.append(f"\n{reason}")
        worst = row.headline or row.worst_summary
        if worst and reason not in worst and not worst.startswith(_REACH_VERDICTS):
            text.append(f" · worst finding: {worst}")
        return text
    worst = row.headline or row.worst_summary
    if worst:
        more = f" (+{row.findings - 1} more)" if row.findings > 1 else ""
        text.append(f" · {worst}{more}")
    else:
        text.append(f" · {row.status.value}, no findings")
    return text
