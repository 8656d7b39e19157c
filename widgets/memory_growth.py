"""GPU memory growth on the host screen: the panel a soak watcher keeps open.

A slow leak is a few hundred MiB an hour on a 80 GiB card, which a used-memory number
hides and a self-scaled sparkline exaggerates.  So each GPU's row leads with the fitted
slope and the projected time until the card is full, a flagged GPU says ``▲ LEAK`` in
words (the colour-safe theme must read the same), and the chart above draws every GPU
in a dim line with the leaking ones, and the selected one, picked out.  Beneath, the
processes on the selected GPU with their own slopes name the culprit.

The chart is ``textual_plot.PlotWidget`` in braille (see ``widgets/CHARTS.md``); it is
only shown when the panel has the rows for it, since the per-GPU numbers matter more, and
only while a leak is flagged: with nothing rising the panel is its rows (each with its own
trend), not a screenful of flat lines.
Its line colours come from component classes, so every rigwatch theme styles it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from textual import events
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widgets import Static
from textual_hires_canvas import Canvas
from textual_plot import DurationFormatter, HiResMode, PlotWidget
from textual_plot.plot_widget import Legend

from probes.triage import Severity
from widgets._alive import leaving
from widgets._format import SEVERITY_VARIABLE, mib, spark_values
from widgets.thermal_panel import ScaledHistory

LEAK_MARK = ("▲", "LEAK")
OK_MARK = ("·", "ok")
RISING_MARK = ("▲", "rising")
"""A process the caller flagged; glyph and word, as for GPUs."""
CHART_MIN_ROWS = 7
"""Below this the braille chart has too few rows to show a trend, so it is hidden."""
PROC_ROWS_WANTED = 8
PROC_ROWS_MIN = 3
NAME_WIDTH = 20
USER_WIDTH = 10
TREND_POINTS = 240
"""Points handed to each row's sparkline: more than any panel is wide."""
TREND_MIN_SPAN_MIB = 1024.0
"""The rows' shared scale is never narrower: a few MiB of allocator churn stays flat."""


@dataclass(frozen=True)
class GpuMemoryTrend:
    """One GPU's memory over the chosen window, with the caller's fit and leak verdict."""

    index: int
    points: tuple[tuple[float, float], ...]
    """``(t, MiB)`` in time order; ``t`` in seconds on any clock shared by all GPUs."""
    total_mib: float | None
    current_mib: float | None
    peak_mib: float | None
    slope_mib_h: float | None
    """Growth of the lower envelope (``probes.analysis.slope``, as the leak detector fits
    it); None until there is enough history."""
    hours_to_full: float | None
    """Projected from the slope; None when not growing or unknown."""
    leaking: bool = False
    urgency: Severity | None = None
    """The leak finding's severity (critical within the operator's ``leak_critical_hours``)."""
    gone: str | None = None
    """``lost``/``missing`` when the core judges the GPU gone: its history ends, it says so."""


@dataclass(frozen=True)
class ProcessMemory:
    """A compute process on the selected GPU."""

    pid: int
    user: str
    name: str
    used_mib: float | None
    slope_mib_h: float | None
    leaking: bool = False
    """Whether the caller judged this process's own growth worth flagging."""


@dataclass(frozen=True)
class MemoryGrowthView:
    """Everything the panel draws; an equal view costs no redraw."""

    window: str = "1 h"
    """Label of the window the points cover: ``5 min``, ``1 h``, ``6 h``, ``24 h``, ``all``."""
    gpus: tuple[GpuMemoryTrend, ...] = ()
    selected_gpu: int | None = None
    """GPU index whose processes are listed (and whose line is drawn brightest)."""
    processes: tuple[ProcessMemory, ...] = ()

    @property
    def trend_span(self) -> float:
        """MiB from the bottom to the top of every GPU row's trend: the largest change of
        any GPU over the window, at least ``TREND_MIN_SPAN_MIB``.  Each row starts at its
        own lowest point, so a leak rises by its growth while a steady row stays flat."""
        spans = [max(v) - min(v) for g in self.gpus
                 if (v := spark_values([p[1] for p in g.points]))]
        return max([TREND_MIN_SPAN_MIB, *spans])


# ---- pure formatting -----------------------------------------------------------------


def fmt_mib(value: float | None) -> str:
    """``41,234``, or ``–`` without a reading."""
    return "–" if value is None else mib(value)


