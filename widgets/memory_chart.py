"""Memory over time on the host screen: one sparkline per GPU with its level and slope."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Label, Sparkline

from widgets._format import mib


@dataclass(frozen=True)
class MemorySeries:
    """One GPU's memory history, already reduced by the caller."""

    index: int
    points_mib: tuple[float, ...]
    current_mib: float | None
    slope_mib_h: float | None
    """Least-squares trend over the history; None until there is enough of it."""
    rising: bool = False
    """Whether the caller judged the trend worth flagging (a possible leak)."""


def series_label(s: MemorySeries) -> str:
    """``GPU3  41,234  +1,200/h`` (MiB); fixed width so the sparklines line up."""
    now = mib(s.current_mib) if s.current_mib is not None else "–"
    slope = f"{s.slope_mib_h:+,.0f}/h" if s.slope_mib_h is not None else "–/h"
    return f"GPU{s.index:<2}{now:>7} {slope:>10}"


class MemoryRow(Horizontal):
    """A label and a sparkline for one GPU."""

    series: reactive[MemorySeries | None] = reactive(None, init=False)
    """The GPU shown on this row."""

    def __init__(self, series: MemorySeries) -> None:
        super().__init__(classes="mem-row")
        self._ready = False
        self.set_reactive(MemoryRow.series, series)

    def compose(self) -> ComposeResult:
        """A label for the numbers, a sparkline for the shape."""
        yield Label(classes="mem-label")
        yield Sparkline((), classes="mem-spark")

    def on_mount(self) -> None:
        """Show the series given at construction."""
        self._ready = True
        self.watch_series(self.series)

    def watch_series(self, s: MemorySeries | None) -> None:
        """Display ``s``."""
        if s is None or not self._ready:
            return
        label = self.query_one(Label)
        label.update(series_label(s))
        label.set_class(s.rising, "-rising")
        self.query_one(Sparkline).data = s.points_mib


class MemoryChart(Vertical):
    """Stacked per-GPU memory sparklines."""

    series: reactive[tuple[MemorySeries, ...]] = reactive((), init=False)
    """One entry per GPU, in index order."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._ready = False

    def compose(self) -> ComposeResult:
        """Just the title; rows are mounted once the GPUs are known."""
        yield Label("Memory used, MiB and trend", classes="panel-title")

    def on_mount(self) -> None:
        """Show whatever arrived before the chart was mounted."""
        self._ready = True
        self.watch_series(self.series)

    def watch_series(self, series: tuple[MemorySeries, ...]) -> None:
        """Update rows in place; add or drop rows only when the GPU count changes."""
        if not self._ready:
            return
        rows = list(self.query_children(MemoryRow))
        for row, s in zip(rows, series, strict=False):
            row.series = s
        for row in rows[len(series):]:
            row.remove()
        if len(series) > len(rows):
            self.mount_all(MemoryRow(s) for s in series[len(rows):])
