"""Taking a node action: the plan an operator confirms, then attempted → command → state read
back → done (or failed), each step on the audit trail before the next.

The plan is exactly what will run: the preview shows its argv, its reason as Slurm will keep
it, and its evidence.  :func:`carry_out` records the attempt (``fsync``'d) before
``scontrol`` runs, runs it with a timeout, reads the node back with ``sinfo`` and records
the outcome with the state Slurm showed, before it returns.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field, replace

from probes.actions.audit import Actor, AuditLog, AuditRecord, NodeAction, Outcome, new_action_id
from probes.actions.evidence import Evidence, drain_reason
from probes.actions.nodes import check_node
from probes.actions.slurm_node import (
    ACTION_TIMEOUT_S,
    NodeState,
    drain_argv,
    plain_answer,
    read_node,
    resume_argv,
)
from probes.config.slurm_cli import SlurmError, run_slurm
from probes.wire.sanitize import clean_text


@dataclass(frozen=True)
class NodePlan:
    """One action as previewed and confirmed: what runs is what was shown."""

    action: NodeAction
    node: str
    host: str | None
    reason: str
    """A drain's reason as Slurm keeps it; a resume's why (the override's reason)."""
    evidence: Evidence | None = None
    override: bool = False
    still_failing: tuple[str, ...] = ()
    via: str = "console"
    argv: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        check_node(self.node)
        argv = (drain_argv(self.node, self.reason) if self.action is NodeAction.DRAIN
                else resume_argv(self.node))
        object.__setattr__(self, "argv", tuple(argv))

    @property
    def command_text(self) -> str:
        """The command as a shell would need it typed (display only: it runs as argv)."""
        return shlex.join(self.argv)

    def preview(self) -> list[str]:
        """What will be done, said before it is confirmed."""
        on = f" (host {self.host})" if self.host and self.host != self.node else ""
        out = [f"{self.action.value.capitalize()} Slurm node {self.node}{on}"]
        if self.evidence is not None:
            inc = f", incident {self.evidence.incident}" if self.evidence.incident else ""
            out.append(f"evidence: {self.evidence.what()}{inc}"
                       + (f" — {self.evidence.summary}" if self.evidence.summary else ""))
        if self.action is NodeAction.DRAIN:
            out.append(f"reason Slurm keeps (sinfo -R): {self.reason}")
            out.append("running jobs finish; no new job starts on it until it is resumed")
        else:
            out.append("new jobs may start on it again")
            if self.reason and not self.override:
                out.append(f"why: {self.reason}")
            if self.override:
                out.append(f"OVERRIDE (recorded): {self.reason}")
                out += [f"still failing: {line}" for line in self.still_failing]
        out.append(f"command: {self.command_text}")
        return out


def plan_drain(node: str, host: str | None, evidence: Evidence | None,
               text: str | None = None, via: str = "console") -> NodePlan:
    """A drain of ``node`` on ``evidence`` (the console), or with the operator's ``text``.

    Raises:
        ActionError: a bad node name, or a reason Slurm cannot keep whole.
    """
    return NodePlan(NodeAction.DRAIN, check_node(node), host, drain_reason(evidence, text),
                    evidence, via=via)


def plan_resume(node: str, host: str | None, evidence: Evidence | None = None, *,
                cleared: str = "", override: str | None = None,
                still_failing: tuple[str, ...] = (), via: str = "console") -> NodePlan:
    """A resume of ``node``: because the recheck ``cleared`` it, or, with ``override``, the
    operator's reason to resume although ``still_failing`` holds."""
    why = clean_text(" ".join((override if override is not None else cleared).split()))[:500]
    return NodePlan(NodeAction.RESUME, check_node(node), host, why, evidence,
                    override=override is not None, still_failing=still_failing, via=via)


def _record(plan: NodePlan, outcome: Outcome, actor: Actor, action_id: str,
            **more: object) -> AuditRecord:
    base = AuditRecord(time.time(), action_id, outcome, plan.action, plan.node, actor,
                       plan.reason, plan.host, plan.evidence, plan.argv,
                       override=plan.override, still_failing=plan.still_failing, via=plan.via)
    return replace(base, **more)  # type: ignore[arg-type]


def refuse(plan: NodePlan, log: AuditLog, why: str, actor: Actor | None = None,
           still_failing: tuple[str, ...] | None = None) -> AuditRecord:
    """Record that ``plan`` was refused (not confirmed, the fault still holds …): nothing
    ran.

    Raises:
        AuditError: the record cannot be written.
    """
    more: dict[str, object] = {"why": clean_text(why)}
    if still_failing is not None:
        more["still_failing"] = still_failing
    rec = _record(plan, Outcome.REFUSED, actor or Actor.here(), new_action_id(), **more)
    log.append(rec)
    return rec


def carry_out(plan: NodePlan, log: AuditLog, timeout_s: float = ACTION_TIMEOUT_S,
              actor: Actor | None = None) -> AuditRecord:
    """Run a confirmed plan; the record of its outcome (already on the trail).

    Raises:
        AuditError: the attempt could not be recorded (then nothing ran), or the outcome
            could not (then the attempt is on the trail, and ``sinfo`` tells the rest).
    """
    who = actor or Actor.here()
    action_id = new_action_id()
    log.append(_record(plan, Outcome.ATTEMPTED, who, action_id))
    try:
        out = run_slurm(list(plan.argv), timeout_s, what="scontrol update")
    except SlurmError as exc:
        rec = _record(plan, Outcome.FAILED, who, action_id, exit_status=exc.exit_status,
                      output=exc.msg, why=plain_answer(exc, plan.node))
        log.append(rec)
        return rec
    seen, trouble = _read_back(plan.node, timeout_s)
    done = seen is not None and seen.drained == (plan.action is NodeAction.DRAIN)
    if seen is None:
        why = f"Slurm took the command, but its state could not be read back: {trouble}"
    elif done:
        why = f"Slurm shows {seen.line()}"
    else:
        why = f"Slurm took the command, but shows {seen.line()}"
    rec = _record(plan, Outcome.DONE if done else Outcome.FAILED, who, action_id,
                  exit_status=0, output=clean_text(out.decode("utf-8", "replace")),
                  verified=seen, why=why)
    log.append(rec)
    return rec


def _read_back(node: str, timeout_s: float) -> tuple[NodeState | None, str]:
    try:
        return read_node(node, timeout_s), ""
    except SlurmError as exc:
        return None, plain_answer(exc, node)
