"""The key reference, as a modal over whatever screen is showing.

It is generated from the bindings themselves (the app's, every screen's and the wall's),
so a key added anywhere is listed, and none is forgotten the way a hand-kept table forgot
``s``, ``/``, ``w``, ``m``, ``1``–``7``, Tab, ``:`` and the replay keys.  The screen it was
opened from comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from tui.screens.base import on_top

KeyDisplay = Callable[[Binding], str]
"""How a binding's key is written (``App.get_key_display``: ``?``, ``esc``, ``^p``)."""

MOVE = ("↑ ↓ PgUp PgDn", "move between hosts, GPUs or steps (Home, End)")
OPEN = ("Enter", "open the selected host")
PALETTE = ("^p", "command palette: every : command, hosts and themes")
REPLAY_PREFIX = "replay_"


@dataclass(frozen=True)
class Section:
    """A titled group of (keys, what they do) lines."""

    title: str
    lines: tuple[tuple[str, str], ...]


def own_bindings(cls: type[DOMNode]) -> list[Binding]:
    """The bindings ``cls`` declares itself (not Textual's base-class ones)."""
    declared: list[BindingType] = list(cls.__dict__.get("BINDINGS", ()))
    return list(Binding.make_bindings(declared))


ACTION_WORDING = {"toggle_panel": "show or hide the {} panel"}
"""How help words a binding whose description is a bare name (the host screen's panels)."""


def _describe(binding: Binding) -> str:
    if binding.tooltip:
        return binding.tooltip
    wording = ACTION_WORDING.get(binding.action.split("(")[0])
    if wording and binding.description:
        return wording.format(binding.description.lower())
    if binding.description:
        return binding.description
    name = binding.action.split("(")[0].replace("_", " ")
    return name.removeprefix("replay ")


def _join_keys(keys: Sequence[str]) -> str:
    """``1 2 3 4`` → ``1–4``; other keys joined by spaces."""
    if len(keys) > 2 and all(k.isdigit() and len(k) == 1 for k in keys):
        values = [int(k) for k in keys]
        if values == list(range(values[0], values[0] + len(values))):
            return f"{keys[0]}–{keys[-1]}"
    return " ".join(keys)


def binding_lines(bindings: Iterable[Binding], display: KeyDisplay) -> tuple[tuple[str, str], ...]:
    """One line per thing a key does; keys doing the same thing share a line."""
    merged: dict[str, list[str]] = {}
    for b in bindings:
        if b.system:
            continue
        keys = merged.setdefault(_describe(b), [])
        shown = display(b)
        if shown not in keys:
            keys.append(shown)
    return tuple((_join_keys(keys), what) for what, keys in merged.items())


def build_sections(app_bindings: Sequence[Binding],
                   screens: Sequence[tuple[str, Sequence[Binding]]],
                   display: KeyDisplay, here: str | None = None,
                   commands: Sequence[tuple[str, str]] = ()) -> list[Section]:
    """The help's sections: the screen it was opened from, everywhere, the other screens,
    then the replay keys.

    Args:
        app_bindings: the app's own bindings (replay keys among them).
        screens: (title, bindings) of every screen and of the wall, in a stable order.
        display: how a key is written.
        here: the title of the screen help was opened from.
        commands: (``:name ARG``, help) of every ``:`` command offered (``tui.commands``).
    """
    everywhere = [b for b in app_bindings if not b.action.startswith(REPLAY_PREFIX)]
    replay = [b for b in app_bindings if b.action.startswith(REPLAY_PREFIX)]
    by_title = [Section(title, binding_lines(bs, display)) for title, bs in screens]
    first = [s for s in by_title if s.title == here]
    rest = [s for s in by_title if s.title != here]
    general = Section("Everywhere", (MOVE, OPEN, *binding_lines(everywhere, display), PALETTE))
    sections = [*first, general, *rest]
    if commands:
        sections.append(Section("Commands (: or ^p)", tuple(commands)))
    if replay:
        sections.append(Section("Replay (rigwatch replay FILE)", binding_lines(replay, display)))
    return [s for s in sections if s.lines]


def help_text(sections: Sequence[Section]) -> Text:
    """The sections as aligned ``keys  meaning`` lines under bold titles."""
    width = max((len(k) for s in sections for k, _ in s.lines), default=1)
    out = Text()
    for i, section in enumerate(sections):
        if i:
            out.append("\n")
        out.append(section.title + "\n", style="bold")
        for keys, what in section.lines:
            out.append(f"{keys:>{width}}", style="bold")
            out.append(f"  {what}\n")
    out.rstrip()
    return out


class HelpScreen(ModalScreen[None]):
    """Lists every key; ``?`` or Esc closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("question_mark", "close", "Close", show=False),
    ]

    def __init__(self, sections: Sequence[Section] = ()) -> None:
        super().__init__()
        self.sections = tuple(sections)

    def compose(self) -> ComposeResult:
        """A titled box of key / meaning lines that scrolls on a small terminal."""
        with Vertical(id="help-box"):
            yield Label("rigwatch keys  (Esc closes)", classes="panel-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(help_text(self.sections), id="help-keys", markup=False)

    def text(self) -> str:
        """Everything the help lists, as plain text (for tests and screen readers)."""
        return help_text(self.sections).plain

    def action_close(self) -> None:
        """Back to the screen underneath (once: see ``NoteScreen._answer``)."""
        if on_top(self):
            self.dismiss()
