"""Whether a widget is still there to draw into: the guard for work that arrives late.

A panel's rows are mounted as data arrives; when the operator leaves the host screen in
the same instant (keys that arrive together, as over a slow SSH link), Textual removes the
screen while the rows are still starting.  It mounts nothing into a subtree it is removing,
so a row's ``on_mount`` finds no children to draw into, and a deferred restyle finds its
component styles cleared.  Both raised (``NoMatches``, ``KeyError``) and took the console
down; a widget on its way out has nothing to draw.
"""

from __future__ import annotations

from textual.widget import Widget


def leaving(widget: Widget) -> bool:
    """Whether Textual is removing ``widget`` (or has removed it) from the screen."""
    return widget._closing or widget._pruning or not widget.is_attached
