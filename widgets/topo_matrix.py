"""Host panel 3, PCIe topology: the ``nvidia-smi topo -m`` matrix, GPU–NIC paths, PCIe links.

Every matrix cell is coloured by its link class (nearest to farthest: X, NV#, PIX, PXB,
PHB, NODE, SYS) and always keeps its text, so the class is never told by colour alone.
The panel fits itself to its width: full device names first, then abbreviated headers
(``G3``, ``N7``), then three-letter cells; in the per-GPU table the affinity columns go
first.  It renders only what it is given (``TopoView``) and does no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from probes.rules.parsers.topo import TopoMatrix
from probes.triage import Severity

MISSING = "–"
TITLE = "PCIe topology"

LINK_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
"""Link classes from nearest to farthest; ``NV`` stands for every ``NV#`` bond."""
LINK_STYLE = {
    "X": "$text-dim",
    "NV": "bold $status-streaming",
    "PIX": "$sev-info",
    "PXB": "$primary",
    "PHB": "$sev-warning",
    "NODE": "bold $sev-warning",
    "SYS": "bold $sev-critical",
}
UNKNOWN_STYLE = "$foreground"
"""Cells outside the classes (``N/A``, ``-p2p`` words): shown as printed, uncoloured."""
LEGEND_LONG = (
    ("X", "X", "self"), ("NV#", "NV", "# bonded NVLinks"), ("PIX", "PIX", "≤1 PCIe bridge"),
    ("PXB", "PXB", "several PCIe bridges"), ("PHB", "PHB", "via a CPU host bridge"),
    ("NODE", "NODE", "across host bridges, one NUMA node"),
    ("SYS", "SYS", "across sockets (SMP link)"),
)
"""Shown code, its class, what it means."""
LEGEND_SHORT = (
    ("X", "X", "self"), ("NV#", "NV", "NVLink"), ("PIX", "PIX", "1 bridge"),
    ("PXB", "PXB", "bridges"), ("PHB", "PHB", "host bridge"), ("NODE", "NODE", "same NUMA"),
    ("SYS", "SYS", "cross-socket"),
)
LEGEND_LONG_FROM = 120
"""Panel width from which the legend spells the classes out."""
LEGEND_SPLIT = 4
LEGEND_LEAD = ("from nearest: ", "to farthest:  ")
"""The legend is always two lines (so the panel's height does not depend on its width)."""
DOWN = "▼"
SHORTFALL_WORD = {Severity.WARNING: "lanes lost", Severity.INFO: "gen down",
                  Severity.CRITICAL: "lanes lost"}

_NV = re.compile(r"^NV(\d+)$")
_DEVICE_NO = re.compile(r"^(GPU|NIC)(\d+)$")
_TRAILING_NO = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class GpuLink:
    """One GPU's PCIe link as trained now against what it can do; None where unknown."""

    index: int
    gen: int | None = None
    gen_max: int | None = None
    width: int | None = None
    width_max: int | None = None
    bus_id: str | None = None
    bridge_note: str | None = None
    """A bridge above the GPU that trained narrower, e.g. ``switch 0000:16:00.0 x8/16``."""
    gen_low: bool = False
    """Trained below its generation (``probes.analysis.judge.link_verdict``)."""
    width_low: bool = False
    """Fewer lanes than it can use."""
    shortfall: Severity | None = None
    """The core's verdict: lanes lost (warning), a lower generation under load (info)."""


@dataclass(frozen=True)
class TopoView:
    """What the panel draws: the matrix as ``probes.rules.parsers.topo.TopoMatrix`` holds it.

    ``links[row][col]`` is the printed cell (``X``, ``NV18``, ``PIX`` …); rows and columns
    are named ``GPU0`` … and ``NIC0`` … (or ``mlx5_0`` in old output).  ``links_state`` is
    matched to the matrix by ``GPU<index>``.
    """

    gpus: tuple[str, ...] = ()
    nics: tuple[str, ...] = ()
    links: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    cpu_affinity: Mapping[str, str] | None = None
    numa_affinity: Mapping[str, str] | None = None
    links_state: tuple[GpuLink, ...] = ()
    nic_names: Mapping[str, str] = field(default_factory=dict)
    """``NIC Legend`` entries (``NIC0`` → ``mlx5_0``), shown next to the nearest NIC."""

    @classmethod
    def from_matrix(cls, matrix: TopoMatrix, links_state: tuple[GpuLink, ...] = ()) -> TopoView:
        """The view of a parsed ``topo -m`` plus the GPUs' current PCIe links."""
        return cls(matrix.gpus, matrix.nics, matrix.links, matrix.cpu_affinity,
                   matrix.numa_affinity, links_state, matrix.nic_legend)


