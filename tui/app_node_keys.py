"""Node actions from the console: ``D`` drains, ``U`` resumes, ``:drain``/``:resume`` too.

Apart from ``tui.app`` because they are the console's only writes to the world outside it
(Slurm), each behind a preview box and an audit record, and never offered read-only
(``RigwatchApp.check_action`` hides the keys; ``node_action`` refuses the commands).
"""

from __future__ import annotations

from probes.actions.audit import AuditRecord, NodeAction, Outcome
from tui.app_base import ConsoleMixin
from tui.app_status_line import ALERT_NOTICE_S
from tui.commands import CommandError
from tui.node_actions import context as node_context
from tui.node_actions import target_of


class NodeKeys(ConsoleMixin):
    """Open the drain or resume box for the node a screen is about (or one named)."""

    def action_node_drain(self) -> None:
        """``D``: drain the node this screen is about, after a preview."""
        self._node_key(NodeAction.DRAIN)

    def action_node_resume(self) -> None:
        """``U``: resume the node this screen is about once its cause is gone."""
        self._node_key(NodeAction.RESUME)

    def _node_key(self, action: NodeAction) -> None:
        try:
            self.node_action(action, None)
        except CommandError as exc:
            self.notify(str(exc), severity="warning", timeout=8, markup=False)

    def node_action(self, action: NodeAction, node: str | None) -> None:
        """Open the drain or resume box for ``node`` (None: the one this screen is about).

        Raises:
            CommandError: read-only, or no node to act on here.
        """
        from tui.screens.node_action import NodeActionScreen

        if self.read_only:
            raise CommandError("read-only: rigwatch takes no action on nodes in this session")
        target = target_of(self.fleet, self.screen, node, self.job_watch)
        ctx = node_context(self.audit_path, self.action_timeout_s, self.detector_limits)

        def done(rec: AuditRecord | None) -> None:
            if rec is not None:
                self.say(rec.line(), "information" if rec.outcome is Outcome.DONE
                         else "warning", ALERT_NOTICE_S)

        self.push_screen(NodeActionScreen(action, target, ctx), done)
