"""The chrome of every data screen: the top line (who we are, what we watch, fleet totals)
and the status line above the footer (notices)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Label, Static

from widgets._alive import leaving

_COUNT_VARIABLE = {
    "stale": "$status-stale",
    "down": "$status-down",
    "connecting": "$status-connecting",
    "unknown": "$status-stale",
    "critical": "$sev-critical",
    "warning": "$sev-warning",
    "info": "$sev-info",
}


def _count(n: int, word: str) -> str:
    return f"[{_COUNT_VARIABLE[word]}]{n} {word}[/]" if n else ""


def totals_content(totals: Mapping[str, int]) -> Content:
    """``6/8 streaming, 1 stale, 1 down │ 62 GPUs │ 2 critical, 3 warning``; hosts the
    console itself cannot see now (a collector or Prometheus at fault) count as unknown."""
    shown = ("stale", "down", "connecting", "unknown")
    hosts = totals.get("streaming", 0) + sum(totals.get(k, 0) for k in shown)
    parts = [f"[$status-streaming]{totals.get('streaming', 0)}/{hosts} streaming[/]"]
    parts += [c for w in shown if (c := _count(totals.get(w, 0), w))]
    found = [c for w in ("critical", "warning", "info") if (c := _count(totals.get(w, 0), w))]
    markup = ", ".join(parts) + f" │ {totals.get('gpus', 0)} GPUs │ "
    markup += ", ".join(found) if found else "no findings"
    return Content.from_markup(markup)


class HeaderBar(Horizontal):
    """App name, what is being watched (``demo fleet``, a title) and the fleet totals."""

    totals: reactive[Mapping[str, int] | None] = reactive(None, init=False)
    """Counts from ``FleetState.totals``; a fresh mapping each refresh, never mutated."""
    mode: reactive[str] = reactive("", init=False)
    """``● rec``, ``not recording: disk full`` or a replay position; empty hides it."""

    def __init__(self, subtitle: str = "") -> None:
        super().__init__()
        self._subtitle = subtitle
        self._ready = False

    def compose(self) -> ComposeResult:
        """Brand, subtitle, totals."""
        yield Label("rigwatch", id="brand")
        # the inventory's title and the mode (a recording's file name, an OS error) are text
        yield Label(self._subtitle, id="subtitle", classes="" if self._subtitle else "-empty",
                    markup=False)
        yield Label("", id="mode", classes="-empty", markup=False)
        yield Label("waiting for hosts…", id="totals")

    def on_mount(self) -> None:
        """Show totals that arrived before mounting."""
        if leaving(self):
            return
        self._ready = True
        self.watch_totals(self.totals)
        self.watch_mode(self.mode)

    def watch_mode(self, mode: str) -> None:
        """Show where the data comes from."""
        if self._ready:
            label = self.query_one("#mode", Label)
            label.update(mode)
            label.set_class(not mode, "-empty")
            label.set_class(mode.startswith("not recording"), "-warning")

    def watch_totals(self, totals: Mapping[str, int] | None) -> None:
        """Re-render the totals: a repaint of the label alone, no layout (its size is its
        share of the line, ``width: 1fr``, one line high, whatever it says); a layout
        arranged the whole screen again each time a count moved (issue 38, start-up: ~40 ms
        a time at 256 hosts, a few times a second while the fleet connects)."""
        if totals is not None and self._ready:
            self.query_one("#totals", Label).update(totals_content(totals), layout=False)


NoticeLevel = Literal["information", "warning", "critical"]
"""How a status-line notice is coloured: plain, the warning colour, the critical colour."""


@dataclass(frozen=True)
class Notice:
    """One line of news for the status line: an alert, a sort order, a report's path."""

    text: str
    level: NoticeLevel = "information"


class StatusLine(Static):
    """The notice line above the footer: news that must not cover what it announces.

    A toast sits over the table, the triage evidence or the help box; this line takes a row
    of its own while it has something to say and none otherwise.  It wraps at spaces, so a
    path is never broken inside (it gets a line of its own) and can be selected whole.
    """

    notice: reactive[Notice | None] = reactive(None, init=False)

    def __init__(self) -> None:
        super().__init__("", markup=False, classes="-empty")

    def watch_notice(self, notice: Notice | None) -> None:
        """Show the notice (text, never markup: it quotes hosts and paths)."""
        self.update(Text(notice.text) if notice is not None else "")
        self.set_class(notice is None, "-empty")
        self.set_class(notice is not None and notice.level == "warning", "-warning")
        self.set_class(notice is not None and notice.level == "critical", "-critical")
