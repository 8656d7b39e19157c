"""What ``D`` (drain) and ``U`` (resume) act on in the console, and the context they need.

The node is the one the screen is about: the host screen's host, the job view's failing rank
(the job's first failure names its node), triage's first failure (its culprit's host, else
its root's).  The evidence is that screen's incident, as ``first_failure`` decided it.  A host
maps to its Slurm node by ``slurm_node:`` in the inventory, else by its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from probes.actions.audit import AuditLog, default_audit_path
from probes.actions.errors import ActionError
from probes.actions.evidence import Evidence
from probes.actions.nodes import check_node, host_of, node_of
from probes.actions.reset_plan import ResetPlan, reset_plan
from probes.actions.slurm_node import ACTION_TIMEOUT_S
from probes.analysis.first_failure import FirstFailure
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.samples import GpuInfo, GpuSample
from tui.commands import CommandError
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.triage import TriageScreen

if TYPE_CHECKING:
    from textual.screen import Screen

NODE_ACTIONS = frozenset({"node_drain", "node_resume"})
"""The app's actions that change a node: gone from keys, palette and help when read-only."""
ACTION_SCREENS = (HostScreen, JobScreen, TriageScreen)
"""The screens whose subject is a node to act on."""


@dataclass(frozen=True)
class Target:
    """The node an action is about, its host, and the incident that names it."""

    node: str
    host: str
    spec: HostSpec | None
    first: FirstFailure | None
    evidence: Evidence | None
    gpu_info: GpuInfo | None = None
    """The evidence's GPU as the host's hello listed it."""
    gpu_sample: GpuSample | None = None
    """The evidence's GPU in the host's newest sample."""

    def reset_plan(self, drained: bool | None) -> ResetPlan | None:
        """A GPU reset's plan, for a lost GPU (shown, never run)."""
        return reset_plan(self.evidence, self.node, self.gpu_info, self.gpu_sample, drained)


@dataclass(frozen=True)
class ActionContext:
    """What an action screen needs of the console (no reference to the app itself)."""

    log: AuditLog
    timeout_s: float = ACTION_TIMEOUT_S
    limits: DetectorLimits | None = None


def context(audit_path: Path | None, timeout_s: float,
            limits: DetectorLimits | None) -> ActionContext:
    """The audit trail at ``audit_path`` (default: the user's data dir) and the limits."""
    return ActionContext(AuditLog(audit_path or default_audit_path()), timeout_s, limits)


def _host_of_screen(fleet: FleetState, screen: Screen[object], watch: JobWatch
                    ) -> tuple[str | None, FirstFailure | None, str]:
    """(host, incident, why not) for the screen on show."""
    if isinstance(screen, HostScreen):
        return screen.host, fleet.diagnosis([screen.host], watch=watch).first, ""
    if isinstance(screen, JobScreen):
        p = screen.picture
        first = p.first if p is not None else None
        c = first.culprit if first is not None else None
        if first is None:
            return None, None, f"job {screen.job} has no failure to act on yet"
        if c is None or not c.known or not c.host:
            return None, first, (f"job {screen.job}'s failing rank is not placed on a host: "
                                 "find it (Do now), open its host and press D there")
        return c.host, first, ""
    if isinstance(screen, TriageScreen):
        names = [screen.host] if screen.host is not None else None
        first = fleet.diagnosis(names, watch=watch).first
        if first is None:
            return screen.host, None, "triage found nothing to act on"
        c = first.culprit
        host = c.host if c is not None and c.known and c.host else first.finding.host
        return host, first, ""
    return None, None, "open a host, a job (:job ID) or triage to act on a node"


def target_of(fleet: FleetState, screen: Screen[object], node: str | None = None,
              watch: JobWatch = NO_JOB) -> Target:
    """The node to act on: ``node`` when named (``:drain n3``), else the screen's (its
    incident read with ``watch``'s job's ranks placed).

    Raises:
        CommandError: no node can be named here, or ``node`` is not a node name.
    """
    specs = [s.spec for s in fleet.hosts.values()]
    if node is not None:
        try:
            check_node(node)
        except ActionError as exc:
            raise CommandError(str(exc)) from None
        spec = host_of(node, specs)
        host = spec.name if spec is not None else node
        first = fleet.diagnosis([host], watch=watch).first if host in fleet.hosts else None
    else:
        found, first, why = _host_of_screen(fleet, screen, watch)
        if found is None:
            raise CommandError(why)
        host = found
        state = fleet.hosts.get(host)
        spec = state.spec if state is not None else None
        node = node_of(spec) if spec is not None else host
    state = fleet.hosts.get(host)
    facts = state.hello.facts if state is not None and state.hello is not None else None
    evidence = Evidence.of_incident(first, facts) if first is not None else None
    info = sample = None
    if evidence is not None and evidence.gpu is not None and state is not None:
        info = next((g for g in facts.gpus if g.index == evidence.gpu), None) if facts \
            else None
        sample = next((g for g in state.last.gpus if g.index == evidence.gpu), None) \
            if state.last is not None else None
    return Target(node, host, spec, first, evidence, info, sample)
