"""Host panel 7, Network: the host's IB/RoCE ports and its GPUs' NVLinks.

One line per port: its state, rate, link layer, traffic, the errors it counted over the
core's window, and the GPU it sits beside (a port down starves that GPU's rail); then the
NVLinks per GPU.  The verdict of each line (``down``, ``slow``, ``errors``) is the core's
(``probes.analysis.fabric``), marked with a glyph and a word, never by colour alone.  The
panel renders only what it is given (``NetworkView``) and does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

MISSING = "–"
TITLE = "network"
_MARK = {"down": ("✗ DOWN", "bold $sev-critical"), "slow": ("▼ slow", "bold $sev-warning"),
         "errors": ("▲ errors", "bold $sev-warning"), "ok": ("✓ ok", "$text-dim")}


@dataclass(frozen=True)
class PortRow:
    """One IB/RoCE port as the panel shows it."""

    name: str
    """``mlx5_3/1``."""
    state: str
    """``Active``, ``DOWN Polling`` …"""
    rate_gbs: float | None = None
    layer: str | None = None
    """``IB`` or ``RoCE``."""
    rx_bytes_s: float | None = None
    tx_bytes_s: float | None = None
    errors: str = ""
    """The window's increases, the largest first (``+42 symbol_error, 1 flap``)."""
    beside: str = ""
    """``GPU3`` (same PCIe switch) or ``GPU0-3 (NUMA 0)``."""
    verdict: str = "ok"
    """The core's: ``down``, ``slow``, ``errors`` or ``ok``."""
    unknown: bool = False
    """A counter was reset or saturated: its rate is not shown."""


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's NVLinks: how many are up, their speed, error totals, the core's verdict."""

    gpu: int
    up: int
    total: int
    speed_gbs: float | None = None
    errors: str = ""
    verdict: str = "ok"


@dataclass(frozen=True)
class NetworkView:
    """What the panel draws."""

    ports: tuple[PortRow, ...] = ()
    nvlinks: tuple[GpuLinks, ...] = ()
    window: str = ""
    """The error window, as the operator reads it (``10 min``)."""
    note: str = ""
    """Why there is nothing to show, or how old the numbers are."""


_COLS = (("name", "Port", 10), ("state", "State", 14), ("mark", "", 9),
         ("rate", "Rate", 9), ("layer", "Layer", 5), ("rx", "RX", 9), ("tx", "TX", 9),
         ("beside", "Beside", 11), ("errors", "Errors", 0))
_DROP = ("layer", "tx", "rx", "rate")
"""Dropped in this order when the panel is narrow; the errors column takes what is left."""


def rate(bytes_s: float | None) -> str:
    """``2.6 GB/s``, ``812 MB/s``; ``–`` when unknown."""
    if bytes_s is None:
        return MISSING
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_s >= size:
            return f"{bytes_s / size:.1f} {unit}"
    return f"{bytes_s:.0f} B/s"


def _fit(text: str, width: int) -> str:
    if cell_len(text) > width:
        text = text[: max(width - 1, 0)] + "…"
    return text + " " * (width - cell_len(text))


def _cells(p: PortRow) -> dict[str, tuple[str, str]]:
    mark, style = _MARK.get(p.verdict, _MARK["ok"])
    return {"name": (p.name, "bold"), "state": (p.state, style if p.verdict == "down" else ""),
            "mark": (mark, style), "rate": (f"{p.rate_gbs:g} Gb/s" if p.rate_gbs else MISSING,
                                            style if p.verdict == "slow" else ""),
            "layer": (p.layer or MISSING, "$text-dim"),
            "rx": ("reset?" if p.unknown and p.rx_bytes_s is None else rate(p.rx_bytes_s), ""),
            "tx": (rate(p.tx_bytes_s), ""), "beside": (p.beside or MISSING, "$accent"),
            "errors": (p.errors or MISSING, style if p.verdict == "errors" else "$text-dim")}


def render_network(view: NetworkView | None, width: int) -> Content:
    """The whole panel: title, the ports' table, then the NVLinks per GPU."""
    title = TITLE + (f" · errors over {view.window}" if view is not None and view.window
                     else "")
    lines = [Content.styled(title, "bold $primary")]
    if view is None or (not view.ports and not view.nvlinks):
        note = view.note if view is not None and view.note else \
            "no InfiniBand/RoCE ports or NVLinks reported"
        lines.append(Content.styled(note, "$text-dim"))
        return Content("\n").join(lines)
    cols = list(_COLS)
    for key in _DROP:
        if sum(c[2] + 1 for c in cols) + 12 <= width:
            break
        cols = [c for c in cols if c[0] != key]
    rest = max(width - sum(c[2] + 1 for c in cols), 8)
    cols = [(k, h, rest - 1 if k == "errors" else w) for k, h, w in cols]
    if view.ports:
        lines.append(Content.assemble(*((_fit(h, w) + " ", "bold $text-dim")
                                        for _, h, w in cols)))
        for p in view.ports:
            cells = _cells(p)
            lines.append(Content.assemble(*((_fit(cells[k][0], w) + " ", cells[k][1])
                                            for k, _, w in cols)))
    if view.nvlinks:
        lines.append(Content.styled("NVLink", "bold $text-dim"))
        for g in view.nvlinks:
            mark, style = _MARK.get(g.verdict, _MARK["ok"])
            speed = f" at {g.speed_gbs:g} GB/s" if g.speed_gbs else ""
            lines.append(Content.assemble(
                (_fit(f"GPU{g.gpu}", 10) + " ", "bold $accent"),
                (_fit(f"{g.up}/{g.total} up{speed}", 24) + " ", style if g.verdict in
                 ("down", "slow") else ""), (_fit(mark, 9) + " ", style),
                (_fit(g.errors, max(width - 46, 8)),
                 style if g.verdict == "errors" else "$text-dim")))
    if view.note:
        lines.append(Content.styled(view.note, "$text-dim"))
    return Content("\n").join(lines)


class NetworkPanel(Widget):
    """The network panel of the host screen; set ``network`` every refresh."""

    DEFAULT_CSS = """
    NetworkPanel { height: auto; }
    """

    network: reactive[NetworkView | None] = reactive(None, layout=True)
    """The host's ports and NVLinks with the core's verdicts; None before any were seen."""

    def render(self) -> Content:
        return render_network(self.network,
                              self.content_size.width or max(self.app.size.width - 2, 1))
