"""One read of a fleet, judged as the console judges it: every host's hello, log lines,
samples (its past, then its newest) folded into a ``FleetState`` and every detector run, so
``snapshot`` and ``preflight`` give the same findings, ranks and first failure as the
console's triage on the same data.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from probes.analysis.detectors import run_detectors
from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.transport.session import OnceResult
from probes.wire.events import Connected, Disconnected
from probes.wire.samples import LogEvent


def fold_once(results: Sequence[OnceResult], *, limits: DetectorLimits | None = None,
              more_lines: Mapping[str, Sequence[LogEvent]] | None = None,
              now: float | None = None) -> FleetState:
    """The console's state after one read of each host (the job a read is about is not the
    fold's: its reads take it, ``probes.analysis.job_watch``).

    Args:
        results: each host's ``--once`` (or lived-through) result, in fleet order.
        limits: the operator's detector limits.
        more_lines: log lines read elsewhere (a job's log on a shared filesystem, read on
            this machine) by the host they belong to; a source the host's own agent already
            sent is not folded twice.
        now: the console's time of the read (default: now).
    """
    at = time.time() if now is None else now
    fleet = FleetState([r.spec for r in results], limits)
    for r in results:
        name = r.spec.name
        fleet.apply(name, Connected(at), at)
        if r.clock is not None:
            fleet.apply(name, r.clock, at)
        if r.hello is not None:
            fleet.apply(name, r.hello, at)
        if r.log_source is not None:
            fleet.apply(name, r.log_source, at)
        for state in r.job_logs:
            fleet.apply(name, state, at)
        for e in r.errors:
            fleet.apply(name, e, at)
        sent = {ev.source for ev in r.events}
        for ev in r.events:
            fleet.apply(name, ev, at)
        for other in r.others:
            fleet.apply(name, other, at)
        for ev in (more_lines or {}).get(name, ()):
            if ev.source not in sent:
                fleet.apply(name, ev, at)
        if r.fabric is not None:
            fleet.apply(name, r.fabric, at)
        for past in r.history:
            fleet.apply(name, past, at)
        if r.sample is not None:
            fleet.apply(name, r.sample, at)
        elif r.failure is not None:
            fleet.apply(name, Disconnected(at, r.failure, None, None, _kind(r)), at)
    fleet.scan_logs()  # the owner's write: the queued log lines judged before any read
    detect_now(fleet)
    return fleet


def detect_now(fleet: FleetState) -> None:
    """Every detector on every host's whole read: the console runs each when due, a read
    has one moment, so all are due."""
    for name, state in fleet.hosts.items():
        if state.last is not None:
            state.findings_kept.set_detected(run_detectors(
                name, state.history, state.hello, state.last, state.limits.detectors))


def _kind(r: OnceResult) -> DisconnectKind:
    """A host that said hello and then failed had its agent fail; else it was not reached."""
    return DisconnectKind.AGENT_FAILED if r.hello is not None else DisconnectKind.DOWN


def specs_of(results: Sequence[OnceResult]) -> list[HostSpec]:
    """The hosts read, in order."""
    return [r.spec for r in results]
