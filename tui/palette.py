"""Every ``:`` command in Textual's command palette (Ctrl+P), hosts included, and a palette
that holds up when keys arrive together.

Rigwatch's commands come first; Textual's own entries that do something else (the keys
panel, maximize, a screenshot) follow, without its Quit and Theme, which ``:quit`` and
``:theme`` already are.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.await_complete import AwaitComplete
from textual.command import (
    Command,
    CommandList,
    CommandPalette,
    DiscoveryHit,
    Hit,
    Hits,
    Provider,
)

from tui.commands import ACTION_COMMANDS, COMMANDS, WINDOWS
from tui.commands import Command as RigwatchCommand
from tui.screens.base import on_top
from tui.views.fleet_view import SORT_KEYS
from widgets._alive import leaving

if TYPE_CHECKING:
    from tui.app import RigwatchApp

THEME_WORDS = ("dark", "light", "high-contrast", "colour-safe")
MAX_HOST_HITS = 50
TEXTUAL_DUPLICATES = frozenset({"Quit", "Theme"})
"""Textual's system commands that a rigwatch command already is (``:quit``, ``:theme``)."""
TEXTUAL_SCORE = 0.5
"""Textual's entries rank below an equally good match of a rigwatch command."""


def offered(app: RigwatchApp) -> list[RigwatchCommand]:
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
    """The command line's commands as palette entries, then Textual's own that differ."""

    @property
    def _rw(self) -> RigwatchApp:
        return self.app  # type: ignore[return-value]

    async def discover(self) -> Hits:
        """Commands without arguments, shown before anything is typed; Textual's after."""
        for c in offered(self._rw):
            if not c.arg:
                yield DiscoveryHit(f":{c.name}", partial(self._rw.run_command, c.name),
                                   help=c.help)
        for system in sorted(self.app.get_system_commands(self.screen), key=lambda c: c.title):
            if system.discover:
                yield DiscoveryHit(system.title, system.callback, help=system.help)

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
        for system in self.app.get_system_commands(self.screen):
            if (score := matcher.match(system.title)) > 0:
                yield Hit(score * TEXTUAL_SCORE, matcher.highlight(system.title),
                          system.callback, help=system.help)


class SteadyPalette(CommandPalette):
    """Textual's palette, guarded where keys that arrive together broke it (Textual 8.2).

    Two Enters in one burst dismissed it twice (the second popped the screen under it, or
    failed on the last one); PgUp/PgDn before its list was laid out raised ``KeyError``;
    a search that finished after Esc raised ``NoMatches``.
    """

    def dismiss(self, result: Any = None) -> AwaitComplete:
        """Leave once: a second Enter or Esc that arrives after the first left does nothing."""
        if not on_top(self):
            return AwaitComplete.nothing()
        return super().dismiss(result)

    # Its command-gathering worker can finish after the palette was dismissed and its
    # children removed; what it would then show has nowhere to go.
    def _refresh_command_list(self, command_list: CommandList, commands: list[Command],
                              clear_current: bool) -> None:
        if not leaving(self):
            super()._refresh_command_list(command_list, commands, clear_current)

    def _watch__list_visible(self) -> None:
        if not leaving(self):
            super()._watch__list_visible()

    async def _watch__show_busy(self) -> None:
        if not leaving(self):
            await super()._watch__show_busy()

    def _action_command_list(self, action: str) -> None:
        try:
            super()._action_command_list(action)
        except KeyError:
            # the option list maps options to lines only once it has been laid out: a page
            # key that arrives first has no page to move by
            if not action.startswith("page_"):
                raise
