"""The fleet wall's pure half: its view model, how a cell looks, the layout and the legend.

No Textual here: the widget (``widgets/fleet_wall.py``) draws what these functions decide,
and the verdicts in a cell come from the core (``probes.analysis.judge``), never from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import NamedTuple

from probes.analysis.judge import GpuVerdict, TempLevel

METRICS = ("mem", "temp", "util", "status")
"""What ``m`` steps through on the wall."""
RAMP = "▁▂▃▄▅▆▇█"
"""Eight levels; the lowest is ``▁``, not a blank, so an idle GPU is still a visible cell."""
SCALE = {"mem": (0.0, 100.0), "temp": (30.0, 90.0), "util": (0.0, 100.0)}
"""Value at the bottom and top of the ramp per metric (°C for temperature, else %)."""
UNIT = {"mem": "%", "temp": "°C", "util": "%"}
STATE_GLYPH = {GpuVerdict.OK: "•", GpuVerdict.HOT: "▲", GpuVerdict.THROTTLED: "↓",
               GpuVerdict.LEAKING: "↑", GpuVerdict.LOST: "✗", GpuVerdict.UNRESPONSIVE: "?",
               GpuVerdict.MISSING: "○", GpuVerdict.SPINNING: "≈"}
"""Per-GPU verdicts; in value metrics only those without a reading override the level."""
NO_READING_STATES = frozenset({GpuVerdict.LOST, GpuVerdict.UNRESPONSIVE, GpuVerdict.MISSING})
TEMP_STYLE = {TempLevel.HOT: "hot", TempLevel.WARM: "warm"}
"""A temperature cell's colour from the core's level (near this board's slowdown)."""
HOST_GLYPH = {"stale": "~", "down": "×", "connecting": "·", "unknown": "~"}
"""Every GPU cell of a host that is not streaming shows its status instead of a value."""
SEV_MARK = {"critical": "!", "warning": "*", "info": "i"}
"""The host's worst finding, in the column before its GPU cells."""
NO_DATA = "-"
DEFAULT_SLOTS = 8
LEGEND_LINES_MAX = 3
"""At most this many legend lines, so an 80x24 terminal keeps most of its rows for hosts."""

class WallGpu(NamedTuple):
    """One GPU's reading for the wall's current metric.

    A named tuple, not a frozen dataclass: the wall's view holds one per GPU (8,192 at a
    thousand 8-GPU hosts, all built afresh when the wall is shown and each tick while it
    is), and a tuple is built, compared and hashed in C."""

    value: float | None
    """Memory used %, temperature °C or utilisation % (whichever the view shows); unused for
    ``status``; None when the GPU reported nothing."""
    state: GpuVerdict = GpuVerdict.OK
    """The GPU's verdict from the core, the same word every screen shows."""
    temp: TempLevel = TempLevel.UNKNOWN
    """Its temperature against its own slowdown threshold."""
    mem_high: bool = False
    """Its memory used at or above the operator's ``mem_high_pct`` (the core's verdict)."""


class WallHost(NamedTuple):
    """A host's cells; ``status`` decides whether its GPU readings are shown at all.

    A named tuple for the reason ``WallGpu`` is (the wall also keys its kept cells by it)."""

    name: str
    tag: str
    status: str
    """``streaming``, ``stale``, ``down`` or ``connecting``."""
    gpus: tuple[WallGpu, ...] = ()
    worst: str | None = None
    """Worst open finding: ``critical``, ``warning``, ``info`` or None."""
    note: str = ""
    """What the status line adds for this host: why it is down and when it is retried, or
    its worst finding led by the verdict."""


@dataclass(frozen=True)
class WallView:
    """Everything the wall draws; replaced as a whole, so an equal one costs no redraw."""

    metric: str = "mem"
    """``mem``, ``temp``, ``util`` or ``status``."""
    hosts: tuple[WallHost, ...] = ()
    temp_margins: tuple[float, float] = field(default=(5.0, 15.0))
    """°C below each board's slowdown threshold at which it reads hot, warm (the legend)."""
    empty: str = "no hosts yet"
    """What the wall says with no hosts to show (a filter that matches none says so)."""
    mem_high_pct: float = 95.0
    """The operator's ``mem_high_pct``, for the legend only (cells carry their verdict)."""


def level(metric: str, value: float) -> int:
    """Ramp index 0–7 of ``value`` on ``metric``'s scale, clamped at both ends."""
    lo, hi = SCALE.get(metric, (0.0, 100.0))
    frac = (value - lo) / (hi - lo)
    if not -1.0 <= frac <= 2.0:  # an infinity (int() would raise), NaN or absurd value
        return 0 if not frac > 0 else len(RAMP) - 1
    return max(0, min(len(RAMP) - 1, int(frac * len(RAMP))))


def _has_value(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def cell(metric: str, host_status: str, gpu: WallGpu) -> tuple[str, str]:
    """Glyph and style name of one GPU cell: the pure core of the wall's look.

    Style names are component classes without the ``fleet-wall--`` prefix, except
    ``level-N``, which is the theme's low→high chart colour blended at step N.
    """
    if host_status in HOST_GLYPH:
        return HOST_GLYPH[host_status], host_status
    if metric == "status":
        return STATE_GLYPH[gpu.state], gpu.state.value
    if gpu.state in NO_READING_STATES:
        return STATE_GLYPH[gpu.state], gpu.state.value
    if gpu.value is None or not _has_value(gpu.value):
        return NO_DATA, "none"
    value = gpu.value
    n = level(metric, value)
    if metric == "temp" and gpu.temp in TEMP_STYLE:
        return RAMP[n], TEMP_STYLE[gpu.temp]
    if metric == "mem" and gpu.mem_high:
        return RAMP[n], "mem-high"
    return RAMP[n], f"level-{n}"


_LEVEL_STYLES = tuple(f"level-{n}" for n in range(len(RAMP)))
_TOP = len(RAMP) - 1
_NO_DATA_CELL = (NO_DATA, "none")


def cells(metric: str, host_status: str, gpus: Sequence[WallGpu]) -> list[tuple[str, str]]:
    """``[cell(metric, host_status, g) for g in gpus]``, the choices that hold for the whole
    host made once rather than once a GPU (the wall looks at every host on its screen each
    tick: issue 38).  ``cell`` stays the definition; a test holds the two equal."""
    if host_status in HOST_GLYPH:
        return [(HOST_GLYPH[host_status], host_status)] * len(gpus)
    if metric == "status":
        return [cell(metric, host_status, g) for g in gpus]
    lo, hi = SCALE.get(metric, (0.0, 100.0))
    span, steps = hi - lo, len(RAMP)
    temp_metric, mem_metric = metric == "temp", metric == "mem"
    ok, hot, warm = GpuVerdict.OK, TempLevel.HOT, TempLevel.WARM
    out: list[tuple[str, str]] = []
    append = out.append
    for value, state, temp, mem_high in gpus:
        if state is not ok and state in NO_READING_STATES:
            append((STATE_GLYPH[state], state.value))
            continue
        if value is None or value != value:  # no reading, or NaN
            append(_NO_DATA_CELL)
            continue
        frac = (value - lo) / span  # as ``level``
        if not -1.0 <= frac <= 2.0:
            n = 0 if not frac > 0 else _TOP
        else:
            n = max(0, min(_TOP, int(frac * steps)))
        if temp_metric and (temp is hot or temp is warm):
            append((RAMP[n], TEMP_STYLE[temp]))
        elif mem_metric and mem_high:
            append((RAMP[n], "mem-high"))
        else:
            append((RAMP[n], _LEVEL_STYLES[n]))
    return out


def mark(host: WallHost) -> tuple[str, str]:
    """The separator cell before a host: its worst finding, or a blank."""
    if host.worst in SEV_MARK:
        return SEV_MARK[host.worst], f"sev-{host.worst}"
    return " ", "blank"


def fmt_value(metric: str, value: float | None) -> str:
    """``87 %`` / ``81 °C``; ``–`` without a reading."""
    if value is None or not _has_value(value):
        return "–"
    return f"{value:.0f} {UNIT.get(metric, '')}".rstrip()


def group_label(tag: str, hosts: Sequence[WallHost]) -> str:
    """``rack-a (64 hosts, 2 down)``: the count of hosts and of those down or stale."""
    n = len(hosts)
    parts = [f"{n} host{'s' if n != 1 else ''}"]
    for status in ("down", "stale", "unknown"):
        k = sum(1 for h in hosts if h.status == status)
        if k:
            parts.append(f"{k} {status}")
    return f"{tag or 'untagged'} ({', '.join(parts)})"


def sort_hosts(hosts: Iterable[WallHost]) -> tuple[WallHost, ...]:
    """By tag then name, the order groups and the cursor walk in."""
    return tuple(sorted(hosts, key=lambda h: (h.tag, h.name)))


@dataclass(frozen=True)
class _Row:
    """A grid row: a group label (``label`` set) or a run of hosts ``start:stop``."""

    start: int
    stop: int
    label: str | None = None


@dataclass(frozen=True)
class WallLayout:
    """Where every host sits for one (view, width): pure, rebuilt only when either changes."""

    hosts: tuple[WallHost, ...]
    slots: int
    """GPU cells per host: the most GPUs any host has (shorter hosts leave blanks)."""
    per_row: int
    rows: tuple[_Row, ...]
    host_row: tuple[int, ...]
    """Grid row of each host, by index into ``hosts``."""

    @property
    def host_width(self) -> int:
        """Cells a host takes: the mark column plus its GPU slots."""
        return self.slots + 1

    def host_at(self, row: int, x: int) -> tuple[int, int | None] | None:
        """Host index and GPU (None: the mark column) at grid ``row``, column ``x``."""
        if not 0 <= row < len(self.rows) or self.rows[row].label is not None or x < 0:
            return None
        r = self.rows[row]
        col, pos = divmod(x, self.host_width)
        i = r.start + col
        if col >= self.per_row or i >= r.stop:
            return None
        n_gpus = len(self.hosts[i].gpus)
        return i, (pos - 1 if 0 < pos <= n_gpus else None)


def build_layout(view: WallView, width: int) -> WallLayout:
    """Group ``view``'s hosts by tag and pack each group into rows that fit ``width``."""
    hosts = sort_hosts(view.hosts)
    slots = max((len(h.gpus) for h in hosts), default=0) or DEFAULT_SLOTS
    per_row = max(1, width // (slots + 1))
    rows: list[_Row] = []
    host_row = [0] * len(hosts)
    start = 0
    for tag, members in groupby(hosts, key=lambda h: h.tag):
        group = list(members)
        rows.append(_Row(start, start, group_label(tag, group)))
        for s in range(start, start + len(group), per_row):
            stop = min(s + per_row, start + len(group))
            for i in range(s, stop):
                host_row[i] = len(rows)
            rows.append(_Row(s, stop))
        start += len(group)
    return WallLayout(hosts, slots, per_row, tuple(rows), tuple(host_row))


def _legend_items(metric: str, margins: tuple[float, float],
                  mem_high_pct: float) -> list[list[tuple[str, str]]]:
    """Legend entries as (text, style name) runs; each entry is kept whole when wrapping."""
    items: list[list[tuple[str, str]]] = []
    if metric in SCALE:
        lo, hi = SCALE[metric]
        name = {"mem": "memory used", "temp": "temperature", "util": "utilisation"}[metric]
        ramp = [(g, f"level-{i}") for i, g in enumerate(RAMP)]
        items.append([(f"{name} ", "legend-title"), *ramp,
                      (f" {lo:.0f}–{hi:.0f} {UNIT[metric]}", "legend")])
        if metric == "temp":
            hot, warm = margins
            items.append([(RAMP[-2], "warm"), (f" warm ≤{warm:.0f}", "legend")])
            items.append([(RAMP[-1], "hot"), (f" hot ≤{hot:.0f} °C below slowdown", "legend")])
        if metric == "mem":
            items.append([(RAMP[-1], "mem-high"), (f" ≥{mem_high_pct:.0f} % high", "legend")])
        items.append([(NO_DATA, "none"), (" no data", "legend")])
        states: Sequence[GpuVerdict] = sorted(NO_READING_STATES, key=lambda v: v.value)
    else:
        items.append([("GPU status", "legend-title")])
        states = tuple(STATE_GLYPH)
    items.extend([(STATE_GLYPH[s], s.value), (f" {s.value}", "legend")] for s in states)
    items.extend([(g, s), (f" {s}", "legend")] for s, g in HOST_GLYPH.items()
                 if s != "unknown")  # drawn as stale; the status line says which
    items.extend([(g, f"sev-{s}"), (f" {s}", "legend")] for s, g in SEV_MARK.items())
    return items


def legend_lines(metric: str, width: int, margins: tuple[float, float] = (5.0, 15.0),
                 mem_high_pct: float = 95.0) -> list[list[tuple[str, str]]]:
    """The legend wrapped to ``width`` by whole entries, at most ``LEGEND_LINES_MAX`` lines."""
    lines: list[list[tuple[str, str]]] = [[]]
    used = 0
    for item in _legend_items(metric, margins, mem_high_pct):
        n = sum(len(t) for t, _ in item)
        if lines[-1] and used + 2 + n > width:
            if len(lines) == LEGEND_LINES_MAX:
                break
            lines.append([])
            used = 0
        if lines[-1]:
            lines[-1].append(("  ", "legend"))
            used += 2
        lines[-1].extend(item)
        used += n
    return lines


def legend_text(metric: str, width: int = 1000,
                margins: tuple[float, float] = (5.0, 15.0), mem_high_pct: float = 95.0) -> str:
    """The legend as plain text (tests, and anything that wants it without styles)."""
    return "\n".join("".join(t for t, _ in line)
                     for line in legend_lines(metric, width, margins, mem_high_pct))


def status_parts(metric: str, host: WallHost | None, gpu: int | None,
                 position: str = "") -> list[tuple[str, str]]:
    """The bottom line: the selected host and the figures that explain its cells."""
    if host is None:
        return [("no host selected", "legend")]
    parts: list[tuple[str, str]] = [("▶ ", "legend"), (host.name, "status-name"),
                                    (f"  {host.tag or 'untagged'}  ", "legend"),
                                    (host.status, host.status if host.status in HOST_GLYPH
                                     else "ok")]
    if host.worst in SEV_MARK:
        parts += [("  ", "legend"), (f"{SEV_MARK[host.worst]} {host.worst}",
                                     f"sev-{host.worst}")]
    live = host.status not in HOST_GLYPH  # a stale or down host's last readings are old news
    if host.note and not live:  # why it is down comes before its old figures
        parts.append((f"  │ {host.note}", host.status))
    if gpu is not None and 0 <= gpu < len(host.gpus) and not live:
        parts.append((f"  │ GPU {gpu}: {HOST_GLYPH[host.status]} {host.status}", "legend"))
    elif gpu is not None and 0 <= gpu < len(host.gpus):
        g = host.gpus[gpu]
        shown = g.state.value if metric == "status" else \
            f"{metric} {fmt_value(metric, g.value)}"
        parts.append((f"  │ GPU {gpu}: {shown}", "legend"))
        if metric != "status" and g.state is not GpuVerdict.OK:
            parts.append((f" ({g.state.value})", g.state.value))
    figures = [f"{len(host.gpus)} GPU{'s' if len(host.gpus) != 1 else ''}"]
    values = [g.value for g in host.gpus
              if g.value is not None and _has_value(g.value) and g.state not in NO_READING_STATES]
    if metric in SCALE and values and live:
        figures.append(f"{metric} max {fmt_value(metric, max(values))}"
                       f" avg {fmt_value(metric, sum(values) / len(values))}")
    counts: dict[str, int] = {}
    for g in host.gpus:
        if g.state is not GpuVerdict.OK:
            counts[g.state.value] = counts.get(g.state.value, 0) + 1
    figures += [f"{n} {s}" for s, n in counts.items()]
    parts.append((f"  │ {', '.join(figures)}", "legend"))
    if position:
        parts.append((f"  │ {position}", "legend"))
    if host.note and live:
        parts.append((f"  │ {host.note}", "legend"))
    return parts


STYLE_NAMES = frozenset({
    "scale-low", "scale-high", "warm", "hot", "mem-high", "none", "blank",
    *(v.value for v in GpuVerdict),
    "stale", "down", "connecting", "unknown", "sev-critical", "sev-warning", "sev-info",
    "label", "label-down", "legend", "legend-title", "status-name", "status-line",
    "cursor", "cursor-host", "empty",
})
"""Every component class (after ``fleet-wall--``), styled in ``themes/fleet_wall.tcss``."""


