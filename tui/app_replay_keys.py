"""A replay's keys: pause, speed, step, seek, and jumps between recorded findings.

Apart from ``tui.app`` because they act on the backend's ``ReplayControls`` only, and exist
only in a replay (``RigwatchApp.check_action`` hides them elsewhere); the bindings that name
them stay with the app's other keys.
"""

from __future__ import annotations

from probes.sources.base import ReplayControls
from probes.sources.replay import ReplayError, parse_seek
from tui.app_base import ConsoleMixin
from tui.screens.note import SEEK_HINT, NoteScreen
from tui.views.alert_notice import landed_text


class ReplayKeys(ConsoleMixin):
    """The ``replay_*`` actions: each does nothing outside a replay."""

    def _replay(self) -> ReplayControls | None:
        return self.backend.replay

    def action_replay_pause(self) -> None:
        """Pause or resume the replay."""
        if (r := self._replay()) is not None:
            r.toggle_pause()
            self.refresh_view()

    def action_replay_speed(self, step: int) -> None:
        """Replay faster or slower (×1 … ×600)."""
        if (r := self._replay()) is not None:
            r.faster(step)
            self.refresh_view()

    def action_replay_step(self, seconds: float) -> None:
        """Seek the replay by ``seconds``."""
        if (r := self._replay()) is not None:
            r.seek(r.now() + seconds)

    def action_replay_finding(self, direction: int) -> None:
        """Jump to the next (or previous) recorded finding and say which it is."""
        if (r := self._replay()) is None:
            return
        t = r.next_finding() if direction > 0 else r.previous_finding()
        if t is None:
            self.notify("no recorded finding that way", timeout=4, markup=False)
        else:
            text = landed_text(direction, t, r.findings_at(t), self.size.width - 2)
            self.notify(text, timeout=8, markup=False)

    def action_replay_seek(self) -> None:
        """Ask for a time and seek there (+10m, -1h, 03:12, an ISO time)."""
        if (r := self._replay()) is None:
            return

        def done(text: str | None) -> None:
            if not text:
                return
            try:
                r.seek(parse_seek(text, r.now(), r.start))
            except ReplayError as exc:
                self.notify(str(exc), severity="warning", timeout=8, markup=False)

        self.push_screen(NoteScreen("seek", "", heading="Seek the replay to",
                                    placeholder="+10m, -1h, 03:12 (UTC) or 2026-12-03T03:12:07",
                                    hint=SEEK_HINT), done)
