"""``rigwatch snapshot``: one sample per host as JSON, for scripts (no terminal needed)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from probes.analysis.findings import Finding
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.analysis.limits import DetectorLimits
from probes.analysis.onsets import clock_of, onset
from probes.analysis.preflight import HostInput
from probes.fleet_state import FleetState
from probes.outputs.fold_once import fold_once
from probes.outputs.read_once import FleetRead, Fold, read_once
from probes.sources.base import Backend
from probes.transport.session import OnceResult
from probes.triage import Severity

SNAPSHOT_VERSION = 1


def _plain(value: Any) -> Any:
    """Dataclasses, enums and tuples as JSON-ready values. A field the constructor does not
    take (the wire's decode state on a sample) is not data, and is left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.init}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def preflight_inputs(read: FleetRead) -> list[HostInput]:
    """What preflight judges of each host of one read: hello, newest sample and findings."""
    return [HostInput(r.spec.name, r.hello, r.sample, expect_gpus=r.spec.expect_gpus,
                      failure=r.failure if r.hello is None else None,
                      findings=tuple(read.fleet.all_findings([r.spec.name])),
                      ports=r.fabric.ports if r.fabric is not None else None)
            for r in read.results]


def host_entry(result: OnceResult, fleet: FleetState | None = None,
               watch: JobWatch = NO_JOB) -> dict[str, Any]:
    """One host's part of the snapshot (its findings as the console would judge them, the
    ranks of ``watch``'s job placed)."""
    spec = result.spec
    fleet = fleet if fleet is not None else fold_once([result])
    findings = fleet.all_findings([spec.name], watch)
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


async def take_snapshot(backend: Backend, *, demo: bool = False,
                        keep: list[OnceResult] | None = None, fold: Fold | None = None,
                        limits: DetectorLimits | None = None,
                        about: Callable[[], Mapping[str, Any]] | None = None,
                        watch: JobWatch = NO_JOB) -> dict[str, Any]:
    """Read ``backend`` once (``read_once``: a simulated host after its history, a
    Prometheus after its detectors' window, a recording to its end), judge it as the
    console does, and name the first failure; ``keep`` receives the typed results as well,
    ``fold`` folds them (default: ``fold_once`` with ``limits``); ``about`` says where the
    numbers came from (the document's ``source``, with the read's seconds); ``watch``: the
    job the read is about."""
    read = await read_once(backend, limits=limits, fold=fold)
    if keep is not None:
        keep.extend(read.results)
    fleet = read.fleet
    first = fleet.diagnosis(watch=watch).first
    doc: dict[str, Any] = {
        "version": SNAPSHOT_VERSION, "taken_at": read.taken_at, "demo": demo,
        "first_failure": first.to_json() if first is not None else None,
        "do_now": first.do_now if first is not None else None,
        "hosts": [host_entry(r, fleet, watch) for r in read.results]}
    if about is not None:
        doc["source"] = {**about(), "seconds": round(read.seconds, 3)}
    return doc


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
