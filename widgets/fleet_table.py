"""The fleet screen's table: one line per host."""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive

from probes.analysis.judge import MEM_HIGH_PCT
from probes.fleet_state import FleetRow, HostStatus
from widgets._format import SEVERITY_CLASS, pct_cell, temp_cell
from widgets._styled_table import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable

STATUS_CLASS = {
    HostStatus.STREAMING: "cell--ok",
    HostStatus.CONNECTING: "cell--connecting",
    HostStatus.STALE: "cell--stale",
}


@dataclass(frozen=True)
class FleetLine:
    """A host's row plus why it is down (``FleetRow`` does not carry the reason)."""

    row: FleetRow
    down_reason: str | None = None


def status_cell(row: FleetRow, down_reason: str | None = None) -> Cell:
    """``streaming``, ``stale 42 s``, ``down: reason`` or ``connecting``."""
    text = row.status.value
    if row.status is HostStatus.STALE and row.stale_s is not None:
        text = f"stale {row.stale_s:.0f} s"
    elif row.status.is_down and down_reason:
        text = f"{row.status.value}: {down_reason}"
    return text, STATUS_CLASS.get(row.status, "cell--down")


class FleetTable(StyledTable):
    """Hosts in inventory order with their health at a glance."""

    COLUMNS = (
        ColumnSpec("host", "Host", 10),
        ColumnSpec("tags", "Tags", 7, narrow=False),
        ColumnSpec("status", "Status", 13),
        ColumnSpec("gpus", "GPUs", 5, right=True),
        ColumnSpec("temp", "Temp", 6, right=True),
        ColumnSpec("mem", "Mem", 5, right=True),
        ColumnSpec("util", "Util", 5, right=True),
        ColumnSpec("power", "Power", 7, right=True, narrow=False),
        ColumnSpec("findings", "Find", 4, right=True),
        ColumnSpec("worst", "Worst finding"),
    )

    hosts: reactive[tuple[FleetLine, ...]] = reactive((), init=False)
    """One line per host in inventory order, replaced as a whole on every refresh."""

    def watch_hosts(self) -> None:
        """Write the new rows into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per host, keyed by host name."""
        return [(line.row.name, self.cells(line)) for line in self.hosts]

    @staticmethod
    def cells(line: FleetLine) -> tuple[Cell, ...]:
        """The formatted cells of one host."""
        row = line.row
        status = status_cell(row, line.down_reason)
        gpus: Cell = (str(row.gpus_ok), None)
        if row.gpus_expected is not None:
            short = row.gpus_ok < row.gpus_expected
            gpus = (f"{row.gpus_ok}/{row.gpus_expected}", "cell--down" if short else None)
        sev_cls = SEVERITY_CLASS[row.worst] if row.worst else "cell--muted"
        return (
            (row.name, None),
            (",".join(row.tags), "cell--muted"),
            status,
            gpus,
            temp_cell(row.max_temp_c, row.temp_level),
            pct_cell(row.mem_used_pct, MEM_HIGH_PCT),
            pct_cell(row.mean_util_pct),
            (f"{row.power_w:,.0f} W", None) if row.power_w is not None else MISSING,
            (str(row.findings), sev_cls),
            (row.worst_summary or "", sev_cls),
        )
