"""``rigwatch snapshot``: one sample per host as JSON, for scripts (no terminal needed)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.onsets import clock_of, onset
from probes.analysis.preflight import HostInput
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.outputs.fold_once import fold_once
from probes.transport.host_clock import clocked
from probes.transport.session import (
    ONCE_CONCURRENCY,
    ONCE_TIMEOUT_S,
    OnceResult,
    collect_once,
    keep_log_source,
    run_session,
)
from probes.triage import Severity
from probes.wire.events import ClockOffset, Disconnected, SessionItem
from probes.wire.samples import Hello, HostSample, LogEvent, LogSourceState, ProbeError

SNAPSHOT_VERSION = 1
MAX_CONCURRENT = 64


def _plain(value: Any) -> Any:
    """Dataclasses, enums and tuples as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


SIM_HISTORY_ARG = "--sim-history"
LIVED_ARGS = ("--count", "1", "--fast")
"""A simulated host with a simulated past runs through it, then one live sample, and exits:
``--once`` would answer with the first instant of its run, before any trouble began."""


def lived(spec: HostSpec) -> HostSpec | None:
    """The spec that runs a simulated host through its ``--sim-history`` to now, or None
    for a host whose ``--once`` sample is already its present (a real one)."""
    if not spec.simulate or SIM_HISTORY_ARG not in spec.extra_args:
        return None
    return dataclasses.replace(spec, extra_args=spec.extra_args + LIVED_ARGS)


async def collect_now(spec: HostSpec, timeout_s: float = ONCE_TIMEOUT_S) -> OnceResult:
    """One host's hello, newest sample and log events as of now.

    A real host answers one ``--once`` run.  A simulated host with a history is streamed
    through it (the same session the console runs) until its agent ends: its newest sample
    and its log lines are then those the console shows at start, a lost GPU included.
    """
    run = lived(spec)
    if run is None:
        return await collect_once(spec, timeout_s)
    result = OnceResult(spec)
    ended = asyncio.Event()

    def keep(_host: str, item: SessionItem) -> None:
        if isinstance(item, ClockOffset):
            result.clock = item
        elif isinstance(item, Disconnected):
            if result.sample is None:
                result.failure = item.reason
            ended.set()
        elif isinstance(item, Hello):
            result.hello = item
        elif isinstance(item, HostSample):
            result.sample = item
        elif isinstance(item, LogEvent):
            result.events.append(item)
        elif isinstance(item, ProbeError):
            result.errors.append(item)
        elif isinstance(item, LogSourceState):
            keep_log_source(result, item)

    session = asyncio.create_task(run_session(run, clocked(keep)))
    try:
        await asyncio.wait_for(ended.wait(), timeout_s)
    except asyncio.TimeoutError:
        if result.sample is None:
            result.failure = f"no complete answer within {timeout_s:g} s"
    finally:
        session.cancel()
        await asyncio.gather(session, return_exceptions=True)
    return result


async def collect_all_now(specs: list[HostSpec],
                          concurrency: int = ONCE_CONCURRENCY) -> list[OnceResult]:
    """``collect_now`` for every host, ``concurrency`` at a time, in the specs' order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(spec: HostSpec) -> OnceResult:
        async with gate:
            return await collect_now(spec)

    return list(await asyncio.gather(*(one(s) for s in specs)))


def findings_now(result: OnceResult,
                 limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """What the core finds in one host's read: its sample, its log lines, its state."""
    return fold_once([result], limits=limits).all_findings()


def preflight_inputs(results: list[OnceResult],
                     limits: DetectorLimits = DEFAULT_LIMITS) -> list[HostInput]:
    """What preflight judges of each host now: hello, newest sample and findings."""
    fleet = fold_once(results, limits=limits)
    return [HostInput(r.spec.name, r.hello, r.sample, expect_gpus=r.spec.expect_gpus,
                      failure=r.failure if r.hello is None else None,
                      findings=tuple(fleet.all_findings([r.spec.name])),
                      ports=r.fabric.ports if r.fabric is not None else None)
            for r in results]


