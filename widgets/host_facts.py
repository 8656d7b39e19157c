"""The host screen's first lines: what the host is and how its stream stands."""

from __future__ import annotations

from collections import Counter

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.fleet_state import FleetRow
from probes.wire.samples import HostFacts
from widgets.fleet_table import status_cell

_STATUS_VARIABLE = {
    "cell--ok": "$status-streaming",
    "cell--connecting": "$status-connecting",
    "cell--stale": "$status-stale",
    "cell--down": "$status-down",
}


def fact_parts(facts: HostFacts) -> list[str]:
    """The facts worth a glance, as plain strings (markup is added by the caller)."""
    out = []
    models = Counter(g.name or "unknown GPU" for g in facts.gpus)
    out += [f"{n}× {name}" for name, n in models.items()]
    out.append(f"driver {facts.driver_version or '?'} · CUDA {facts.cuda_version or '?'}")
    if facts.cpu_model:
        cores = f" ({facts.cpu_cores_logical} threads)" if facts.cpu_cores_logical else ""
        out.append(f"{facts.cpu_model}{cores}")
    if facts.mem_total_bytes:
        out.append(f"{facts.mem_total_bytes // 2**30:,} GiB RAM")  # int: no overflow, any size
    return out


class HostFactsBar(Static):
    """Hostname, status, driver and CUDA, CPU, RAM, and the simulator's scenarios if any."""

    facts: reactive[HostFacts | None] = reactive(None, init=False)
    """From the agent's hello; None until it arrives."""
    row: reactive[FleetRow | None] = reactive(None, init=False)
    """The host's fleet row, for its status."""
    down_reason: reactive[str | None] = reactive(None, init=False)
    """Why the stream ended, when it has."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._ready = False

    def on_mount(self) -> None:
        """Render what is known so far."""
        self._ready = True
        self._render_facts()

    def watch_facts(self) -> None:
        """Facts changed (a new hello)."""
        self._render_facts()

    def watch_row(self) -> None:
        """Status may have changed."""
        self._render_facts()

    def watch_down_reason(self) -> None:
        """The reason may have changed."""
        self._render_facts()

    def _render_facts(self) -> None:
        if not self._ready:
            return
        # The inventory's name leads: a host cannot pass for another by its hello.
        name = self.row.name if self.row else (self.facts.hostname if self.facts else "?")
        markup = "[bold]$name[/]"
        values: dict[str, object] = {"name": name}
        if self.facts and self.facts.hostname and self.facts.hostname != name:
            markup += " [$text-dim]reports hostname[/] $reported"
            values["reported"] = self.facts.hostname
        if self.row is not None:
            text, cls = status_cell(self.row, self.down_reason)
            markup += f"  [{_STATUS_VARIABLE[cls or 'cell--ok']}]$status[/]"
            values["status"] = text
        if self.facts is None:
            markup += "  [$text-dim]waiting for the agent's hello[/]"
        else:
            markup += "  [$text-dim]$facts[/]"
            values["facts"] = " · ".join(fact_parts(self.facts))
            if self.facts.simulated:
                markup += "\n[$text-dim]simulated:[/] $scenarios"
                values["scenarios"] = ", ".join(self.facts.simulated)
        self.update(Content.from_markup(markup, **values))