def link_class(cell: str | None) -> str | None:
    """The class of a matrix cell (``NV12`` → ``NV``, old ``SOC`` → ``SYS``); None if none."""
    if cell is None:
        return None
    if _NV.match(cell):
        return "NV"
    if cell == "SOC":
        return "SYS"
    return cell if cell in LINK_ORDER else None


def link_rank(cell: str | None) -> int:
    """Distance of a cell's class: 0 for ``X`` up to 6 for ``SYS``; unknown sorts last."""
    cls = link_class(cell)
    return LINK_ORDER.index(cls) if cls is not None else len(LINK_ORDER)


def link_style(cell: str | None) -> str:
    """The theme style of a cell's class."""
    cls = link_class(cell)
    return LINK_STYLE[cls] if cls is not None else UNKNOWN_STYLE


def abbreviate(name: str) -> str:
    """``GPU3`` → ``G3``, ``NIC12`` → ``N12``, ``mlx5_1`` → ``m1``: headers for narrow panels."""
    m = _DEVICE_NO.match(name)
    if m:
        return m.group(1)[0] + m.group(2)
    if len(name) <= 3:
        return name
    tail = _TRAILING_NO.search(name)
    return name[0] + tail.group(1) if tail else name[:3]


def short_cell(cell: str, nv_max: int) -> str:
    """A cell in at most three characters, for the tightest layout.

    ``NV#`` keeps its count while it is one digit; bigger bonds read ``NV`` and the ones
    below the widest bond on the matrix ``NV↓`` (the legend names the full count), so a
    lost NVLink still shows.  ``NODE`` reads ``NOD``.
    """
    m = _NV.match(cell)
    if m:
        n = int(m.group(1))
        if n < 10:
            return cell
        return "NV" if n >= nv_max else "NV↓"
    if cell == "NODE":
        return "NOD"
    return cell[:3]


def nearest_nics(view: TopoView, gpu: str) -> tuple[list[str], str | None]:
    """The NICs closest to ``gpu`` (ties kept, in matrix order) and that path's cell."""
    row = view.links.get(gpu) or {}
    paths = [(nic, row[nic]) for nic in view.nics if nic in row]
    if not paths:
        return [], None
    best = min(link_rank(cell) for _, cell in paths)
    if best >= len(LINK_ORDER):
        return [], None
    tied = [(nic, cell) for nic, cell in paths if link_rank(cell) == best]
    return [nic for nic, _ in tied], tied[0][1]


def pcie_text(link: GpuLink | None) -> tuple[str, str, Severity | None]:
    """``Gen5 x16``, ``Gen5 ▼ x8/16`` or ``▼ Gen1/5 x16``, the word for it, and how bad.

    The core judges it (``shortfall``): a lost lane is a ``warning`` (``lanes lost``); a
    lower generation is ``info`` (``gen down``) only under load, because idle GPUs train
    down to save power (then the ``▼`` stays, with no word).
    """
    if link is None or (link.gen is None and link.width is None):
        return MISSING, "", None
    gen = "Gen–" if link.gen is None else (
        f"{DOWN} Gen{link.gen}/{link.gen_max}" if link.gen_low else f"Gen{link.gen}")
    width = "x–" if link.width is None else (
        f"{DOWN} x{link.width}/{link.width_max}" if link.width_low else f"x{link.width}")
    severity = link.shortfall
    word = "" if severity is None else SHORTFALL_WORD[severity]
    return f"{gen} {width}", word, severity


def _fit(text: str, width: int, right: bool = False) -> str:
    if cell_len(text) > width:
        text = text[: max(width - 1, 0)] + "…" if width > 0 else ""
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


def _line(parts: Sequence[tuple[str, str]]) -> Content:
    return Content.assemble(*((text, style) if style else text for text, style in parts))


