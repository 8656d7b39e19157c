"""The job screen's table: one line per GPU a Slurm job holds, by rank, with the core's
verdict for that GPU (the same word and style as the host screen's GPU table)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive

from widgets._format import pct_cell, temp_cell
from widgets._styled_table import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable
from widgets.gpu_table import GpuRow, state_cell


@dataclass(frozen=True)
class JobLine:
    """One GPU of the job: the rank on it (None when no rank was named), its host, its row."""

    rank: int | None
    host: str
    gpu: GpuRow | None
    """None for a rank no witness placed on a GPU (``note`` says what was missing)."""
    note: str | None = None


class JobTable(StyledTable):
    """Rank, host, GPU and the GPU's state, numbers, bus id and serial."""

    COLUMNS = (
        ColumnSpec("rank", "Rank", 5, right=True),
        ColumnSpec("host", "Host"),
        ColumnSpec("gpu", "GPU", 3, right=True),
        ColumnSpec("state", "State", 12),
        ColumnSpec("util", "Util", 5, right=True),
        ColumnSpec("mem", "Mem", 5, right=True),
        ColumnSpec("temp", "Temp", 6, right=True),
        ColumnSpec("bus", "Bus id", 12, narrow=False),
        ColumnSpec("serial", "Serial", narrow=False),
    )

    lines: reactive[tuple[JobLine, ...]] = reactive((), init=False)

    def watch_lines(self) -> None:
        """Write the job's GPUs into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per (host, GPU)."""
        return [(f"{x.host}/{x.gpu.index}" if x.gpu is not None else f"{x.host}/r{x.rank}",
                 self.cells(x)) for x in self.lines]

    @staticmethod
    def cells(line: JobLine) -> tuple[Cell, ...]:
        row = line.gpu
        if row is None:
            return ((str(line.rank) if line.rank is not None else "-", None),
                    (line.host, None), ("-", "cell--muted"),
                    (line.note or "not placed", "cell--muted"), MISSING, MISSING, MISSING,
                    ("", None), ("", None))
        head: tuple[Cell, ...] = (
            (str(line.rank) if line.rank is not None else "-", None), (line.host, None),
            (str(row.index), None), state_cell(row))
        tail: tuple[Cell, ...] = ((row.bus_id or "", "cell--muted"),
                                  (row.serial or "", "cell--muted"))
        g = row.gpu
        if g is None:
            return (*head, MISSING, MISSING, MISSING, *tail)  # the bus id and serial say which
        return (*head, pct_cell(g.util_pct), pct_cell(g.mem_used_pct, row.judged.mem_high),
                temp_cell(g.temp_c, row.judged.temp), *tail)