def fmt_slope(slope: float | None) -> str:
    """``+1,200/h``; one decimal below 10 MiB/h so a slow leak does not read as ``+0``."""
    if slope is None:
        return "–"
    if abs(slope) < 10:
        return f"{slope:+.1f}/h"
    return f"{slope:+,.0f}/h"


def fmt_full(hours: float | None) -> str:
    """``~11 h``, ``~40 min``, ``~3 d``, ``now``; ``—`` when not heading for full."""
    if hours is None or hours != hours or hours == float("inf"):
        return "—"
    if hours <= 0:
        return "now"
    if hours < 1:
        return f"~{max(1, round(hours * 60))} min"
    if hours < 48:
        return f"~{round(hours)} h"
    return f"~{round(hours / 24)} d"


def full_style(g: GpuMemoryTrend) -> str:
    """Theme variable for the time-to-full: the leak finding's severity, as the core set it."""
    if not g.leaking or g.hours_to_full is None:
        return "$text-dim" if g.hours_to_full is None else "$foreground"
    return SEVERITY_VARIABLE[g.urgency or Severity.WARNING]


GPU_HEADER = f"  {'state':<7}{'GPU':<6}{'used MiB':>9} {'slope MiB':>10} {'full in':>8} {'peak':>8}"
PROC_HEADER = (f"  {'':<9}{'pid':>8} {'user':<{USER_WIDTH}} {'name':<{NAME_WIDTH}} "
               f"{'MiB':>8} {'slope':>9}")


def gpu_line(g: GpuMemoryTrend, selected: bool) -> Content:
    """The numbers for one GPU at fixed widths, so rows and the header line up."""
    glyph, word = LEAK_MARK if g.leaking else OK_MARK
    state = "[bold $mem-rising]$glyph $word[/]" if g.leaking else "[$text-dim]$glyph $word[/]"
    if g.gone:
        glyph, word = "✗", g.gone[:4]
        state = "[bold $sev-critical]$glyph $word[/]"
    slope_style = "bold $mem-rising" if g.leaking else "$foreground"
    return Content.from_markup(
        f"$cursor {state}$pad[bold]$gpu[/]$used [{slope_style}]$slope[/] "
        f"[{full_style(g)}]$full[/] [$text-dim]$peak[/]",
        cursor="▶" if selected else " ", glyph=glyph, word=word,
        pad=" " * (7 - len(glyph) - 1 - len(word)), gpu=f"GPU{g.index:<3}",
        used=f"{fmt_mib(g.current_mib):>9}", slope=f"{fmt_slope(g.slope_mib_h):>10}",
        full=f"{fmt_full(g.hours_to_full):>8}", peak=f"{fmt_mib(g.peak_mib):>8}")


def summary(view: MemoryGrowthView) -> Content:
    """Title line: the window, then which GPUs leak (the first thing a watcher reads)."""
    title = Content.from_markup("[bold $primary]GPU memory growth[/] [$text-dim]· $w[/]",
                                w=view.window)
    leaks = [g for g in view.gpus if g.leaking]
    if not view.gpus:
        return title
    if not leaks:
        return title + Content.from_markup("  [$text-dim]$g no leak flagged[/]", g=OK_MARK[0])
    names = ", ".join(f"GPU{g.index}" for g in leaks)
    return title + Content.from_markup("  [bold $mem-rising]$g $w: $names[/]",
                                       g=LEAK_MARK[0], w=LEAK_MARK[1], names=names)


def quiet(view: MemoryGrowthView) -> bool:
    """No GPU flagged as leaking: the panel shrinks to its rows, without the chart."""
    return not any(g.leaking for g in view.gpus)


def truncate(text: str, width: int) -> str:
    """Cut to ``width`` cells with an ellipsis, so a long command line keeps its columns."""
    return text if len(text) <= width else text[:width - 1] + "…"


