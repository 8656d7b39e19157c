"""One host in detail: facts, how old the values are, the findings worst first and every
GPU on top, then the panels, each toggled by its number.

The panels are listed once, in ``host_panels.HOST_PANELS`` (1 memory growth · 2 thermals and
power · 3 PCIe topology · 4 iostat · 5 processes · 6 host · 7 network).  Tab moves between the shown
panels; the chart window follows ``:window``.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Static

from probes.fleet_state import FleetState, HostState
from tui.screens.base import DataScreen
from tui.screens.host_panels import HOST_PANELS, HostPanel, PanelContext, key_hint
from tui.views.host_views import gpu_count, gpu_rows, stale_notice, top_findings
from widgets._alive import leaving
from widgets.event_log import EventLog
from widgets.footer import KeysFooter
from widgets.gpu_table import GoneGpus, GpuTable
from widgets.host_facts import FindingsStrip, HostFactsBar, stale_line
from widgets.memory_growth import MemoryGrowth

EVENTS_SHOWN = 50
SCROLL_TRIES = 40
SCROLL_RETRY_S = 0.05
"""A panel just shown is scrolled to once laid out: after a refresh, then every 50 ms for 2 s."""
PANELS = tuple(p.id for p in HOST_PANELS)
"""Panel ids in number-key order."""
PANEL_OF = {p.id: p for p in HOST_PANELS}
SHOWN_AT_START = frozenset(p.id for p in HOST_PANELS if p.at_start)


class HostScreen(DataScreen):
    """Everything the console knows about one host."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        *(Binding(str(i + 1), f"toggle_panel('{p}')", p.capitalize(), show=False)
          for i, p in enumerate(PANELS)),
        Binding("tab", "next_panel", "Next panel", show=False),
    ]

    def __init__(self, host: str, subtitle: str) -> None:
        super().__init__(subtitle)
        self.host = host
        self.shown = set(SHOWN_AT_START)
        self.selected_gpu: int | None = None
        self._fleet: FleetState | None = None
        self._now = 0.0

    def compose(self) -> ComposeResult:
        """Header, facts, GPU table, the panels (hidden ones kept, not drawn), events."""
        yield self.header()
        with VerticalScroll(id="host-body"):
            yield HostFactsBar(id="host-facts")
            yield Static(id="host-stale")
            yield FindingsStrip(id="host-findings")
            yield GpuTable(id="gpu-table")
            yield GoneGpus(id="gpu-gone")
            yield Label(key_hint(self.shown), id="panel-keys")
            for p in HOST_PANELS:
                yield p.widget(id=p.widget_id, classes="panel")
            yield Label("Recent events", classes="panel-title")
            yield EventLog(id="events")
        yield KeysFooter()

    def on_mount(self) -> None:
        """Hide the panels not shown at start."""
        if leaving(self):  # popped (or the app quit) before it was composed
            return
        self.query_one("#host-stale").display = False
        self.query_one(GoneGpus).display = False
        for p in PANELS:
            self._panel(p).display = p in self.shown

    def _panel(self, name: str) -> Widget:
        return self.query_one(f"#panel-{name}")

    def _show_panel(self, panel: HostPanel[Widget], state: HostState,
                    ctx: PanelContext) -> None:
        panel.show(self.query_one(f"#{panel.widget_id}", panel.widget), state, ctx)

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Push this host's state into the shown panels only."""
        self._fleet, self._now = fleet, now
        state = fleet.hosts.get(self.host)
        if state is None:
            return
        facts = self.query_one(HostFactsBar)
        row = state.row(now)
        facts.row = row
        facts.facts = state.hello.facts if state.hello else None
        facts.down_reason = state.reach.down_reason
        facts.gpus = gpu_count(state)
        notice = stale_notice(state, row)
        stale = self.query_one("#host-stale", Static)
        stale.display = notice is not None
        if notice is not None:
            stale.update(stale_line(notice))
        self.query_one(FindingsStrip).findings = top_findings(state)
        rows = gpu_rows(state)
        table = self.query_one(GpuTable)
        table.gpus = rows
        table.set_class(notice is not None, "-stale")
        self.query_one("#host-body").set_class(notice is not None, "-stale")
        self.query_one(GoneGpus).rows = rows
        ctx = PanelContext(self.console.window_s, self.selected_gpu)
        for p in HOST_PANELS:
            if p.id in self.shown:
                self._show_panel(p, state, ctx)
        self.query_one(EventLog).events = tuple(state.logs.events)[-EVENTS_SHOWN:]

    def _redraw_panel(self, name: str) -> None:
        """Feed one panel, if shown, from the host's state: what a key that shows it or
        changes its choice needs.  The rest of the screen is the tick's to bring up to
        date (each second): redrawing all of it on the key (the facts, the GPU table and
        every shown panel, their views built from the history again) was 20-40 ms of a
        panel key's handler at 1024 hosts, and the repaint of what it changed (issue 38)."""
        state = self._fleet.hosts.get(self.host) if self._fleet is not None else None
        if state is None or name not in self.shown:
            return
        ctx = PanelContext(self.console.window_s, self.selected_gpu)
        self._show_panel(PANEL_OF[name], state, ctx)

    def action_toggle_panel(self, name: str) -> None:
        """Show or hide one panel."""
        self.shown ^= {name}
        panel = self._panel(name)
        panel.display = name in self.shown  # not a class: see FleetScreen.action_toggle_wall
        self.query_one("#panel-keys", Label).update(key_hint(self.shown))
        self._redraw_panel(name)
        if name in self.shown:
            self.call_after_refresh(self._scroll_to_panel, name, SCROLL_TRIES)

    def _scroll_to_panel(self, name: str, tries: int) -> None:
        """Bring a panel just shown into view once the layout has placed it.

        ``scroll_visible`` right after the toggle raced the layout on a busy machine: the
        deferred scroll could run before the panel had a region and went nowhere.
        """
        if name not in self.shown or not self.is_mounted:
            return
        panel = self._panel(name)
        if not panel.virtual_region.height:
            if tries > 0:
                self.set_timer(SCROLL_RETRY_S, partial(self._scroll_to_panel, name, tries - 1))
            return
        panel.scroll_visible(animate=False, immediate=True)

    def action_next_panel(self) -> None:
        """Scroll to the next shown panel."""
        shown = [p for p in PANELS if p in self.shown]
        if not shown:
            return
        body = self.query_one("#host-body", VerticalScroll)
        y = body.scroll_y
        for p in shown:
            if self._panel(p).virtual_region.y > y + 1:
                body.scroll_to(y=self._panel(p).virtual_region.y, animate=False)
                return
        body.scroll_to(y=self._panel(shown[0]).virtual_region.y, animate=False)

    @on(MemoryGrowth.GpuPicked)
    def _pick_gpu(self, event: MemoryGrowth.GpuPicked) -> None:
        self.selected_gpu = event.index
        self._redraw_panel("memory")  # the one panel the picked GPU changes