def host_entry(result: OnceResult, fleet: FleetState | None = None) -> dict[str, Any]:
    """One host's part of the snapshot (its findings as the console would judge them)."""
    spec = result.spec
    fleet = fleet if fleet is not None else fold_once([result])
    findings = fleet.all_findings([spec.name])
    clock = result.clock
    return {
        "name": spec.name,
        "tags": list(spec.tags),
        "ok": result.failure is None,
        "error": result.failure,
        "hello": _plain(result.hello),
        "sample": _plain(result.sample),
        "events": _plain(result.events),
        "probe_errors": _plain(result.errors),
        "job_logs": _plain(result.job_logs),
        "findings": [finding_json(f) for f in findings],
        "clock_offset_s": clock.offset_s if clock is not None else None,
        "garbled_lines": result.garbled,
    }


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as ``snapshot --json`` writes it (the dataclass's fields, and its onset)."""
    out: dict[str, Any] = _plain(f)
    if f.ts is not None:
        out["onset"] = onset(f)
        out["clock"] = clock_of(f).value
    return out


async def take_snapshot(specs: list[HostSpec], *, demo: bool = False,
                        keep: list[OnceResult] | None = None,
                        fold: Callable[[list[OnceResult]], FleetState] | None = None
                        ) -> dict[str, Any]:
    """Collect every host's hello and newest sample concurrently (a simulated host after
    its history: the snapshot shows what the console would, not the run's first instant),
    judge them as the console does, and name the first failure; ``keep`` receives the typed
    results as well, ``fold`` folds them (default: ``fold_once`` of the fleet)."""
    results = await collect_all_now(specs, MAX_CONCURRENT)
    if keep is not None:
        keep.extend(results)
    fleet = fold(results) if fold is not None else fold_once(results)
    first = fleet.diagnosis().first
    return {"version": SNAPSHOT_VERSION, "taken_at": time.time(), "demo": demo,
            "first_failure": first.to_json() if first is not None else None,
            "do_now": first.do_now if first is not None else None,
            "hosts": [host_entry(r, fleet) for r in results]}


def job_finding_json(f: Finding, job: str, nodes: tuple[str, ...]) -> dict[str, Any]:
    """A finding of a job's as ``snapshot --slurm-job --json`` lists it: what and where,
    ``rank`` and the rank's ``host``, ``rank_gpu``, ``gpu_serial``, ``bus_id`` where a
    witness placed it (``placed_by``), ``log_read_on`` for a line of the job's log."""
    row: dict[str, Any] = {"step": f.step.value, "code": str(f.code),
                           "severity": f.severity.value, "summary": f.summary,
                           "job": job}
    for key, value in (("xid", f.xid), ("evidence", f.evidence), ("action", f.action),
                       ("source", f.source), ("line", f.line), ("count", f.count)):
        if value is not None:
            row[key] = value
    if f.ts is not None:
        row["onset"] = onset(f)
        row["time"] = f.ts
        row["clock"] = clock_of(f).value
    for k, v in f.extra.items():
        row.setdefault(k, v)
    ranks = row.get("ranks")
    if "rank" not in row and isinstance(ranks, list) and len(ranks) == 1:
        row["rank"] = ranks[0]  # one rank named: it is the finding's rank
    from_log = (f.source or "").startswith("job:")
    placed = f.details.rank_host
    if placed is not None:
        row["host"] = placed
        for key, value in (("rank_gpu", f.details.rank_gpu), ("gpu_serial", f.details.rank_serial),
                           ("bus_id", f.details.rank_bus_id)):
            if value is not None:
                row[key] = value
    elif from_log:
        row["host"] = nodes[0] if len(nodes) == 1 else None  # a one-node job: that node
    else:
        row["host"] = f.host
        if f.gpu is not None:
            row["rank_gpu"] = f.gpu
    if from_log:
        row["log_read_on"] = f.host
    return row


SEVERITY_RANK = {s.value: s.rank for s in Severity}


def snapshot_line(host: Mapping[str, Any], expect_gpus: int | None) -> str:
    """``gpu-b02   7/8 GPUs  3 findings  critical: GPU 6 (0000:ba:00.0) is missing…``:
    the GPUs answering of those promised, and the worst finding, never ``ok`` beside one."""
    sample = host["sample"] or {}
    listed = len(((host["hello"] or {}).get("facts") or {}).get("gpus") or [])
    promised = max(expect_gpus or 0, listed)
    answering = sum(1 for g in sample.get("gpus", []) if g.get("state") in (None, "ok"))
    gpus = f"{answering}/{promised}" if promised and answering != promised else str(answering)
    found = host["findings"]
    n = len(found)
    if not host["ok"]:
        state = f"FAILED: {host['error']}"
    elif found:
        worst = max(found, key=lambda f: SEVERITY_RANK.get(f["severity"], 0))
        state = f"{worst['severity']}: {worst['summary']}"
    else:
        state = "ok"
    return (f"{host['name']:<20} {gpus:>5} GPUs  {n:>2} "
            f"{'finding ' if n == 1 else 'findings'}  {state}")
