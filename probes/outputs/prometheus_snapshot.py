"""``rigwatch snapshot --prometheus URL`` and ``preflight --prometheus URL``: the fleet as
Prometheus holds it, judged by the same core as a live console.

The detectors' window is read with ``query_range`` first and folded into each host's history
before the newest values, so a leak that began hours ago is in the first snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probes.analysis.detectors import run_detectors
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.outputs.snapshot import SNAPSHOT_VERSION, _plain
from probes.transport.prometheus_backend import prometheus_specs
from probes.transport.prometheus_source import (
    PromFleetOptions,
    PromFleetSource,
    no_kernel_log,
    totals_of,
)
from probes.transport.session import OnceResult


@dataclass
class PromRead:
    """What one read of Prometheus gave: the folded fleet and what it cost."""

    fleet: FleetState
    results: list[OnceResult]
    queries: int
    seconds: float
    taken_at: float


async def read_fleet(options: PromFleetOptions, limits: DetectorLimits = DEFAULT_LIMITS,
                     at: float | None = None,
                     inventory: Mapping[str, HostSpec] | None = None) -> PromRead:
    """Discover, read the history window and the values at ``at`` (None: now), and fold
    them into a fleet state as the console would.

    Raises:
        PrometheusError: Prometheus cannot answer.
    """
    started = time.perf_counter()
    source = PromFleetSource(options)
    ts = time.time() if at is None else at
    disc = await source.discover(ts)
    history, events = await source.read_history(ts)
    _, samples, now_events = await source.read_now(ts)
    events += now_events
    specs = prometheus_specs(disc.hosts, options.refresh_s, inventory=inventory)
    fleet = FleetState(specs, limits)
    results = []
    for spec in specs:
        host = spec.name
        past = history.get(host, [])
        hello = disc.hello(host, ts - options.history_s, totals_of(past))
        fleet.apply(host, hello, ts)
        fleet.apply(host, no_kernel_log(ts), ts)
        for s in past:
            fleet.apply(host, s, ts)
        result = OnceResult(spec, hello=hello, sample=samples.get(host))
        if result.sample is None:
            result.failure = "no series in Prometheus now (exporter down or not scraped)"
        results.append(result)
    for host, ev in events:
        fleet.apply(host, ev, ts)
    for host, s in samples.items():
        fleet.apply(host, s, ts)
    fleet.scan_logs()
    return PromRead(fleet, results, source.client.queries, time.perf_counter() - started, ts)


def findings_of(read: PromRead, host: str) -> list[Finding]:
    """The host's findings with every detector run on its whole window now (the console
    runs each when due; a snapshot has one moment, so all are due)."""
    state = read.fleet.hosts[host]
    merged = {f.key: f for f in state.findings()}
    if state.last is not None:
        merged.update({f.key: f for f in run_detectors(host, state.history, state.hello,
                                                       state.last, state.limits.detectors)})
    return sorted(merged.values(), key=lambda f: (-f.severity.rank, f.code))


async def prometheus_snapshot(options: PromFleetOptions,
                              limits: DetectorLimits = DEFAULT_LIMITS,
                              at: float | None = None,
                              inventory: Mapping[str, HostSpec] | None = None
                              ) -> dict[str, Any]:
    """The snapshot document (``rigwatch snapshot --json``'s shape) read from Prometheus
    (hosts the inventory names keep its ``expect_gpus``)."""
    read = await read_fleet(options, limits, at, inventory)
    hosts = []
    for r in read.results:
        state = read.fleet.hosts[r.spec.name]
        hosts.append({
            "name": r.spec.name, "tags": list(r.spec.tags), "ok": r.failure is None,
            "error": r.failure, "hello": _plain(r.hello), "sample": _plain(r.sample),
            "events": _plain(list(state.events)), "probe_errors": [],
            "findings": _plain(findings_of(read, r.spec.name)), "garbled_lines": 0})
    return {"version": SNAPSHOT_VERSION, "taken_at": read.taken_at, "demo": False,
            "source": {"prometheus": options.endpoint.url, "queries": read.queries,
                       "seconds": round(read.seconds, 3)},
            "hosts": hosts}
