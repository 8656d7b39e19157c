"""Every ``:`` command in Textual's command palette (Ctrl+P), hosts included."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.commands import ACTION_COMMANDS, COMMANDS, WINDOWS, Command
from tui.views.fleet_view import SORT_KEYS

if TYPE_CHECKING:
    from tui.app import RigwatchApp

THEME_WORDS = ("dark", "light", "high-contrast", "colour-safe")
MAX_HOST_HITS = 50


def offered(app: RigwatchApp) -> list[Command]:
    """The commands this console offers: no node actions in read-only mode."""
    return [c for c in COMMANDS if not (app.read_only and c.name in ACTION_COMMANDS)]


def _lines(app: RigwatchApp) -> Iterator[tuple[str, str]]:
    """(command line, help) for everything the palette offers."""
    for c in offered(app):
        if not c.arg:
            yield f":{c.name}", c.help
    for word in THEME_WORDS:
        yield f":theme {word}", "switch theme"
    for key in SORT_KEYS:
        yield f":sort {key}", "sort the fleet"
    for span in WINDOWS:
        yield f":window {span}", "chart window"
    for host in list(app.fleet.hosts)[:MAX_HOST_HITS * 20]:
        yield f":host {host}", "open this host"


class RigwatchCommands(Provider):
    """The command line's commands as palette entries."""

    @property
    def _rw(self) -> RigwatchApp:
        return self.app  # type: ignore[return-value]

    async def discover(self) -> Hits:
        """Commands without arguments, shown before anything is typed."""
        for c in offered(self._rw):
            if not c.arg:
                yield DiscoveryHit(f":{c.name}", partial(self._rw.run_command, c.name),
                                   help=c.help)

    async def search(self, query: str) -> Hits:
        """Every command line that matches what was typed."""
        matcher = self.matcher(query)
        shown = 0
        for line, help_text in _lines(self._rw):
            score = matcher.match(line)
            if score > 0:
                yield Hit(score, matcher.highlight(line), partial(self._rw.run_command, line),
                          help=help_text)
                shown += 1
                if shown >= MAX_HOST_HITS:
                    return
