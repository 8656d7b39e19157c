"""Reference copy (session 14, issue 38): the host screen as it answered a panel key before.

Every panel key (``1``-``7``) and a GPU picked in the memory panel redrew the whole screen
(``HostScreen._redraw``: ``show_state`` from the last redraw's fleet and time: the facts, the
findings, the GPU table, every shown panel and the event log), where ``_redraw_panel`` now
feeds the one panel the key shows.  The rest of ``action_toggle_panel`` and ``_pick_gpu`` is
unchanged, so this subclass is the screen as it was: ``_redraw_panel`` is the old
``_redraw``, called where it was called.
"""

from __future__ import annotations

from tui.screens.host import HostScreen


class HostScreenBeforeS14(HostScreen):
    """The host screen with its panel keys redrawing everything (before session 14)."""

    def _redraw_panel(self, name: str) -> None:
        # ``HostScreen._redraw`` before session 14, verbatim
        if self._fleet is not None:
            self.show_state(self._fleet, self._now)


class HostScreenFeedsNothing(HostScreen):
    """Negative control: a panel key feeds nothing (a panel shown keeps whatever it last
    had, or nothing)."""

    def _redraw_panel(self, name: str) -> None:
        return
