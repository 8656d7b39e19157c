"""Host panel 4, iostat: per block device ``iostat -x`` figures beside the GPUs' utilisation.

A GPU that waits on its input pipeline shows a saw-tooth; the disk feeding it shows
%util pinned near 100.  Both histories are drawn as strips of the same width, starting
at the same column and covering the same window, so the two are read together.
Saturation, as the core judges it (``probes.analysis.judge.disk_saturated`` against the
operator's ``disk_saturated_util_pct``), is marked with a glyph and a word, never by colour
alone.  The panel renders only what it is given (``IostatView``) and does no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

MISSING = "–"
TITLE = "iostat"
RAMP = "▁▂▃▄▅▆▇█"
"""Strip levels for 0–100 %; the lowest is ``▁``, so an idle stretch is still visible."""
GAP = "·"
"""A point the host did not report (NaN)."""
BAR_WIDTH = 10
SATURATED = "▲ saturated"
STRIP_MIN = 24
"""Columns are dropped until the history strips get at least this many cells."""


@dataclass(frozen=True)
class DiskRow:
    """One block device over the last interval, plus its %util over the panel's window."""

    name: str
    r_s: float | None = None
    w_s: float | None = None
    rkb_s: float | None = None
    wkb_s: float | None = None
    r_await: float | None = None
    """Milliseconds per read, queueing included."""
    w_await: float | None = None
    aqu_sz: float | None = None
    util: float | None = None
    """%util: share of the interval the device was busy."""
    util_points: tuple[float, ...] = ()
    """%util over ``IostatView.window``, oldest first; NaN where a tick is missing."""
    saturated: bool = False
    """The core's verdict on ``util``: busy nearly all the time."""
    util_saturated: tuple[bool, ...] = ()
    """The core's verdict on each of ``util_points``."""


@dataclass(frozen=True)
class IostatView:
    """What the panel draws; every series covers the same ``window``."""

    disks: tuple[DiskRow, ...] = ()
    gpu_util: tuple[tuple[int, tuple[float, ...]], ...] = ()
    """Per GPU: its index and utilisation % over the window, oldest first."""
    window: str = ""
    """How long the series cover, as the operator reads it (``10 min``)."""


@dataclass(frozen=True)
class _Col:
    key: str
    header: str
    width: int
    drop: int | None = None
    """Lower is dropped first when the panel is narrow; None always stays."""


COLUMNS = (
    _Col("name", "Device", 10),
    _Col("r_s", "r/s", 8),
    _Col("w_s", "w/s", 8, 5),
    _Col("rkb_s", "rkB/s", 9, 1),
    _Col("wkb_s", "wkB/s", 9, 0),
    _Col("r_await", "r_await", 7, 6),
    _Col("w_await", "w_await", 7, 2),
    _Col("aqu_sz", "aqu-sz", 6, 4),
    _Col("bar", "busy", BAR_WIDTH, 3),
    _Col("util", "%util", 5),
    _Col("mark", "", cell_len(SATURATED)),
)
NUMBER_KEYS = ("r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz")


def number(value: float | None) -> str:
    """``1,234`` from 100 up, ``12.5`` below; ``–`` when not reported."""
    if value is None or math.isnan(value):
        return MISSING
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def resample(points: Sequence[float], width: int) -> list[float]:
    """``points`` in at most ``width`` cells: bucket means, NaN-aware (all-NaN stays NaN)."""
    if width <= 0:
        return []
    if len(points) <= width:
        return list(points)
    out = []
    for i in range(width):
        lo, hi = i * len(points) // width, (i + 1) * len(points) // width
        bucket = [p for p in points[lo:max(hi, lo + 1)] if not math.isnan(p)]
        out.append(sum(bucket) / len(bucket) if bucket else math.nan)
    return out


def resample_marks(points: Sequence[float], marks: Sequence[bool], width: int) -> list[bool]:
    """``marks`` (one per point) in the cells ``resample`` makes of ``points``: a cell is
    marked when at least half of its readings are (gaps do not count)."""
    n = len(points)
    if width <= 0:
        return []
    flags = [bool(m) and not math.isnan(p)
             for p, m in zip(points, [*marks, *[False] * (n - len(marks))][:n], strict=True)]
    if n <= width:
        return flags
    out = []
    for i in range(width):
        lo, hi = i * n // width, max((i + 1) * n // width, i * n // width + 1)
        seen = [f for p, f in zip(points[lo:hi], flags[lo:hi], strict=True)
                if not math.isnan(p)]
        out.append(bool(seen) and 2 * sum(seen) >= len(seen))
    return out


def strip(points: Sequence[float], width: int,
          saturated: Sequence[bool] | None = None) -> Content:
    """A right-aligned history strip (newest at the right edge) ``width`` cells wide.

    On a disk strip (``saturated``: the core's verdict per point) the saturated stretches
    take the critical colour; their full-height glyph already says the same without it.
    """
    cells = resample(points, width)
    marks = resample_marks(points, saturated or (), width)
    parts: list[tuple[str, str] | str] = [" " * (width - len(cells))]
    for p, marked in zip(cells, marks, strict=True):
        if math.isnan(p):
            parts.append((GAP, "$text-dim"))
            continue
        p = max(-1.0, min(1000.0, p))  # an infinity would raise in int()
        glyph = RAMP[max(0, min(len(RAMP) - 1, int(p / 100 * len(RAMP))))]
        parts.append((glyph, "$sev-critical" if marked else "$chart-high"))
    return Content.assemble(*parts).simplify()