@dataclass(frozen=True)
class _Layout:
    header: str
    """``full`` (GPU0), ``short`` (G0) or ``tight`` (G0 and three-letter cells)."""
    label_w: int
    col_w: int


class TopoPanel(Widget):
    """The topology panel of the host screen; set ``topo`` every refresh."""

    DEFAULT_CSS = """
    TopoPanel { height: auto; }
    """

    topo: reactive[TopoView | None] = reactive(None, layout=True)
    """The host's topology; None until the host reported one (drawn as the empty state)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._cache: tuple[TopoView | None, int, Content] | None = None

    def render(self) -> Content:
        """The panel for the current width; reused while the view and width are unchanged."""
        width = self.content_size.width or max(self.app.size.width - 2, 1)
        cached = self._cache
        if cached is not None and cached[1] == width and cached[0] == self.topo:
            return cached[2]
        content = render_topo(self.topo, width)
        self._cache = (self.topo, width, content)
        return content


def render_topo(view: TopoView | None, width: int) -> Content:
    """The whole panel as lines no wider than ``width`` where the layout allows it."""
    title = Content.styled(TITLE, "bold $primary")
    if view is None or (not view.gpus and not view.links_state):
        return Content("\n").join([title, Content.styled("no topology reported", "$text-dim")])
    lines = [title]
    if view.gpus:
        lines += _matrix(view, width)
    else:
        lines.append(Content.styled("no topo -m matrix (nvidia-smi topo unavailable)",
                                    "$text-dim"))
    lines += _gpu_table(view, width)
    return Content("\n").join(lines)


def _rows(view: TopoView) -> list[str]:
    extra = [r for r in view.links if r not in view.gpus and r not in view.nics]
    return [*view.gpus, *view.nics, *extra]


def _layout(view: TopoView, width: int) -> _Layout:
    devices = (*view.gpus, *view.nics)
    cells = [c for row in view.links.values() for c in row.values()]
    cell_w = max((cell_len(c) for c in cells), default=1)
    rows = _rows(view)
    for header in ("full", "short", "tight"):
        names = devices if header == "full" else tuple(abbreviate(d) for d in devices)
        labels = rows if header == "full" else [abbreviate(r) for r in rows]
        col_w = max(max(cell_len(n) for n in names), cell_w if header != "tight" else 3)
        label_w = max((cell_len(n) for n in labels), default=3)
        if label_w + len(devices) * (col_w + 1) <= width or header == "tight":
            return _Layout(header, label_w, col_w)
    raise AssertionError("unreachable")


def _matrix(view: TopoView, width: int) -> list[Content]:
    layout = _layout(view, width)
    devices = (*view.gpus, *view.nics)
    short = layout.header != "full"
    nv_counts = [int(m.group(1)) for row in view.links.values() for c in row.values()
                 if (m := _NV.match(c))]
    nv_max = max(nv_counts, default=0)
    head: list[tuple[str, str]] = [(" " * layout.label_w, "")]
    for d in devices:
        head.append((" " + _fit(abbreviate(d) if short else d, layout.col_w, right=True),
                     "bold"))
    out = [_line(head)]
    for row in _rows(view):
        parts: list[tuple[str, str]] = [
            (_fit(abbreviate(row) if short else row, layout.label_w), "bold")]
        cells = view.links.get(row) or {}
        for d in devices:
            cell = cells.get(d)
            if cell is None:
                parts.append((" " + _fit(MISSING, layout.col_w, right=True), "$text-dim"))
                continue
            text = short_cell(cell, nv_max) if layout.header == "tight" else cell
            parts.append((" " + _fit(text, layout.col_w, right=True), link_style(cell)))
        out.append(_line(parts))
    out += _legend(width, layout.header == "tight", nv_max, len(set(nv_counts)) > 1)
    return out


def _legend(width: int, tight: bool, nv_max: int, nv_mixed: bool) -> list[Content]:
    entries = LEGEND_LONG if width >= LEGEND_LONG_FROM else LEGEND_SHORT
    lines = []
    for i, chunk in enumerate((entries[:LEGEND_SPLIT], entries[LEGEND_SPLIT:])):
        parts: list[tuple[str, str]] = [(LEGEND_LEAD[i], "$text-dim")]
        for code, cls, desc in chunk:
            if tight and cls == "NODE":
                code = "NOD"
            elif tight and cls == "NV" and nv_max >= 10:
                code, desc = "NV", f"{nv_max} NVLinks" + (" (NV↓ fewer)" if nv_mixed else "")
            parts += [(code, LINK_STYLE[cls]), (f" {desc}  ", "$text-dim")]
        lines.append(_line(parts).rstrip())
    return lines


_GPU_COLS: tuple[tuple[str, str, int, int | None], ...] = (
    # key, header, width, drop order (lower is dropped first; None stays).  CPU affinity is
    # the widest and the first to go; NUMA (narrow, and what pinning needs) outlives bus ids.
    ("gpu", "GPU", 5, None),
    ("cpu", "CPU affinity", 14, 0),
    ("numa", "NUMA", 4, 2),
    ("nic", "nearest NIC", 16, None),
    ("path", "path", 4, None),
    ("pcie", "PCIe now/max", 16, None),
    ("word", "", 10, 3),
    ("bus", "bus", 12, 1),
    ("note", "bridge", 0, None),
)


def _gpu_names(view: TopoView) -> list[str]:
    names = list(view.gpus)
    names += [f"GPU{g.index}" for g in sorted(view.links_state, key=lambda g: g.index)
              if f"GPU{g.index}" not in names]
    return names


def _gpu_table(view: TopoView, width: int) -> list[Content]:
    by_name = {f"GPU{g.index}": g for g in view.links_state}
    names = _gpu_names(view)
    has = {"cpu": view.cpu_affinity is not None, "numa": view.numa_affinity is not None,
           "bus": any(g.bus_id for g in view.links_state),
           "note": any(g.bridge_note for g in view.links_state)}
    widths = {key: w for key, _, w, _ in _GPU_COLS}
    if view.cpu_affinity:
        widths["cpu"] = max(widths["cpu"], *(cell_len(v) for v in view.cpu_affinity.values()))
    cols = [c for c in _GPU_COLS if has.get(c[0], True)]
    by_drop = sorted((c for c in cols if c[3] is not None), key=lambda c: c[3] or 0)
    note_min = 10 if has["note"] else 0

    def total(cs: list[tuple[str, str, int, int | None]]) -> int:
        return sum(widths[c[0]] + 1 for c in cs if c[0] != "note") + note_min

    for col in by_drop:
        if total(cols) <= width:
            break
        cols.remove(col)
    rows = [_line([(_fit(h, widths[k]) + " " if k != "note" else h, "bold $text-dim")
                   for k, h, _, _ in cols])]
    for name in names:
        rows.append(_line([part for k, _, _, _ in cols
                           for part in _gpu_cell(view, name, by_name.get(name), k, widths[k])]))
    return rows


def _gpu_cell(view: TopoView, name: str, link: GpuLink | None, key: str,
              width: int) -> list[tuple[str, str]]:
    def cell(text: str | None, style: str = "") -> list[tuple[str, str]]:
        shown = MISSING if text is None else text
        return [(_fit(shown, width) + " " if key != "note" else shown,
                 "$text-dim" if text is None else style)]

    if key == "gpu":
        return cell(name, "bold")
    if key == "cpu":
        return cell((view.cpu_affinity or {}).get(name))
    if key == "numa":
        return cell((view.numa_affinity or {}).get(name))
    if key in ("nic", "path"):
        nics, path = nearest_nics(view, name)
        if not nics:
            return cell(None)
        if key == "path":
            return cell(path, link_style(path))
        label = nics[0] + (f" {view.nic_names[nics[0]]}" if nics[0] in view.nic_names else "")
        more = f" +{len(nics) - 1}" if len(nics) > 1 else ""
        return cell(_fit(label, width - cell_len(more)).rstrip() + more)
    text, word, severity = pcie_text(link)
    style = ("bold $link-degraded" if severity is Severity.WARNING
             else "$sev-info" if severity is Severity.INFO else "")
    if key == "pcie":
        return cell(None if text == MISSING else text, style)
    if key == "word":
        return cell(word, style)
    if key == "bus":
        return cell(link.bus_id if link else None, "$text-dim")
    note = link.bridge_note if link else None
    return [(f"{DOWN} {note}", "$link-degraded")] if note else [("", "")]
