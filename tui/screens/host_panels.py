"""The host screen's toggled panels, as one registry: a new panel is one entry here.

Each entry names the panel (its number key is its place in ``HOST_PANELS``), the word the key
hint shows, the widget, and how the widget is fed from the host's state (a view builder in
``tui/views/host_views.py``).  ``tui/screens/host.py`` reads this tuple for its bindings, its
layout, its key hint and what it redraws each tick.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from textual.content import Content
from textual.widget import Widget

from probes.fleet_state import HostState
from tui.views.host_views import (
    host_view,
    iostat_view,
    memory_growth_view,
    network_view,
    process_rows,
    thermal_view,
    topo_view,
)
from widgets.host_stats import HostStatsPanel
from widgets.iostat_panel import IostatPanel
from widgets.memory_growth import MemoryGrowth
from widgets.network_panel import NetworkPanel
from widgets.process_table import ProcessPanel
from widgets.thermal_panel import ThermalPanel
from widgets.topo_matrix import TopoPanel

W = TypeVar("W", bound=Widget)


@dataclass(frozen=True)
class PanelContext:
    """What a panel may need besides the host's state: the screen's choices."""

    window_s: float
    """The chart window (``:window``)."""
    selected_gpu: int | None
    """The GPU picked in the memory panel, if any."""


@dataclass(frozen=True)
class HostPanel(Generic[W]):
    """One toggled panel of the host screen."""

    id: str
    """Its name in bindings and in the widget id ``panel-<id>``."""
    hint: str
    """The word the key hint shows after its number."""
    widget: type[W]
    show: Callable[[W, HostState, PanelContext], None]
    """Builds the panel's view from the host's state and hands it to the widget."""
    at_start: bool = False
    """Shown when the screen opens."""

    @property
    def widget_id(self) -> str:
        """The widget's DOM id (styled in ``themes/rigwatch.tcss``)."""
        return f"panel-{self.id}"


def _memory(w: MemoryGrowth, state: HostState, ctx: PanelContext) -> None:
    w.view = memory_growth_view(state, ctx.window_s, ctx.selected_gpu)


def _thermal(w: ThermalPanel, state: HostState, ctx: PanelContext) -> None:
    w.view = thermal_view(state)


def _topology(w: TopoPanel, state: HostState, ctx: PanelContext) -> None:
    w.topo = topo_view(state)


def _iostat(w: IostatPanel, state: HostState, ctx: PanelContext) -> None:
    w.iostat = iostat_view(state)


def _processes(w: ProcessPanel, state: HostState, ctx: PanelContext) -> None:
    w.processes = process_rows(state)


def _host(w: HostStatsPanel, state: HostState, ctx: PanelContext) -> None:
    w.host = host_view(state)


def _network(w: NetworkPanel, state: HostState, ctx: PanelContext) -> None:
    w.network = network_view(state)


HOST_PANELS: tuple[HostPanel[Any], ...] = (
    HostPanel("memory", "memory", MemoryGrowth, _memory, at_start=True),
    HostPanel("thermal", "thermals", ThermalPanel, _thermal, at_start=True),
    HostPanel("topology", "topo", TopoPanel, _topology),
    HostPanel("iostat", "iostat", IostatPanel, _iostat),
    HostPanel("processes", "procs", ProcessPanel, _processes),
    HostPanel("host", "host", HostStatsPanel, _host),
    HostPanel("network", "net", NetworkPanel, _network),
)
"""In number-key order; the key hints are short so the strip of seven fits 80 columns."""


def key_hint(shown: Collection[str] = ()) -> Content:
    """The panel strip under the GPU table: each panel's number key, the shown ones
    highlighted (and bracketed, for a terminal without colour), the hidden ones dim."""
    out = Content.from_markup("[$text-dim]panels[/] ")
    for i, p in enumerate(HOST_PANELS, 1):
        on = p.id in shown
        out += Content.from_markup(
            "[reverse bold $accent]$label[/] " if on else "[$text-dim]$label[/] ",
            label=f"[{i} {p.hint}]" if on else f" {i} {p.hint} ")
    return out