def util_bar(util: float | None, saturated: bool = False) -> Content:
    """``██████░░░░``; the filled part takes the critical colour when the core judged the
    device ``saturated``."""
    if util is None or math.isnan(util):
        return Content.styled("░" * BAR_WIDTH, "$text-dim")
    util = max(-1.0, min(1000.0, util))  # an infinity would raise in round()
    filled = max(0, min(BAR_WIDTH, round(util / 100 * BAR_WIDTH)))
    return Content.assemble(
        ("█" * filled, "$sev-critical" if saturated else "$chart-high"),
        ("░" * (BAR_WIDTH - filled), "$text-dim"))


def _fit(text: str, width: int, right: bool = False) -> str:
    if cell_len(text) > width:
        text = text[: max(width - 1, 0)] + "…" if width > 0 else ""
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


def _pct(value: float | None) -> str:
    return MISSING if value is None or math.isnan(value) else f"{value:.0f} %"


def layout(width: int) -> tuple[list[_Col], int]:
    """Columns that fit ``width`` (optional ones dropped in order) and the strip's width."""
    cols = list(COLUMNS)

    def used(cs: list[_Col]) -> int:
        return sum(c.width + 1 for c in cs)

    for col in sorted((c for c in COLUMNS if c.drop is not None), key=lambda c: c.drop or 0):
        if used(cols) + STRIP_MIN <= width:
            break
        cols.remove(col)
    return cols, max(width - used(cols), STRIP_MIN)


class IostatPanel(Widget):
    """The iostat panel of the host screen; set ``iostat`` every refresh."""

    DEFAULT_CSS = """
    IostatPanel { height: auto; }
    """

    iostat: reactive[IostatView | None] = reactive(None, layout=True)
    """The host's disks and GPU utilisation; None until the host reported any."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._cache: tuple[IostatView | None, int, Content] | None = None

    def render(self) -> Content:
        """The panel for the current width; reused while the view and width are unchanged."""
        width = self.content_size.width or max(self.app.size.width - 2, 1)
        cached = self._cache
        if cached is not None and cached[1] == width and cached[0] == self.iostat:
            return cached[2]
        content = render_iostat(self.iostat, width)
        self._cache = (self.iostat, width, content)
        return content


def render_iostat(view: IostatView | None, width: int) -> Content:
    """The whole panel: title, header, one line per disk, one per GPU, the time axis."""
    title = TITLE + (f" · last {view.window}" if view is not None and view.window else "")
    lines = [Content.styled(title, "bold $primary")]
    if view is None or (not view.disks and not view.gpu_util):
        lines.append(Content.styled("no disk statistics reported", "$text-dim"))
        return Content("\n").join(lines)
    cols, strip_w = layout(width)
    head = [(_fit(c.header, c.width, right=c.key != "name") + " ", "bold $text-dim")
            for c in cols]
    head.append((_fit("%util · GPU util, over " + (view.window or "the window"), strip_w),
                 "bold $text-dim"))
    lines.append(_assemble(head))
    if not view.disks:
        lines.append(Content.styled("no block devices reported", "$text-dim"))
    for disk in view.disks:
        lines.append(_disk_line(disk, cols, strip_w))
    for index, points in view.gpu_util:
        lines.append(_gpu_line(index, points, cols, strip_w))
    lead = sum(c.width + 1 for c in cols)
    left = f"−{view.window}" if view.window else "older"
    axis = _fit(left, max(strip_w - 3, 0)) + "now"
    lines.append(Content.styled(" " * lead + axis, "$text-dim"))
    return Content("\n").join(lines)


def _assemble(parts: Sequence[tuple[str, str] | Content]) -> Content:
    return Content.assemble(*(p[0] if isinstance(p, tuple) and not p[1] else p for p in parts))


def _disk_line(disk: DiskRow, cols: list[_Col], strip_w: int) -> Content:
    parts: list[tuple[str, str] | Content] = []
    hot = disk.saturated
    for col in cols:
        if col.key == "name":
            parts.append((_fit(disk.name, col.width) + " ", "bold"))
        elif col.key in NUMBER_KEYS:
            text = number(getattr(disk, col.key))
            parts.append((_fit(text, col.width, right=True) + " ",
                          "$text-dim" if text == MISSING else ""))
        elif col.key == "bar":
            parts += [util_bar(disk.util, hot), (" ", "")]
        elif col.key == "util":
            text = _pct(disk.util)
            parts.append((_fit(text, col.width, right=True) + " ",
                          "bold $sev-critical" if hot else "$text-dim" if text == MISSING
                          else ""))
        else:
            parts.append((_fit(SATURATED if hot else "", col.width) + " ",
                          "bold $sev-critical" if hot else ""))
    parts.append(strip(disk.util_points, strip_w, disk.util_saturated))
    return _assemble(parts)


def _gpu_line(index: int, points: tuple[float, ...], cols: list[_Col],
              strip_w: int) -> Content:
    now = next((p for p in reversed(points) if not math.isnan(p)), None)
    parts: list[tuple[str, str] | Content] = []
    for col in cols:
        if col.key == "name":
            parts.append((_fit(f"GPU{index}", col.width) + " ", "bold $accent"))
        elif col.key == "util":
            parts.append((_fit(_pct(now), col.width, right=True) + " ",
                          "$text-dim" if now is None else ""))
        else:
            parts.append((" " * (col.width + 1), ""))
    parts.append(strip(points, strip_w))
    return _assemble(parts)
