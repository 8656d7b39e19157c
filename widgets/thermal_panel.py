"""Thermals and power on the host screen: how close each GPU is to slowing itself down.

A temperature alone says little, since slowdown thresholds differ per board; so each
GPU's temperature is drawn as a bar towards its own slowdown threshold with both
numbers, next to power against its limit and the SM clock against its maximum.  When
the core judges the GPU throttled (``probes.analysis.judge``, the same verdict as the wall's)
the row says ``↓ THROTTLED`` (glyph, word and ``$clock-throttled``) and names the reasons on
the line beneath; reasons that are not throttling now (idle, application clocks, the power
cap of an idle GPU) are listed dimmed.
A temperature history per GPU fills the spare width, every GPU on one scale (a 64-66 °C
wobble stays a low line, not a full-height one), in the colour of the core's verdict: the
throttled GPU in the throttled colour, a hot one hot, a healthy one calm.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from probes.analysis.judge import TempLevel
from widgets._alive import leaving
from widgets._format import TEMP_VARIABLE, spark_values

THROTTLED_MARK = ("↓", "THROTTLED")
OK_MARK = ("✓", "ok")
BAR_CELLS = 8
BAR_FLOOR_C = 25.0
"""The temperature bar runs from about room temperature to the slowdown threshold."""
PARTIAL = " ▏▎▍▌▋▊▉"
STATS_WIDTH = 78
SCALE_MIN_SPAN = 10.0
"""°C: a history scale never narrower, so sensor noise on a steady rack stays flat."""
BLOCKS = "▁▂▃▄▅▆▇█"
HEADER = (f" {'GPU':<5}{'state':<12}{'temp':>5} {'→ slowdown':<12} {'HBM temp':>9} "
          f"{'power':>9} {'SM clock':>13}")
"""Labels over ``gpu_line``'s fixed-width columns."""
"""Cells of the numbers line; the temperature sparkline gets the width beyond it."""


@dataclass(frozen=True)
class GpuThermal:
    """One GPU's thermal and power state; None where the driver reported nothing."""

    index: int
    temp_c: float | None
    temp_slowdown_c: float | None
    temp_mem_c: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    sm_clock_max_mhz: float | None
    reasons: tuple[str, ...] = ()
    """Active clock-event reasons by name, e.g. ``SW thermal slowdown``, ``HW power brake``."""
    temp_points: tuple[float, ...] = ()
    """Recent GPU temperatures, oldest first, for the history sparkline."""
    throttled: bool = False
    """The core's verdict: a throttle finding names this GPU."""
    throttling_reasons: tuple[str, ...] = ()
    """Of ``reasons``, those the core counts as throttling now."""
    temp_level: TempLevel = TempLevel.UNKNOWN
    """The GPU temperature against this board's slowdown threshold."""
    mem_temp_level: TempLevel = TempLevel.UNKNOWN
    gone: str | None = None
    """``lost`` or ``missing`` when the core judges the GPU gone: its row stays, saying so."""
    power_high: bool = False
    """The core's verdict: drawing near its power limit (the operator's
    ``power_near_share``)."""


@dataclass(frozen=True)
class ThermalView:
    """Everything the panel draws; an equal view costs no redraw."""

    gpus: tuple[GpuThermal, ...] = ()

    @property
    def temp_scale(self) -> tuple[float, float]:
        """One temperature scale for every GPU's history: the lowest reading to the highest
        reading or slowdown threshold, at least ``SCALE_MIN_SPAN`` °C wide."""
        values = [v for g in self.gpus for v in spark_values(g.temp_points)]
        if not values:
            return (0.0, SCALE_MIN_SPAN)
        lo, hi = min(values), max(values)
        slowdowns = [g.temp_slowdown_c for g in self.gpus if g.temp_slowdown_c is not None]
        if slowdowns and hi >= min(slowdowns) - SCALE_MIN_SPAN:
            hi = max(hi, min(slowdowns))
        return lo, max(hi, lo + SCALE_MIN_SPAN)


# ---- pure formatting -----------------------------------------------------------------


