"""``rigwatch snapshot``: one sample per host as JSON, for scripts (no terminal needed)."""

from __future__ import annotations

import dataclasses
import time
from enum import Enum
from typing import Any

from probes.analysis.findings import log_findings, sample_findings
from probes.config.fleet import HostSpec
from probes.rules.logrules.live import LiveLogScanner
from probes.transport.session import OnceResult, collect_all

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


def host_entry(result: OnceResult) -> dict[str, Any]:
    """One host's part of the snapshot."""
    spec = result.spec
    findings = []
    if result.sample is not None:
        findings = sample_findings(spec.name, result.hello, result.sample)
    scanner = LiveLogScanner()
    for ev in result.events:
        scanner.add(ev.source, ev.line, ev.ts)
    findings.extend(log_findings(spec.name, result.hello, scanner.scan()))
    return {
        "name": spec.name,
        "tags": list(spec.tags),
        "ok": result.failure is None,
        "error": result.failure,
        "hello": _plain(result.hello),
        "sample": _plain(result.sample),
        "events": _plain(result.events),
        "probe_errors": _plain(result.errors),
        "findings": _plain(findings),
        "garbled_lines": result.garbled,
    }


async def take_snapshot(specs: list[HostSpec], *, demo: bool = False) -> dict[str, Any]:
    """Collect one hello and one sample from every host concurrently."""
    results = await collect_all(specs, MAX_CONCURRENT)
    return {"version": SNAPSHOT_VERSION, "taken_at": time.time(), "demo": demo,
            "hosts": [host_entry(r) for r in results]}
