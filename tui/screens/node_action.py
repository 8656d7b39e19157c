"""Drain or resume one Slurm node: the preview, the confirmation, the result.

The box shows exactly what will run (the command as argv, the reason as Slurm will keep it,
the evidence and its incident id), the node's state now, and for a lost GPU the reset plan
(never run).  Typing the node's name confirms; Esc cancels (nothing is attempted, nothing is
recorded).  A resume first reads the host again (``probes.outputs.recheck``): while the
drain's finding or anything critical holds it is refused, recorded as refused with what
still fails, and only a typed reason, recorded as an override, lets it go on.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import ClassVar, Literal

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from probes.actions.audit import AuditRecord, NodeAction, Outcome, last_drain
from probes.actions.errors import ActionError, AuditError
from probes.actions.evidence import Evidence
from probes.actions.gate import ResumeCheck
from probes.actions.slurm_node import NodeState, plain_answer, read_node
from probes.actions.take import NodePlan, carry_out, plan_drain, plan_resume, refuse
from probes.config.slurm_cli import SlurmError
from probes.outputs.recheck import recheck
from tui.node_actions import ActionContext, Target

Stage = Literal["reading", "confirm", "override", "running", "finished", "blocked"]


class NodeActionScreen(ModalScreen[AuditRecord | None]):
    """Returns the action's final record (None when nothing ran)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, action: NodeAction, target: Target, ctx: ActionContext) -> None:
        super().__init__()
        self.action = action
        self.target = target
        self.ctx = ctx
        self.stage: Stage = "reading"
        self.plan: NodePlan | None = None
        self.check: ResumeCheck | None = None
        self.cause: Evidence | None = None
        self.result: AuditRecord | None = None
        self.now: NodeState | None = None

    def compose(self) -> ComposeResult:
        """Title, preview, the node now, the reset plan, status, the typed confirmation."""
        verb = "Drain" if self.action is NodeAction.DRAIN else "Resume"
        t = self.target
        on = f" (host {t.host})" if t.host != t.node else ""
        with Vertical(id="node-box"):
            yield Label(f"{verb} Slurm node {t.node}{on}", classes="panel-title",
                        markup=False)
            with VerticalScroll(id="node-body"):
                yield Static(id="node-preview", markup=False)
                yield Static(id="node-now", markup=False)
                yield Static(id="node-plan", markup=False)
            yield Static(id="node-status")
            yield Input(id="node-input")
            yield Label(id="node-hint")

    def on_mount(self) -> None:
        """Start: a drain previews at once; a resume reads the host again first."""
        self._read_state()
        if self.action is NodeAction.DRAIN:
            try:
                self.plan = plan_drain(self.target.node, self.target.host, self.target.evidence)
            except ActionError as exc:
                self._block(exc.msg)
                return
            self._confirm()
        else:
            self._say(f"reading {self.target.host} again now (its GPUs and kernel log) …")
            self._input(None)
            self._recheck()

    # -- what is shown

    def _q(self, selector: str) -> Static:
        return self.query_one(selector, Static)

    def _say(self, text: str, level: str = "") -> None:
        markup = {"ok": "[bold $success]$t[/]", "bad": "[bold $sev-critical]$t[/]",
                  "warn": "[bold $sev-warning]$t[/]"}.get(level, "$t")
        with contextlib.suppress(NoMatches):
            self._q("#node-status").update(Content.from_markup(markup, t=text))

    def _input(self, placeholder: str | None, hint: str = "Esc cancels") -> None:
        with contextlib.suppress(NoMatches):
            box = self.query_one(Input)
            box.display = placeholder is not None
            box.value = ""
            if placeholder is not None:
                box.placeholder = placeholder
                box.disabled = False
                box.focus()
            self.query_one("#node-hint", Label).update(
                Content.from_markup("[$text-dim]$h[/]", h=hint))

    def _preview(self) -> None:
        if self.plan is not None:
            with contextlib.suppress(NoMatches):
                # its first line is the box's title
                self._q("#node-preview").update("\n".join(self.plan.preview()[1:]))

    def _show_plan(self) -> None:
        drained = self.now.drained if self.now is not None else None
        plan = self.target.reset_plan(drained) if self.action is NodeAction.DRAIN else None
        with contextlib.suppress(NoMatches):
            shown = self._q("#node-plan")
            shown.display = plan is not None
            if plan is not None:
                shown.update("\n".join(plan.lines()))

    def _confirm(self, override: bool = False) -> None:
        self.stage = "confirm"
        self._preview()
        self._show_plan()
        verb = "drain" if self.action is NodeAction.DRAIN else "resume"
        self._input(f"type {self.target.node} to {verb} it" + (" anyway" if override else ""),
                    "Enter runs it once the name matches · Esc cancels (nothing is recorded)")

    def _block(self, why: str) -> None:
        self.stage = "blocked"
        self._say(why, "bad")
        self._input(None, "Esc closes")

    # -- workers

    @work(thread=True, group="node-read", exit_on_error=False)
    def _read_state(self) -> None:
        try:
            state: NodeState | None = read_node(self.target.node, self.ctx.timeout_s)
            said = f"now: {state.line()}" if state is not None else ""
        except SlurmError as exc:
            state, said = None, f"now: {plain_answer(exc, self.target.node)}"
        self.app.call_from_thread(self._now_is, state, said)

    def _now_is(self, state: NodeState | None, said: str) -> None:
        self.now = state
        with contextlib.suppress(NoMatches):
            self._q("#node-now").update(said)
        self._show_plan()

    @work(group="node-recheck", exit_on_error=False)
    async def _recheck(self) -> None:
        records = await asyncio.to_thread(self._records)
        drain = last_drain(records, self.target.node)
        self.cause = drain.evidence if drain is not None else self.target.evidence
        if self.target.spec is None:
            check = ResumeCheck(self.target.host, False,
                                failure=f"no host of this console is Slurm node "
                                        f"{self.target.node}")
        else:
            check = await recheck(self.target.spec, self.cause, self.ctx.limits)
        self._judged(check)

    def _records(self) -> list[AuditRecord]:
        try:
            return [r for r in self.ctx.log.records() if isinstance(r, AuditRecord)]
        except AuditError:
            return []

    def _judged(self, check: ResumeCheck) -> None:
        self.check = check
        t = self.target
        if check.allowed:
            why = f"{check.judged}: the drain's finding is gone and nothing critical holds"
            self.plan = plan_resume(t.node, t.host, self.cause, cleared=why)
            self._say(why, "ok")
            self._confirm()
            return
        self.plan = plan_resume(t.node, t.host, self.cause)
        failing = check.still_failing()
        try:
            refuse(self.plan, self.ctx.log, "the fault still holds", still_failing=failing)
            recorded = "recorded as refused"
        except AuditError as exc:
            recorded = f"the refusal could not be recorded: {exc.msg}"
        self._preview()
        self._say(f"Resume refused ({recorded}); still failing:\n"
                  + "\n".join(f"  {line}" for line in failing), "bad")
        self.stage = "override"
        self._input("to resume anyway, type why (recorded as an override)",
                    "Enter goes on to the confirmation · Esc keeps the node drained")

    @work(thread=True, group="node-act", exit_on_error=False)
    def _carry_out(self, plan: NodePlan) -> None:
        try:
            rec: AuditRecord | None = carry_out(plan, self.ctx.log, self.ctx.timeout_s)
            said = ""
        except AuditError as exc:
            rec, said = None, f"not done: {exc.msg}"
        self.app.call_from_thread(self._finished, rec, said)

    def _finished(self, rec: AuditRecord | None, said: str) -> None:
        self.stage = "finished"
        self.result = rec
        if rec is None:
            self._say(said, "bad")
        else:
            done = rec.outcome is Outcome.DONE
            verb = "drained" if self.action is NodeAction.DRAIN else "resumed"
            head = f"done: {self.target.node} {verb}" if done else "failed"
            self._say(f"{head} — {rec.why}", "ok" if done else "bad")
            with contextlib.suppress(NoMatches):
                self._q("#node-now").update(f"now: {rec.verified.line()}"
                                            if rec.verified is not None else "")
        self._input(None, "recorded in the audit trail (rigwatch node audit) · Esc closes")

    # -- keys

    @on(Input.Submitted)
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if self.stage == "override":
            if not text:
                self._say("type why it should resume anyway, or Esc", "warn")
                return
            t = self.target
            check = self.check
            self.plan = plan_resume(t.node, t.host, self.cause, override=text,
                                    still_failing=check.still_failing() if check else ())
            self._say("an override: it is recorded with what still fails", "warn")
            self._confirm(override=True)
            return
        if self.stage != "confirm" or self.plan is None:
            return
        if text != self.target.node:
            self._say(f"that is not {self.target.node}: type the node's name exactly, or Esc",
                      "warn")
            self.query_one(Input).value = ""
            return
        self.stage = "running"
        verb = "draining" if self.action is NodeAction.DRAIN else "resuming"
        self._say(f"{verb} {self.target.node} …")
        self.query_one(Input).disabled = True
        self._carry_out(self.plan)

    def action_close(self) -> None:
        """Close, unless the command is running (it ends within its timeout)."""
        if self.stage == "running":
            self._say("the command is running; it ends within its timeout", "warn")
            return
        self.dismiss(self.result)
