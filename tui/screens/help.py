"""The key reference, as a modal over whatever screen is showing."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

KEYS = (
    ("↑ ↓", "move between hosts or GPUs"),
    ("Enter", "open the selected host"),
    ("Esc", "back to the fleet / close this help"),
    ("t", "guided triage (fleet, or the host on screen)"),
    ("c / x", "triage: mark the step clear / suspect"),
    ("n / g / r", "triage: note, go to the proposed step, write a report"),
    ("p", "preflight: every host against the training-server checklist"),
    ("T", "next theme (dark, light, high contrast, colour-blind safe)"),
    ("?", "this help"),
    ("Ctrl+P", "command palette"),
    ("q", "quit"),
)


class HelpScreen(ModalScreen[None]):
    """Lists every key; ``?`` or Esc closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("question_mark", "close", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        """A titled box of key / meaning lines."""
        with Vertical(id="help-box"):
            yield Label("rigwatch keys", classes="panel-title")
            width = max(len(k) for k, _ in KEYS)
            yield Static("\n".join(f"{k:>{width}}  {what}" for k, what in KEYS), id="help-keys",
                         markup=False)

    def action_close(self) -> None:
        """Back to the screen underneath."""
        self.dismiss()
