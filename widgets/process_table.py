"""Host panel 5, Processes: what holds GPU memory, biggest first.

One row per (process, GPU): a process on several GPUs has a row on each, so the GPU
column says where the memory is.  The panel renders only what it is given and does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label, Static

from widgets._alive import leaving
from widgets._format import mib
from widgets._styled_table import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable

TITLE = "Processes"
COMMAND_WIDTH = 32
"""The command column's width; longer commands are cut with ``…`` so the cut shows."""
EMPTY = "no GPU processes"
WORK_WIDTH = 24


@dataclass(frozen=True)
class ProcessRow:
    """A compute process's memory on one GPU; None where the probe could not tell."""

    pid: int | None
    user: str | None
    command: str | None
    gpu: int | None
    used_mib: float | None
    work: str | None = None
    """What it works for: Slurm job and rank, container or pod (None: the host cannot tell)."""


def sort_key(p: ProcessRow) -> tuple[bool, float, int, int]:
    """Most memory first; unknown amounts last; then by GPU and pid for a stable order."""
    return (p.used_mib is None, -(p.used_mib or 0.0), p.gpu if p.gpu is not None else 1 << 30,
            p.pid if p.pid is not None else 1 << 30)


def _text(value: str | None, width: int | None = None) -> Cell:
    if not value:
        return MISSING
    if width is not None and len(value) > width:
        value = value[: width - 1] + "…"
    return value, None


class ProcessTable(StyledTable):
    """GPU processes of one host, sorted by memory."""

    COLUMNS = (
        ColumnSpec("pid", "PID", 8, right=True),
        ColumnSpec("user", "User", 10),
        ColumnSpec("command", "Command", COMMAND_WIDTH),
        ColumnSpec("gpu", "GPU", 3, right=True),
        ColumnSpec("mem", "Mem MiB", 9, right=True),
        ColumnSpec("work", "Job / container", WORK_WIDTH, narrow=False),
    )

    processes: reactive[tuple[ProcessRow, ...]] = reactive((), init=False)
    """Every (process, GPU) pair in any order; the table sorts them."""

    def watch_processes(self) -> None:
        """Write the new rows into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """Rows by memory, keyed ``pid/gpu`` (made unique when the probe gave no pid)."""
        seen: dict[str, int] = {}
        rows: list[KeyedRow] = []
        for p in sorted(self.processes, key=sort_key):
            key = f"{p.pid if p.pid is not None else '?'}/{p.gpu if p.gpu is not None else '?'}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key = f"{key}#{seen[key]}"
            rows.append((key, self.cells(p)))
        return rows

    @staticmethod
    def cells(p: ProcessRow) -> tuple[Cell, ...]:
        """The formatted cells of one process."""
        return (
            (str(p.pid), None) if p.pid is not None else MISSING,
            _text(p.user, 10),
            _text(p.command, COMMAND_WIDTH),
            (str(p.gpu), None) if p.gpu is not None else MISSING,
            (mib(p.used_mib), None) if p.used_mib is not None else MISSING,
            _text(p.work, WORK_WIDTH),
        )


class ProcessPanel(Vertical):
    """Title, the table, and a line saying so when there is nothing to list."""

    processes: reactive[tuple[ProcessRow, ...]] = reactive((), init=False)
    """Handed to the table as is."""

    def compose(self) -> ComposeResult:
        """Title, empty-state line, table."""
        yield Label(TITLE, classes="panel-title")
        yield Static(EMPTY, classes="process-empty")
        yield ProcessTable(classes="process-table")

    def on_mount(self) -> None:
        """Show whatever arrived before mounting (or the empty state)."""
        self.watch_processes(self.processes)

    def watch_processes(self, processes: tuple[ProcessRow, ...]) -> None:
        """Pass the rows on and show the empty line only when there are none."""
        if not self.is_mounted or leaving(self):
            return
        self.query_one(ProcessTable).processes = processes
        self.query_one(".process-empty").display = not processes
