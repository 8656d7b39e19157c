"""One host in detail: facts, GPUs, memory over time, findings and recent log lines."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Label

from probes.fleet_state import FleetState
from tui.screens.base import DataScreen
from tui.trends import memory_series
from widgets.event_log import EventLog
from widgets.findings_list import FindingsList
from widgets.gpu_table import GpuTable
from widgets.host_facts import HostFactsBar
from widgets.memory_chart import MemoryChart

EVENTS_SHOWN = 50


class HostScreen(DataScreen):
    """Everything the console knows about one host."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self, host: str, subtitle: str) -> None:
        super().__init__(subtitle)
        self.host = host

    def compose(self) -> ComposeResult:
        """Header, facts, GPU table, then chart beside findings and events."""
        yield self.header()
        with VerticalScroll(id="host-body"):
            yield HostFactsBar(id="host-facts")
            yield GpuTable(id="gpu-table")
            with Horizontal(id="host-lower"):
                yield MemoryChart(id="memory-chart")
                with Vertical(id="host-side"):
                    yield Label("Findings", classes="panel-title")
                    yield FindingsList(id="findings")
                    yield Label("Recent events", classes="panel-title")
                    yield EventLog(id="events")
        yield Footer()

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Push this host's state into the panels."""
        state = fleet.hosts.get(self.host)
        if state is None:
            return
        facts = self.query_one(HostFactsBar)
        facts.row = state.row(now)
        facts.facts = state.hello.facts if state.hello else None
        facts.down_reason = state.down_reason
        self.query_one(GpuTable).gpus = state.last.gpus if state.last else ()
        self.query_one(MemoryChart).series = memory_series(state)
        self.query_one(FindingsList).findings = tuple(state.findings())
        self.query_one(EventLog).events = tuple(state.events)[-EVENTS_SHOWN:]

    def action_back(self) -> None:
        """Return to the fleet."""
        self.dismiss()