def process_lines(view: MemoryGrowthView, rows: int) -> list[Content]:
    """The process section in at most ``rows`` lines: title, header, rows, ``+N more``."""
    if rows <= 0 or not view.gpus:
        return []
    sel = view.selected_gpu
    if sel is None:
        return [Content.from_markup("[$text-dim]processes: click a GPU row to list them[/]")]
    title = Content.from_markup("[bold $primary]Processes on GPU$n[/]", n=str(sel))
    if not view.processes:
        return [title + Content.from_markup("  [$text-dim]none[/]")]
    lines = [title]
    if rows >= 3:
        lines.append(Content.from_markup("[$text-dim]$h[/]", h=PROC_HEADER))
    room = rows - len(lines)
    shown = view.processes
    if len(shown) > room:
        shown = shown[:max(0, room - 1)]
    for p in shown:
        glyph, word = RISING_MARK if p.leaking else ("", "")
        mark = f"{glyph} {word}" if p.leaking else ""
        slope_style = "bold $mem-rising" if p.leaking else "$foreground"
        lines.append(Content.from_markup(
            f"  [bold $mem-rising]$mark[/]$pid [$text-dim]$user[/] $name $used "
            f"[{slope_style}]$slope[/]",
            mark=f"{mark:<9}", pid=f"{p.pid:>8}",
            user=f"{truncate(p.user, USER_WIDTH):<{USER_WIDTH}}",
            name=f"{truncate(p.name, NAME_WIDTH):<{NAME_WIDTH}}",
            used=f"{fmt_mib(p.used_mib):>8}", slope=f"{fmt_slope(p.slope_mib_h):>9}"))
    hidden = len(view.processes) - len(shown)
    if hidden:
        lines.append(Content.from_markup("[$text-dim]  … +$n more[/]", n=str(hidden)))
    return lines


