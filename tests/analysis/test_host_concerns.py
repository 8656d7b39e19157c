"""A host's logs and findings as concerns of their own (issue #37 item 5): ``HostLogs`` and
``HostFindings`` are written by the fold through their named writes and read at the host's
``logs``/``findings_kept`` (no read-through layer on ``HostState``), never written around."""

from __future__ import annotations

import pytest

from probes.analysis.findings import Finding, Severity
from probes.analysis.host_findings import HostFindings
from probes.analysis.host_logs import HostLogs
from probes.config.fleet import HostSpec
from probes.fleet_state import HostState
from probes.triage import Code, Step
from probes.wire.samples import KERNEL_SOURCE, LogEvent, LogSourceState, LogSourceStatus

XID = "NVRM: Xid (PCI:0000:05:00): 79, pid=1, name=python, GPU has fallen off the bus."


def _finding(code: Code, ts: float, gpu: int | None = 0) -> Finding:
    return Finding(Step.GPU, code, Severity.CRITICAL, code.value, "h", gpu=gpu, ts=ts)


def test_a_resent_kernel_line_is_taken_once_and_a_job_line_feeds_the_speed() -> None:
    logs = HostLogs()
    line = LogEvent(10.0, KERNEL_SOURCE, XID, boot="b1")
    logs.add(line)
    logs.add(line)  # a reconnect resends dmesg's ring buffer
    assert len(logs.events) == 1 and logs.scanner.pending == 1
    logs.add(LogEvent(11.0, "job:/r0.log", "step 10 | 1200 tokens/s"))
    assert logs.scanner.pending == 2
    hits = logs.scan()
    assert hits is not None and logs.scanner.pending == 0
    assert logs.scan() is None  # nothing queued: nothing to hand to the findings


def test_the_log_source_is_kept_and_judged_by_the_logs() -> None:
    logs = HostLogs()
    logs.note_source(LogSourceState(1.0, KERNEL_SOURCE, LogSourceStatus.OK, via="journalctl"))
    assert logs.summary(False) == "read via journalctl"
    assert logs.findings("h") == []


def test_sample_findings_keep_their_onset_and_a_lost_gpu_sticks() -> None:
    kept = HostFindings()
    kept.take_sample([_finding(Code.TEMP_NEAR_SLOWDOWN, 5.0), _finding(Code.GPU_LOST, 5.0, 3)], 5.0)
    kept.take_sample([_finding(Code.TEMP_NEAR_SLOWDOWN, 9.0)], 9.0)
    assert [f.ts for f in kept.current] == [5.0]  # its onset, not the newest sample's
    assert [f.code for f in kept.sticky.values()] == [Code.GPU_LOST]
    kept.take_sample([], 12.0)
    assert kept.current == () and not kept.since
    assert [f.code for f in kept.sticky.values()] == [Code.GPU_LOST]  # until acknowledged


def test_a_write_makes_the_remembered_merge_old() -> None:
    kept = HostFindings()
    merge = lambda: kept.merged("k", list, list, lambda others: [])  # noqa: E731
    assert merge() == []
    kept.set_detected([_finding(Code.TEMP_NEAR_SLOWDOWN, 1.0)])  # same key, a write since
    assert [f.code for f in merge()] == [Code.TEMP_NEAR_SLOWDOWN]
    kept.keep([_finding(Code.XID, 2.0), _finding(Code.XID, 3.0)])
    (xid,) = [f for f in merge() if f.code == Code.XID]
    assert xid.count == 2 and xid.ts == 2.0  # a repeat merged into the first


def test_the_host_is_read_at_its_concerns_and_cannot_write_around_them() -> None:
    state = HostState(HostSpec(name="h"))
    state.apply(LogEvent(1.0, KERNEL_SOURCE, XID), 1.0)
    assert [e.line for e in state.logs.events] == [XID]
    assert state.scan_logs() and [f.code for f in state.findings()] == [Code.XID]
    assert [f.code for f in state.findings_kept.sticky.values()] == [Code.XID]
    # no read-through of a concern's state sits on the host (its status is its reading API)
    for name in ("down_reason", "last_seen", "outage", "watch", "relay_dropped", "sticky",
                 "current", "layout", "detected", "fabric_found", "events", "speed",
                 "log_source", "job_logs"):
        assert not hasattr(state, name), name
    with pytest.raises(AttributeError):
        state.status = state.reach.status  # type: ignore[misc]