def bar(value: float, top: float, cells: int = BAR_CELLS, floor: float = 0.0) -> str:
    """``█████▌··``: ``value`` from ``floor`` to ``top`` in eighths of a cell, clamped."""
    span = top - floor
    frac = 0.0 if span <= 0 else max(0.0, min(1.0, (value - floor) / span))
    eighths = round(frac * cells * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (PARTIAL[part] if part and full < cells else "")
    return text + "·" * (cells - len(text))


def _num(value: float | None, unit: str = "") -> str:
    return "–" if value is None else f"{value:.0f}{unit}"


def temp_part(g: GpuThermal) -> Content:
    """``81°C ██████▌· 87``: the bar fills as the GPU nears its slowdown threshold."""
    colour = TEMP_VARIABLE[g.temp_level]
    if g.temp_c is None:
        return Content.from_markup("[$text-dim]$t[/]", t=f"{'–':>4} {' ' * BAR_CELLS} {'':>3}")
    if g.temp_slowdown_c is None:
        return Content.from_markup(f"[{colour}]$t[/]", t=f"{_num(g.temp_c, '°C'):>5}"
                                   f" {' ' * BAR_CELLS}    ")
    return Content.from_markup(
        f"[{colour}]$t $bar[/] [$text-dim]$slow[/]", t=f"{_num(g.temp_c, '°C'):>5}",
        bar=bar(g.temp_c, g.temp_slowdown_c, floor=BAR_FLOOR_C),
        slow=f"{g.temp_slowdown_c:>3.0f}")


def power_part(g: GpuThermal) -> Content:
    """``412/700 W``, highlighted near the limit."""
    text = f"{_num(g.power_w)}/{_num(g.power_limit_w)} W"
    return Content.from_markup("[bold $sev-warning]$t[/]" if g.power_high else "$t",
                               t=f"{text:>9}")


def clock_part(g: GpuThermal) -> Content:
    """``1410/1980 MHz``; in the throttled colour while a throttle reason is active."""
    text = f"{_num(g.sm_clock_mhz)}/{_num(g.sm_clock_max_mhz)} MHz"
    return Content.from_markup("[bold $clock-throttled]$t[/]" if g.throttled else "$t",
                               t=f"{text:>13}")


def gpu_line(g: GpuThermal) -> Content:
    """The numbers for one GPU at fixed widths (69 cells), so rows line up."""
    glyph, word = THROTTLED_MARK if g.throttled else OK_MARK
    state = ("[bold $clock-throttled]$glyph $word[/]" if g.throttled
             else "[$status-streaming]$glyph $word[/]")
    if g.gone:
        glyph, word = "✗", g.gone.upper()
        state = "[bold $sev-critical]$glyph $word[/]"
    head = Content.from_markup(f"[bold]$gpu[/]{state}$pad ", gpu=f"GPU{g.index:<2}",
                               glyph=glyph, word=word,
                               pad=" " * (len(THROTTLED_MARK[1]) - len(word)))
    mem = Content.from_markup(
        f"[$text-dim]mem[/] [{TEMP_VARIABLE[g.mem_temp_level]}]$t[/]",
        t=f"{_num(g.temp_mem_c, '°C'):>5}")
    return Content(" ").join([head + temp_part(g), mem, power_part(g), clock_part(g)])


def history_colour(g: GpuThermal) -> str:
    """The history's theme variable from the core's verdict: throttled, hot, warm or calm."""
    if g.throttled:
        return "$clock-throttled"
    return {TempLevel.HOT: "$gpu-hot", TempLevel.WARM: "$gpu-warm",
            TempLevel.OK: "$chart-low"}.get(g.temp_level, "$text-dim")


def history_text(points: tuple[float, ...], scale: tuple[float, float], width: int) -> str:
    """The newest ``width`` buckets of ``points`` as blocks on the shared ``scale``."""
    values = spark_values(points)
    if width <= 0 or not values:
        return ""
    n = len(values)
    cells = min(width, n)
    means = [sum(seg) / len(seg) for b in range(cells)
             if (seg := values[b * n // cells:(b + 1) * n // cells])]
    lo, hi = scale
    span = (hi - lo) or 1.0
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[max(0, min(top, round((v - lo) / span * top)))] for v in means)


def history_header(view: ThermalView) -> str:
    """The history column's label: the scale it shares."""
    lo, hi = view.temp_scale
    return f"temp history, all GPUs {lo:.0f}–{hi:.0f} °C"


def reasons_line(g: GpuThermal) -> Content | None:
    """``└ SW thermal slowdown, HW power brake``; reasons not throttling now dimmed; None if
    none."""
    if not g.reasons:
        return None
    parts = [Content.from_markup("[bold $clock-throttled]$r[/]" if r in g.throttling_reasons
                                 else "[$text-dim]$r[/]", r=r) for r in g.reasons]
    return Content.from_markup("       [$text-dim]└[/] ") + Content(", ").join(parts)


def summary(view: ThermalView) -> Content:
    """Title line: how many GPUs are throttled, and which."""
    title = Content.from_markup("[bold $primary]Thermals and power[/]")
    if not view.gpus:
        return title
    hot = [g for g in view.gpus if g.throttled]
    if not hot:
        return title + Content.from_markup("  [$status-streaming]$g no throttling[/]",
                                           g=OK_MARK[0])
    names = ", ".join(f"GPU{g.index}" for g in hot)
    return title + Content.from_markup("  [bold $clock-throttled]$g $n $w: $names[/]",
                                       g=THROTTLED_MARK[0], n=str(len(hot)),
                                       w=THROTTLED_MARK[1].lower(), names=names)


# ---- widgets -------------------------------------------------------------------------


class ThermalRow(Horizontal):
    """One GPU: numbers and reasons on the left, its temperature history on the right."""

    def __init__(self, g: GpuThermal, scale: tuple[float, float] | None = None) -> None:
        super().__init__(classes="th-row")
        self._gpu = g
        self._scale = scale
        self._ready = False

    def compose(self) -> ComposeResult:
        """Numbers, reasons, history."""
        with Vertical(classes="th-text"):
            yield Static(classes="th-stats")
            yield Static(classes="th-reasons")
        yield TempHistory(classes="th-history")

    def on_mount(self) -> None:
        """Show the GPU given at construction."""
        if leaving(self):
            return
        self._ready = True
        if self._scale is not None:
            self.query_one(TempHistory).scale = self._scale
        self._draw()

    def show(self, g: GpuThermal, scale: tuple[float, float] | None = None) -> None:
        """Display ``g`` (its history on the panel's shared ``scale``); a no-op when
        nothing changed."""
        history = self.query_one(TempHistory) if self._ready else None
        if history is not None and scale is not None:
            history.scale = scale
        if g == self._gpu and self._ready:
            return
        self._gpu = g
        self._draw()

    def _draw(self) -> None:
        if not self._ready:
            return
        g = self._gpu
        self.query_one(".th-stats", Static).update(gpu_line(g))
        reasons = self.query_one(".th-reasons", Static)
        line = reasons_line(g)
        reasons.display = line is not None
        reasons.update(line or "")
        history = self.query_one(TempHistory)
        history.points = g.temp_points
        history.colour = history_colour(g)
        self.set_class(g.throttled, "-throttled")


class ScaledHistory(Widget):
    """A row's history as blocks on a scale the caller shares between rows, in one theme
    variable's colour (the caller's verdict): unlike Textual's ``Sparkline``, which scales
    each row to its own min and max, so noise on a steady row is drawn as a cliff."""

    points: reactive[tuple[float, ...]] = reactive((), init=False)
    scale: reactive[tuple[float, float]] = reactive((0.0, SCALE_MIN_SPAN), init=False)
    colour: reactive[str] = reactive("$chart-low", init=False)
    """A theme variable, from the core's verdict (``history_colour``)."""

    def render(self) -> Content:
        """Blocks as wide as the widget."""
        return Content.from_markup(f"[{self.colour}]$h[/]", h=history_text(
            self.points, self.scale, self.size.width))


class TempHistory(ScaledHistory):
    """One GPU's temperature history on a scale shared with the other GPUs."""


class ThermalPanel(Vertical):
    """Panel: a title with the throttle summary, then one row per GPU (scrolls if needed)."""

    view: reactive[ThermalView] = reactive(ThermalView, init=False)
    """Replaced as a whole each refresh; the reactive skips equal views."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._ready = False

    def compose(self) -> ComposeResult:
        """Rows are mounted once the GPU count is known."""
        yield Static(classes="th-title")
        with Horizontal(classes="th-head"):
            yield Static(HEADER, classes="th-head-text")
            yield Static(classes="th-head-history")
        yield Static(classes="th-empty")
        yield VerticalScroll(classes="th-rows")

    def on_mount(self) -> None:
        """Show what arrived before mounting."""
        if leaving(self):
            return
        self._ready = True
        self.watch_view(self.view)

    def on_resize(self) -> None:
        """The history sparkline only gets a column when there is width beyond the numbers."""
        self.set_class(self.content_size.width < STATS_WIDTH + 10, "-narrow")

    def watch_view(self, view: ThermalView) -> None:
        """Update rows in place; add or drop rows only when the GPU count changes."""
        if not self._ready:
            return
        self.query_one(".th-title", Static).update(summary(view))
        empty = self.query_one(".th-empty", Static)
        empty.display = not view.gpus
        self.query_one(".th-head").display = bool(view.gpus)
        self.query_one(".th-head-history", Static).update(history_header(view))
        scale = view.temp_scale
        empty.update(Content.from_markup("[$text-dim]no thermal data yet[/]"))
        box = self.query_one(".th-rows", VerticalScroll)
        rows = list(box.query_children(ThermalRow))
        for row in rows[len(view.gpus):]:
            row.remove()
        for row, g in zip(rows, view.gpus, strict=False):
            row.show(g, scale)
        if len(view.gpus) > len(rows):
            box.mount_all(ThermalRow(g, scale) for g in view.gpus[len(rows):])
