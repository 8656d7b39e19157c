"""The key hints line: Textual's ``Footer`` with each key styled once when it appears.

The footer is composed again on every change of the bindings (each focus change: the wall
shown or hidden, the filter line opened or closed, a screen switched), a few dozen
``FooterKey`` widgets each time. Textual's ``FooterKey`` starts ``compact`` and is then
bound to the footer's ``compact``: mounting it restyled it twice more (the class added by
the first watcher, removed by the binding), 0.4–2 ms each, about 20–40 ms of a fleet key at
a thousand hosts. Here each key is handed the footer's value before it is mounted, so its
first watcher is not run and the binding finds nothing to change: its classes, and so what
is drawn, are the same.  Only the keys bound to the footer's ``compact`` (the command
palette's key is not: it stays compact) are handed it.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeysFooter(Footer):
    """``Footer`` whose keys take the footer's ``compact`` before they are mounted."""

    def compose(self) -> ComposeResult:
        compact = self.compact
        for widget in super().compose():
            # ``data_bind`` records its bindings here (Textual 8) until the key is mounted;
            # a Textual without it gets its keys as Textual styles them (read, not assumed)
            bound = getattr(widget, "_reactive_connect", None) or ()
            if isinstance(widget, FooterKey) and "compact" in bound:
                widget.set_reactive(FooterKey.compact, compact)
                widget.set_class(compact, "-compact", update=False)
            yield widget

