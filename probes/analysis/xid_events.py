"""An Xid reported as a number (``XidEvent``: DCGM's last-Xid field) as a finding: the same
code, catalog entry, severity and action as the kernel line's ``xid`` finding, with the GPU
it names, and the metric as its evidence (there is no line to quote)."""

from __future__ import annotations

from probes.analysis.findings import Finding
from probes.rules.logrules.kernel.xid import catalog_action
from probes.rules.xid_catalog import lookup
from probes.triage import Code, Step
from probes.wire.events import XidEvent


def xid_event_finding(host: str, event: XidEvent) -> Finding:
    """The ``xid`` finding of one reported Xid (the catalog's severity: a number carries
    none of the line's own words that refine it)."""
    info = lookup(event.xid)
    where = f"GPU {event.gpu}" + (f" ({event.bus_id})" if event.bus_id else "")
    extra: dict[str, object] = {"xid_name": info.name, "category": info.category,
                                "investigate": info.investigate}
    if event.uuid:
        extra["uuid"] = event.uuid
    if event.bus_id:
        extra["bus_id"] = event.bus_id
    return Finding(Step.SYSLOG, Code.XID, info.severity,
                   f"Xid {info.code} ({info.name}) on {where}", host, gpu=event.gpu,
                   xid=event.xid, evidence=f"{event.metric} = {event.xid} on {where}, "
                   f"reported by {event.source}", ts=event.ts, action=catalog_action(info),
                   source=event.source, extra=extra)
