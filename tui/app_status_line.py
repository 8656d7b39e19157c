"""The status line: what the console says to the operator, on every data screen at once.

Apart from ``tui.app`` because every part of the console speaks through it (alerts, node
actions, commands, the screens' own ``notify``), and its rules are one thing: the newest
notice replaces the one before, expires on its own, never covers the screen, and only an
error toasts.
"""

from __future__ import annotations

from textual.notifications import SeverityLevel

from tui.app_base import ConsoleMixin
from tui.screens.base import DataScreen
from widgets.header_bar import Notice, NoticeLevel

NOTICE_S = 6.0
"""How long a notice stays on the status line (alerts and reports stay longer)."""
ALERT_NOTICE_S = 15.0
"""Alerts stay longer: the operator may be looking at another window when they arrive."""


class StatusLine(ConsoleMixin):
    """``say`` a notice on the status line; ``notify`` routes Textual's news there too."""

    def say(self, text: str, level: NoticeLevel = "information",
            timeout: float = NOTICE_S) -> None:
        """Put ``text`` on the status line of every data screen for ``timeout`` seconds.

        The newest notice replaces the one before; a notice never covers the screen.
        """
        self._notice_serial += 1
        serial = self._notice_serial
        self._show_notice(Notice(text, level))

        def expire() -> None:
            if self._notice_serial == serial:
                self._show_notice(None)

        self.set_timer(timeout, expire)

    def _show_notice(self, notice: Notice | None) -> None:
        self.notice = notice
        for screen in self.screen_stack:
            if isinstance(screen, DataScreen):
                screen.show_notice(notice)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Errors toast (in a small corner box); everything else goes to the status line.

        Screens keep calling ``notify`` (a sort order, "Report written …"): the news lands
        on the status line, as text (never markup), where it covers nothing.
        """
        if severity == "error":
            # never markup: an error quotes hosts, paths and OS messages
            super().notify(message, title=title, severity=severity, timeout=timeout,
                           markup=False)
            return
        text = f"{title}: {message}" if title else message
        self.say(text, "warning" if severity == "warning" else "information",
                 timeout if timeout is not None else NOTICE_S)
