"""What a ``:`` command may ask of the running console: a typed seam.

Commands and the palette name this protocol, never ``tui.app``: the app satisfies it, so
the ``app ↔ command_run ↔ palette`` circle is gone.  A command changes the console only
through one of these methods, so the app stays the one writer of its own state.  (What a
screen reads of the console is ``tui.screens.base.ConsoleView``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from probes.actions.audit import NodeAction


class CommandTarget(Protocol):
    """What a ``:`` command may ask of the console: each command is one of these calls."""

    @property
    def read_only(self) -> bool:
        """No node actions in this session."""

    def host_names(self) -> Sequence[str]:
        """Every host the console watches, in inventory order."""

    def node_action(self, action: NodeAction, node: str | None) -> None:
        """Open the drain or resume box for ``node`` (None: the one on screen)."""

    def show_host(self, host: str) -> None:
        """Back to the fleet, then open ``host``."""

    def set_theme_word(self, word: str) -> None:
        """Switch to the rigwatch theme named ``word`` (``dark``, ``light`` …)."""

    def action_triage(self) -> None:
        """Guided triage for the fleet (or the host on screen)."""

    def action_preflight(self) -> None:
        """The preflight checklist."""

    def action_help(self) -> None:
        """The key reference."""

    def request_quit(self) -> None:
        """Stop the backend and leave."""

    def set_window(self, span: str) -> None:
        """Set the charts' window to a ``WINDOWS`` span and say so."""

    def watch_job(self, job: str) -> None:
        """Follow Slurm job ``job``: its hosts filtered underneath, its ranks on top."""

    def sort_fleet(self, key: str) -> None:
        """Back to the fleet, sorted by ``key``."""

    def filter_fleet(self, text: str) -> None:
        """Back to the fleet, filtered by ``text`` (empty clears)."""

    def toggle_wall(self) -> None:
        """Back to the fleet, wall and table swapped."""
