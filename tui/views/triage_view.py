"""What the triage screen shows, built from the fleet state: each host's checked facts, the
findings of the scope (the fleet or one host), its incidents' first failure and the steps'
reviews against the operator's record."""

from __future__ import annotations

from dataclasses import dataclass

from probes.analysis.findings import Finding, normal_topology
from probes.analysis.incident import (
    Diagnosis,
    HostClock,
    HostView,
    StepReview,
    TriageRecord,
    all_on_console,
    review,
)
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.fleet_state import FleetState, HostState

AHEAD_S = 60.0
"""A host's newest sample this far ahead of the console's clock runs a faster clock."""


def host_view(state: HostState) -> HostView:
    """What the triage steps say was checked on a host."""
    gpus = len(state.last.gpus) if state.last else 0
    promised = len(state.hello.facts.gpus) if state.hello else 0
    expected = max(promised, state.spec.expect_gpus or 0) or None
    streaming = state.last is not None and not state.status.is_down
    # the word only: the reason in full is the host's finding, in this same step
    down = None if streaming else state.status.value
    # a job-log finding also proves its log is followed (``incident.review`` counts it)
    return HostView(state.name, streaming, gpus, state.kernel_log_summary(),
                    tuple(state.spec.logs), expected_gpus=expected, down=down,
                    normal_topology=normal_topology(state.hello.topo_text)
                    if state.hello else None, skipped_samples=state.reach.relay_dropped,
                    skipped_lines=state.reach.relay_dropped_lines)


def host_clocks(states: list[HostState], now: float) -> dict[str, HostClock]:
    """Simulated hosts run their clocks faster than the console's: map them back.

    Only while they are ahead of ``now``: a replay's clock is the recording's own (agent)
    time, and there a simulated host's times are already on it.
    """
    return {s.name: HostClock(s.hello.ts, s.spec.speed) for s in states
            if s.hello is not None and s.spec.simulate and s.spec.speed != 1.0
            and s.last is not None and s.last.ts > now + AHEAD_S}


def scope_states(fleet: FleetState, host: str | None) -> list[HostState]:
    """The hosts triage is about: ``host`` alone (if the fleet has it), else every host."""
    if host is not None:
        return [fleet.hosts[host]] if host in fleet.hosts else []
    return list(fleet.hosts.values())


@dataclass(frozen=True)
class TriagePicture:
    """The scope's findings (agent time), their clocks and diagnosis, and what was checked."""

    findings: tuple[Finding, ...]
    clocks: dict[str, HostClock]
    diagnosis: Diagnosis
    hosts: tuple[HostView, ...]


def triage_picture(fleet: FleetState, host: str | None, now: float,
                   watch: JobWatch = NO_JOB) -> TriagePicture:
    """Everything the triage screen reads of the fleet for ``host`` (None: the fleet), the
    ranks of ``watch``'s job placed."""
    states = scope_states(fleet, host)
    names = [s.name for s in states]
    clocks = host_clocks(states, now)
    return TriagePicture(tuple(fleet.all_findings(names, watch)), clocks,
                         fleet.diagnosis(names, clocks=clocks, watch=watch),
                         tuple(host_view(s) for s in states))


def step_reviews(picture: TriagePicture, record: TriageRecord) -> list[StepReview]:
    """The four steps judged on agent time, shown on the console's clock."""
    return review(all_on_console(list(picture.findings), picture.clocks), list(picture.hosts),
                  record)
