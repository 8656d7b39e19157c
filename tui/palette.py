"""Every ``:`` command in Textual's command palette (Ctrl+P), hosts included, and a palette
that holds up when keys arrive together.

Rigwatch's commands come first; Textual's own entries that do something else (the keys
panel, maximize, a screenshot) follow, without its Quit and Theme, which ``:quit`` and
``:theme`` already are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Protocol, runtime_checkable

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

from tui.commands import COMMANDS, offered
from tui.console import CommandTarget
from tui.screens.base import on_top
from widgets._alive import leaving

MAX_HOST_HITS = 50
TEXTUAL_DUPLICATES = frozenset({"Quit", "Theme"})
"""Textual's system commands that a rigwatch command already is (``:quit``, ``:theme``)."""
TEXTUAL_SCORE = 0.5
"""Textual's entries rank below an equally good match of a rigwatch command."""


@runtime_checkable
class PaletteConsole(CommandTarget, Protocol):
    """The console the palette runs commands on."""

    def run_command(self, text: str) -> None:
        """Run one command line (a mistake is a notice)."""

    def action_command_line(self, text: str = "") -> None:
        """Open the ``:`` line with ``text`` typed."""


def palette_lines(app: CommandTarget) -> Iterator[tuple[str, str]]:
    """(command line, help) for everything the palette offers, from ``COMMANDS``: each
    command (``:job ID`` opens the ``:`` line to type the id), then each of its choices,
    then what the console knows (its hosts)."""
    commands = offered(app.read_only)
    for c in commands:
        yield c.line, c.help
    for c in commands:
        for word in c.choices:
            yield f":{c.name} {word}", c.choice_help
    for c in commands:
        if c.live_choices is not None:
            for word in list(c.live_choices(app))[:MAX_HOST_HITS * 20]:
                yield f":{c.name} {word}", c.choice_help


def _callback(app: PaletteConsole, line: str) -> Callable[[], None]:
    """What choosing ``line`` does: run it, or open the ``:`` line to finish typing it."""
    name, _, arg = line.lstrip(":").partition(" ")
    command = next(c for c in COMMANDS if c.name == name)
    if command.arg and arg == command.arg:  # a placeholder (``:job ID``): the value is typed
        return partial(app.action_command_line, f"{name} ")
    return partial(app.run_command, line)


class RigwatchCommands(Provider):
    """The command line's commands as palette entries, then Textual's own that differ."""

    @property
    def _rw(self) -> PaletteConsole:
        app = self.app
        assert isinstance(app, PaletteConsole)
        return app

    async def discover(self) -> Hits:
        """Commands without arguments, shown before anything is typed; Textual's after."""
        for c in offered(self._rw.read_only):
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
        for line, help_text in palette_lines(self._rw):
            score = matcher.match(line)
            if score > 0:
                yield Hit(score, matcher.highlight(line), _callback(self._rw, line),
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
