"""A one-line note for a triage step, typed in a small modal; the ``:`` command line and the
replay's seek box are the same modal with their own hint."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from tui.screens.base import on_top

HINT = "Enter saves · Esc cancels · an empty note clears it"
"""Both keys work without it, but nothing on screen said so."""
COMMAND_HINT = "Enter runs it · Esc cancels · a unique prefix is enough · ^p lists them all"
"""The ``:`` line's hint: it runs a command, it keeps no note."""
SEEK_HINT = "Enter seeks there · Esc cancels · times are UTC"
"""The replay's ``@`` box: it moves the clock, it keeps no note."""


class NoteScreen(ModalScreen[str | None]):
    """Returns the note (Enter) or None (Esc); an empty note clears the step's note."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, text: str, *, heading: str | None = None,
                 placeholder: str = "what you checked, what you think",
                 hint: str = HINT) -> None:
        super().__init__()
        self.title_text = title
        self.text = text
        self.heading = heading if heading is not None else f"Note for {title}"
        self.placeholder = placeholder
        self.hint = hint
        self._answered = False

    def compose(self) -> ComposeResult:
        """A titled box holding the input."""
        with Vertical(id="note-box"):
            yield Label(self.heading, classes="panel-title")
            yield Input(self.text, placeholder=self.placeholder, id="note-input")
            yield Label(Content.from_markup("[$text-dim]$h[/]", h=self.hint), id="note-hint")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self._answer(event.value.strip())

    def action_cancel(self) -> None:
        """Leave the note as it was."""
        self._answer(None)

    def _answer(self, result: str | None) -> None:
        """Dismiss once.  Keys that arrive together (a slow SSH link, a loaded bastion)
        can bring a second Enter, or an Esc, to this screen after the first popped it:
        dismissing again would pop the screen underneath, or the last one."""
        if self._answered or not on_top(self):
            return
        self._answered = True
        self.dismiss(result)
