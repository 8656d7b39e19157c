"""What the preflight screen shows, built from the fleet state: every host's live state as
preflight's input, the checks' results by host, one table line per host and the summary."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from probes.analysis.limits import PreflightLimits
from probes.analysis.preflight import (
    CheckResult,
    CheckVerdict,
    HostInput,
    by_host,
    check_fleet,
    worst,
)
from probes.fleet_state import FleetState, HostState, HostStatus
from widgets.preflight_table import PreflightLine


def host_input(state: HostState) -> HostInput:
    """What preflight reads from one host's live state: as it is now, not at its hello."""
    failure = None
    if state.status.is_down:
        failure = state.reach.down_reason or state.status.value
    elif state.status is HostStatus.STALE or (state.hello is None
                                             and state.status is not HostStatus.CONNECTING):
        failure = state.status.value
    return HostInput(state.name, state.hello, state.last, expect_gpus=state.spec.expect_gpus,
                     failure=failure,
                     findings=tuple(state.findings()) if state.hello is not None else (),
                     ports=state.fabric.ports if state.fabric.ts is not None else None)


def line_for(host: str, checks: list[CheckResult]) -> PreflightLine:
    """The table line of one host's results."""
    fails = [c for c in checks if c.verdict is CheckVerdict.FAIL]
    warns = [c for c in checks if c.verdict is CheckVerdict.WARN]
    problems = fails or warns
    first = f"{problems[0].check}: {problems[0].detail}" if problems else ""
    return PreflightLine(host, worst(checks), len(fails), len(warns), first)


def summary(results: list[CheckResult]) -> Content:
    """``8 hosts: 5 pass, 0 warn, 3 fail · odd one out: gpu-b01 (driver 535.183.01)``."""
    grouped = by_host(results)
    counts = {v: 0 for v in CheckVerdict}
    for checks in grouped.values():
        counts[worst(checks)] += 1
    odd = [r for r in results if r.check.startswith("consistent-")]
    text = Content.from_markup(
        "[bold]$n hosts:[/] [$status-streaming]$p pass[/], [$sev-warning]$w warn[/], "
        "[$sev-critical]$f fail[/]", n=str(len(grouped)), p=str(counts[CheckVerdict.PASS]),
        w=str(counts[CheckVerdict.WARN]), f=str(counts[CheckVerdict.FAIL]))
    if odd:
        hosts: dict[str, list[str]] = {}
        for r in odd:
            hosts.setdefault(r.host, []).append(f"{r.check.removeprefix('consistent-')} "
                                                f"{r.value}")
        shown = "; ".join(f"{h} ({', '.join(v)})" for h, v in hosts.items())
        text += Content.from_markup(" · [bold]odd one out:[/] $s", s=shown)
    return text


@dataclass(frozen=True)
class PreflightPicture:
    """Every host's checks, its table line, and the fleet's summary."""

    results: dict[str, list[CheckResult]]
    lines: tuple[PreflightLine, ...]
    summary: Content


def preflight_picture(fleet: FleetState, limits: PreflightLimits | None = None
                      ) -> PreflightPicture:
    """Every host against the checklist (``limits``, default: the fleet's)."""
    results = check_fleet([host_input(s) for s in fleet.hosts.values()],
                          limits or fleet.limits.preflight, fleet.limits.detectors)
    grouped = by_host(results)
    return PreflightPicture(grouped, tuple(line_for(name, checks)
                                           for name, checks in grouped.items()),
                            summary(results))
