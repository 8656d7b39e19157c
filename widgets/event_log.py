"""The newest log lines a host's agent reported (kernel log, job logs)."""

from __future__ import annotations

import time

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.wire.samples import LogEvent


def event_line(e: LogEvent) -> Content:
    """``12:04:31 kernel  NVRM: Xid …``, in the console's local time."""
    stamp = time.strftime("%H:%M:%S", time.localtime(e.ts))
    return Content.from_markup(
        "[$text-dim]$stamp $source[/] $line", stamp=stamp, source=e.source, line=e.line,
    )


class EventLog(Static):
    """Recent events, oldest first, so the newest sits at the bottom like a terminal."""

    events: reactive[tuple[LogEvent, ...]] = reactive((), init=False)
    """The newest events, already trimmed by the caller."""

    def on_mount(self) -> None:
        """Show whatever arrived before mounting (or the empty state)."""
        self.watch_events(self.events)

    def watch_events(self, events: tuple[LogEvent, ...]) -> None:
        """Re-render the lines."""
        if not events:
            self.update(Content.from_markup("[$text-dim]no log events yet[/]"))
            return
        self.update(Content("\n").join(event_line(e) for e in events))
