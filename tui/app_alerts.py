"""Raising alerts on the tick: a status-line notice, the bell, the hook, a recording's mark.

Apart from ``tui.app`` because it is the console's one way of paging someone: what the
``AlertTracker`` raises is said once per tick (worst host first), rung, handed to the
alert hook through its gate, and marked in the recording; a replay raises none.
"""

from __future__ import annotations

from probes.analysis.alerts import Alert
from probes.triage import Severity
from tui.app_base import ConsoleMixin
from tui.app_status_line import ALERT_NOTICE_S
from tui.views.alert_notice import alert_text
from widgets.header_bar import NoticeLevel

HOOK_RESULTS_KEPT = 100
"""Finished hook runs remembered (newest); older ones are forgotten."""


class AlertRaising(ConsoleMixin):
    """``check_alerts`` each tick: new alerts said, rung, hooked and recorded."""

    def check_alerts(self) -> None:
        """Raise new alerts: a notification, the bell, the hook, and a mark in the recording.

        A replay raises none: it would page people for the past.
        """
        if not self.backend.raises_alerts:
            return
        now = self._clock()
        self.fleet.tick(now)
        findings = self.fleet.all_findings(watch=self.job_watch)
        raised = self.alerts.update(findings, now, hosts=len(self.fleet.hosts))
        by_host: dict[str, list[Alert]] = {}
        for alert in raised:
            if alert.event == "alert":
                by_host.setdefault(alert.finding.host, []).append(alert)
        if self.alert_policy.notify:
            self._notify_alerts(by_host)
            if raised and not by_host:  # recoveries only: said quietly, no bell
                self.say(" · ".join(f"{a.finding.host}: {a.finding.summary}" for a in raised))
        if by_host and self.alert_policy.bell:
            self.bell()
        dropped = 0
        for alert in raised:
            f = alert.finding
            if self.alert_policy.hook:
                if self.hook_gate.admit():
                    self.run_worker(self._hook(alert), group="hooks", exit_on_error=False)
                else:
                    dropped += 1
            self.backend.record_alert(f, f.ts if f.ts is not None else now)
        if dropped:
            text = f"{dropped} alert hook run(s) dropped: {self.hook_gate.at_once} running " \
                f"and {self.hook_gate.waiting} waiting already"
            self.notify(text, markup=False, title="Alert hook", severity="warning", timeout=15)

    def _notify_alerts(self, by_host: dict[str, list[Alert]]) -> None:
        """One status-line notice for the tick's alerts, worst host and finding first.

        One incident shows as several findings (Xid, fallen off the bus, GPU lost), and a
        rack losing power, or a console starting on a troubled fleet, raises many hosts in
        one tick.  A toast would sit over the rows that already list them; the status line
        takes its own row above the footer.
        """
        if not by_host:
            return
        tops = []
        for host, alerts in by_host.items():
            alerts.sort(key=lambda a: -a.finding.severity.rank)
            tops.append((host, alerts[0].finding, len(alerts)))
        tops.sort(key=lambda t: (-t[1].severity.rank, t[0]))
        worst = tops[0][1].severity
        level: NoticeLevel = "critical" if worst is Severity.CRITICAL else "warning"
        # one line of the status line (its padding aside): never two over the table
        text = alert_text(tops, self.size.width - 2)
        self.say(text, level, ALERT_NOTICE_S)

    async def _hook(self, alert: Alert) -> None:
        result = await self.hook_gate.run(self.alert_policy.hook, alert,
                                          self.alert_policy.hook_timeout_s)
        self.hook_results = [*self.hook_results[-(HOOK_RESULTS_KEPT - 1):], result]
        if not result.ok:
            text = result.error or "the alert hook failed"
            self.notify(text, markup=False, title="Alert hook", severity="warning", timeout=15)
