"""The console's screen actions: which screen opens on a key, a click or a ``:`` command.

Apart from ``tui.app`` because navigation is one concern with its own rules (triage for the
host on screen or the fleet, a host opened from anywhere goes back to the fleet first, a
job's hosts filtered under its ranks), and because these are most of what a ``:`` command
may ask (``tui.console.CommandTarget``): commands call them and never write the app's state.
The help screen, built from the app's own bindings, stays with the app.
"""

from __future__ import annotations

from probes.analysis.incident import TriageRecord
from tui.app_base import ConsoleMixin
from tui.commands import WINDOWS, CommandError, run_command, window_note
from tui.messages import HostChosen
from tui.screens.fleet import FleetScreen
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.note import COMMAND_HINT, NoteScreen
from tui.screens.preflight import PreflightScreen
from tui.screens.triage import TriageScreen


class ScreenActions(ConsoleMixin):
    """Open hosts, triage, preflight, jobs and the ``:`` line; steer the fleet screen."""

    def on_host_chosen(self, message: HostChosen) -> None:
        """Open the chosen host."""
        self.open_host(message.host)

    def open_host(self, host: str) -> None:
        """The host's screen; a backend whose source cannot see its kernel log or topology
        (Prometheus) reads them over SSH now, when SSH can reach it."""
        self.push_screen(HostScreen(host, self.subtitle))
        self.drill_down(host)

    def drill_down(self, host: str) -> None:
        """Ask the backend to read ``host`` over SSH once, and say so."""
        if self.backend.drill_down(host):
            self.say(f"reading {host}'s kernel log and topology over SSH", "information")

    def action_triage(self) -> None:
        """Open guided triage: for the host on screen, else for the whole fleet."""
        if isinstance(self.screen, TriageScreen):
            return
        host = self.screen.host if isinstance(self.screen, HostScreen) else None
        if host is not None:
            self.drill_down(host)
        record = self.triage_records.setdefault(host, TriageRecord())
        self.push_screen(TriageScreen(self.subtitle, record, host, self.reports_dir))

    def action_preflight(self) -> None:
        """Open the preflight checklist for the whole fleet."""
        if not isinstance(self.screen, PreflightScreen):
            self.push_screen(PreflightScreen(self.subtitle))

    def action_command_line(self, text: str = "") -> None:
        """``:`` — type a command (``host gpu017``, ``theme light``, ``window 6h`` …)."""
        def done(line: str | None) -> None:
            if line:
                self.run_command(line)

        self.push_screen(NoteScreen("command", text, heading=":",
                                    placeholder="host NAME · theme light · triage · preflight"
                                                " · window 6h · sort worst · filter TEXT"
                                                " · job ID · wall · help · quit",
                                    hint=COMMAND_HINT), done)

    def run_command(self, text: str) -> None:
        """Run one command line; a mistake is a notification saying what would work."""
        try:
            run_command(self, text)
        except CommandError as exc:
            self.notify(str(exc), severity="warning", timeout=6, markup=False)

    # What a ``:`` command may ask (``tui.console.CommandTarget``): commands call these and
    # never write the app's state themselves.

    def host_names(self) -> list[str]:
        """Every host watched, in inventory order."""
        return list(self.fleet.hosts)

    def to_fleet(self) -> FleetScreen:
        """Pop back to the fleet screen and return it."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, FleetScreen):
            self.pop_screen()
        screen = self.screen
        assert isinstance(screen, FleetScreen)
        return screen

    def show_host(self, host: str) -> None:
        """Back to the fleet, then ``host``'s screen on top."""
        self.to_fleet()
        self.open_host(host)

    def set_window(self, span: str) -> None:
        """The charts' window: a ``WINDOWS`` span; the fleet screen has no chart, so say it."""
        self.window_s = WINDOWS[span]
        self.refresh_view()
        self.say(window_note(span))

    def watch_job(self, job: str) -> None:
        """Follow a Slurm job: the fleet shows its hosts underneath, the job view its ranks
        on top, and its log's findings are this job's from now on."""
        self.job_watch = self.job_watch.switched_to(job)
        self.to_fleet().set_filter(f"job:{job}")
        self.push_screen(JobScreen(job, self.subtitle))

    def sort_fleet(self, key: str) -> None:
        """Back to the fleet, sorted by ``key``."""
        self.to_fleet().set_sort(key)

    def filter_fleet(self, text: str) -> None:
        """Back to the fleet, filtered by ``text``."""
        self.to_fleet().set_filter(text)

    def toggle_wall(self) -> None:
        """Back to the fleet, wall and table swapped."""
        self.to_fleet().action_toggle_wall()

    # What a data screen reads (``tui.console.ConsoleView``).

    @property
    def replaying(self) -> bool:
        """Whether this console plays a recording."""
        return self.backend.replay is not None

    def retry_host(self, host: str) -> bool:
        """Connect to ``host`` now; False if its session is not waiting for a retry."""
        return self.backend.retry_now(host)