def reduce_points(points: Sequence[tuple[float, float]], buckets: int
                  ) -> tuple[list[float], list[float]]:
    """Min and max of each of ``buckets`` time slices, in time order.

    Hours of 1 s samples are far more points than braille has dots; plotting them all
    costs ~4x the render time for the same picture, and keeping both extremes of each
    slice keeps a spike visible where a mean would hide it.
    """
    n = len(points)
    if n <= 2 * buckets or buckets <= 0:
        return [p[0] for p in points], [p[1] for p in points]
    xs: list[float] = []
    ys: list[float] = []
    for b in range(buckets):
        seg = points[b * n // buckets:(b + 1) * n // buckets]
        if not seg:
            continue
        lo = min(seg, key=lambda p: p[1])
        hi = max(seg, key=lambda p: p[1])
        for p in ((lo, hi) if lo[0] <= hi[0] else (hi, lo)):
            xs.append(p[0])
            ys.append(p[1])
    return xs, ys


def bucket_means(values: Sequence[float], buckets: int) -> list[float]:
    """Mean of each of ``buckets`` slices: a row sparkline wants the level, not the noise."""
    n = len(values)
    if n <= buckets:
        return list(values)
    out = []
    for b in range(buckets):
        seg = values[b * n // buckets:(b + 1) * n // buckets]
        if seg:
            out.append(sum(seg) / len(seg))
    return out


def chart_rows(height: int, n_gpus: int, n_procs: int) -> tuple[int, int]:
    """Rows for the chart and for the process section out of ``height``.

    The per-GPU rows always get theirs; the processes get up to ``PROC_ROWS_WANTED``
    (at least ``PROC_ROWS_MIN``) and the chart takes what is left if that is enough to
    show a trend, else nothing, and the processes have the rest.
    """
    fixed = 1 + (1 + n_gpus if n_gpus else 0)
    wanted = 2 + n_procs if n_procs else 1
    for procs in (min(wanted, PROC_ROWS_WANTED), min(wanted, PROC_ROWS_MIN)):
        spare = height - fixed - procs
        if n_gpus and spare >= CHART_MIN_ROWS:
            return spare, procs
    return 0, max(0, height - fixed)


# ---- widgets -------------------------------------------------------------------------


class AgoFormatter(DurationFormatter):
    """Time axis in seconds before the newest sample: ``-30min`` … ``now``."""

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        """Ticks rounded to the microsecond, so the last one is exactly ``0``: the axis end."""
        return [round(t, 6) + 0.0 for t in super().get_ticks(min_, max_, max_ticks)]

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        """As durations, with the newest tick named."""
        labels = super().get_labels_for_ticks(ticks)
        return ["now" if t == 0 else label
                for t, label in zip(ticks, labels, strict=True)]


PLOT_MAX = 1e15
"""Beyond this (MiB) the plot's float arithmetic loses the axis: no GPU holds it."""


def _plottable(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    """Points the plot can draw: finite, within ±``PLOT_MAX``, rounded to 0.001 MiB.

    The decoder already bounds what a host sends; this keeps a recording made before
    that (or any bug upstream) from raising in the plot's axis code: an infinity, a NaN
    or a span of 5e-324 each did.
    """
    keep = [(x, round(y, 3)) for x, y in zip(xs, ys, strict=False)
            if math.isfinite(x) and math.isfinite(y) and abs(y) <= PLOT_MAX]
    return [x for x, _ in keep], [y for _, y in keep]


class PlotCanvas(Canvas):
    """The plot's canvas, painting every line of its region in its own style.

    ``Canvas`` answers a line outside its buffer (before its first resize, which comes a
    frame after layout) with a zero-width strip whose segment has no style at all; Textual's
    NO_COLOR filter (``Monochrome``) reads that style's colour and raised, ending the
    console.  A blank line the widget's width in its style is what that line shows anyway.
    """

    def render_line(self, y: int) -> Strip:
        """The buffered line, or a blank one in the canvas's style outside the buffer."""
        strip = super().render_line(y)
        if strip.cell_length == 0 or any(seg.style is None for seg in strip):
            return Strip.blank(self.size.width, self.rich_style)
        return strip


class GrowthPlot(PlotWidget, can_focus=False):
    """All GPUs' memory lines in braille; leaking and selected lines picked out by class.

    Not focusable and without pan/zoom, so its arrow and ``+``/``-`` bindings never
    shadow the console's.  ``PlotWidget`` takes a line style string per series, so the
    series are re-plotted with freshly resolved component styles when the theme changes.
    """

    COMPONENT_CLASSES = PlotWidget.COMPONENT_CLASSES | {
        "growth-plot--line", "growth-plot--leak", "growth-plot--selected"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, allow_pan_and_zoom=False)
        self._gpus: tuple[GpuMemoryTrend, ...] = ()
        self._selected: int | None = None
        self._styles_key: tuple[str, ...] = ()

    def compose(self) -> ComposeResult:
        """``PlotWidget``'s layout with ``PlotCanvas`` for each canvas (see there)."""
        with Grid():
            for name in ("margin-top", "margin-left", "plot", "margin-bottom"):
                yield PlotCanvas(1, 1, id=name)
        yield Legend(id="legend")

    def on_mount(self) -> None:
        """Compact margins: a panel has rows to spare only for the lines themselves."""
        if leaving(self):  # the margins' watchers lay out a grid that was never mounted
            return
        self.margin_top = 0
        self.margin_bottom = 1
        self.margin_left = 8
        self.set_x_formatter(AgoFormatter())

    def show(self, gpus: tuple[GpuMemoryTrend, ...], selected: int | None) -> None:
        """Plot ``gpus``; dim first, then leaking, then the selected GPU on top."""
        if (gpus, selected) == (self._gpus, self._selected) and self._styles_key:
            return
        self._gpus, self._selected = gpus, selected
        self._replot()

    def _line_styles(self) -> tuple[str, str, str]:
        def style(name: str) -> str:
            # a removed plot has no component styles left: plain lines, never a KeyError
            return str(self.get_component_rich_style(name, partial=True, default=Style())
                       or Style())
        return (style("growth-plot--line"), style("growth-plot--leak"),
                style("growth-plot--selected"))

    def _replot(self) -> None:
        styles = self._line_styles()
        self._styles_key = styles
        line, leak, selected = styles
        self.clear()
        newest = max((g.points[-1][0] for g in self._gpus if g.points), default=0.0)
        buckets = max(1, self.size.width * 2)

        def rank(g: GpuMemoryTrend) -> int:
            return 2 if g.index == self._selected else 1 if g.leaking else 0

        for g in sorted(self._gpus, key=rank):
            if not g.points:
                continue
            xs, ys = _plottable(*reduce_points(g.points, buckets))
            if not xs:
                continue
            style = leak if g.leaking else selected if g.index == self._selected else line
            if g.index == self._selected and g.leaking:
                style = f"bold {leak}"
            self.plot([x - newest for x in xs], ys, line_style=style,
                      hires_mode=HiResMode.BRAILLE, label=f"GPU{g.index}")

    def notify_style_update(self) -> None:
        """A theme switch restyles the axes itself; re-plot so the lines follow.

        Deferred: the component styles are only recomputed after this widget's own.
        """
        super().notify_style_update()
        if self.is_mounted:
            self.call_after_refresh(self._restyle)

    def _restyle(self) -> None:
        # deferred: by now the host screen may have been popped and this plot removed
        if leaving(self):
            return
        if self._styles_key and self._line_styles() != self._styles_key:
            self._replot()

    def on_resize(self) -> None:
        """Keep about two points per braille column at the new width."""
        if self._gpus and not leaving(self):
            self._replot()


class GpuGrowthRow(Horizontal):
    """One GPU: its numbers, then its own trend sparkline in the remaining width."""

    def __init__(self, g: GpuMemoryTrend, selected: bool,
                 span: float = TREND_MIN_SPAN_MIB) -> None:
        super().__init__(classes="mg-row")
        self.index = g.index
        self._shown: tuple[GpuMemoryTrend, bool] = (g, selected)
        self._span = span
        self._ready = False

    def compose(self) -> ComposeResult:
        """Numbers and shape."""
        yield Static(classes="mg-stats")
        yield ScaledHistory(classes="mg-trend")

    def on_mount(self) -> None:
        """Show the GPU given at construction."""
        if leaving(self):
            return
        self._ready = True
        self._draw()

    def show(self, g: GpuMemoryTrend, selected: bool, span: float | None = None) -> None:
        """Display ``g`` (its trend ``span`` MiB tall, shared by the panel's rows); a no-op
        when nothing about this row changed."""
        rescaled = span is not None and span != self._span
        if span is not None:
            self._span = span
        if (g, selected) == self._shown and self._ready and not rescaled:
            return
        self._shown = (g, selected)
        self._draw()

    def _draw(self) -> None:
        if not self._ready:
            return
        g, selected = self._shown
        self.index = g.index
        self.query_one(".mg-stats", Static).update(gpu_line(g, selected))
        trend = self.query_one(ScaledHistory)
        points = tuple(bucket_means(spark_values([p[1] for p in g.points]), TREND_POINTS))
        low = min(points, default=0.0)
        trend.scale = (low, low + self._span)
        trend.points = points
        trend.colour = ("$sev-critical" if g.gone else "$mem-rising" if g.leaking
                        else "$chart-low")
        self.set_class(g.leaking, "-leak")
        self.set_class(selected, "-selected")

    def on_click(self, event: events.Click) -> None:
        """Ask for this GPU's processes."""
        event.stop()
        self.post_message(MemoryGrowth.GpuPicked(self.index))


class MemoryGrowth(Vertical):
    """Panel: title with the leak summary, chart, one row per GPU, processes of one GPU."""

    view: reactive[MemoryGrowthView] = reactive(MemoryGrowthView, init=False)
    """Replaced as a whole each refresh; the reactive skips equal views."""

    class GpuPicked(Message):
        """The operator clicked a GPU row: the screen should list that GPU's processes."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._ready = False

    def compose(self) -> ComposeResult:
        """Rows are mounted once the GPU count is known."""
        yield Static(classes="mg-title")
        yield GrowthPlot(id="mg-plot")
        yield Static(classes="mg-header")
        yield Vertical(classes="mg-rows")
        yield Static(classes="mg-procs")

    def on_mount(self) -> None:
        """Show what arrived before mounting."""
        if leaving(self):
            return
        self._ready = True
        self.watch_view(self.view)

    def on_resize(self) -> None:
        """Re-divide the rows between chart and processes."""
        self._layout()

    def watch_view(self, view: MemoryGrowthView) -> None:
        """Update in place; rows are only added or removed when the GPU count changes."""
        if not self._ready:
            return
        self.query_one(".mg-title", Static).update(summary(view))
        self.set_class(quiet(view), "-quiet")
        header = self.query_one(".mg-header", Static)
        header.display = bool(view.gpus)
        header.update(Content.from_markup("[$text-dim]$h[/]", h=GPU_HEADER))
        box = self.query_one(".mg-rows", Vertical)
        rows = list(box.query_children(GpuGrowthRow))
        for row in rows[len(view.gpus):]:
            row.remove()
        span = view.trend_span
        for row, g in zip(rows, view.gpus, strict=False):
            row.show(g, g.index == view.selected_gpu, span)
        if len(view.gpus) > len(rows):
            box.mount_all(GpuGrowthRow(g, g.index == view.selected_gpu, span)
                          for g in view.gpus[len(rows):])
        self._layout()

    def _layout(self) -> None:
        if not self._ready:
            return
        view = self.view
        chart_h, procs_h = chart_rows(self.content_size.height, len(view.gpus),
                                      len(view.processes))
        if quiet(view):
            chart_h, procs_h = 0, min(PROC_ROWS_MIN, 2 + len(view.processes))
        plot = self.query_one(GrowthPlot)
        plot.display = chart_h > 0
        if chart_h:
            plot.styles.height = chart_h
            plot.show(view.gpus, view.selected_gpu)
        procs = self.query_one(".mg-procs", Static)
        lines = process_lines(view, procs_h)
        if not view.gpus:
            lines = [Content.from_markup("[$text-dim]no memory history yet[/]")]
        procs.update(Content("\n").join(lines))
