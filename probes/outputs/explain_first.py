"""``explain``'s first failure: the pasted inputs' findings judged by the console's own
``first_failure.diagnose``, so a log holding an OOM and then a watchdog timeout starts
with the OOM in ``explain`` exactly as it does in triage.

Each input is its own domain (a file says nothing of which job another file was from).
Within an input, a finding's time is its line's own stamp when it has one, else that of the
stamped line above it; line order breaks ties, so a log with no stamps at all is read in
the order it was written.
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.analysis.findings import Finding, with_rank
from probes.analysis.first_failure import Diagnosis, FirstFailure, diagnose
from probes.explain.run import ExplainedInput
from probes.rules.logrules.stamps import UTC, stamp_time
from probes.triage import Code, OnsetClock, Step
from probes.wire.samples import JOB_SOURCE_PREFIX, KERNEL_SOURCE
from probes.wire.sanitize import clean_text

BASE_TS = 0.0
"""The time of a finding in an input without any stamp above it: every input starts here,
so only stamps order findings of different inputs."""


def as_findings(inp: ExplainedInput, read_at: float) -> list[Finding]:
    """One input's findings as the console's ``Finding`` (host: the input's name)."""
    out: list[Finding] = []
    found = sorted(inp.result.findings, key=lambda f: f.line)
    own = [stamp_time(f.time, UTC, read_at) if f.time else None for f in found]
    below: list[float | None] = [None] * len(found)
    nxt: float | None = None
    for i in range(len(found) - 1, -1, -1):
        below[i] = nxt
        nxt = own[i] if own[i] is not None else nxt
    last: float | None = None
    kernel_log = inp.result.kind == "log"
    for i, f in enumerate(found):
        stamped = own[i]
        if stamped is not None and (last is None or stamped >= last):
            ts, clock = stamped, OnsetClock.LINE
        else:  # after the stamped line above it, else at the first stamped line below
            after = below[i]
            ts = last if last is not None else after if after is not None else BASE_TS
            clock = OnsetClock.ORDER
        last = ts
        source = None
        if kernel_log:
            source = KERNEL_SOURCE if f.step is Step.SYSLOG else JOB_SOURCE_PREFIX + inp.path
        out.append(Finding(f.step, f.code, f.severity, f.summary, inp.path, xid=f.xid,
                           evidence=f.evidence, ts=ts, action=f.action, source=source,
                           count=f.count, extra=with_rank(f.extra), clock=clock,
                           line=f.line))
    return out


def explain_diagnosis(inputs: Sequence[ExplainedInput], read_at: float) -> Diagnosis:
    """Every input's incident, the lead first."""
    return diagnose([f for i in inputs for f in as_findings(i, read_at)])


def first_line(first: FirstFailure | None) -> list[str]:
    """The report's opening lines: the first failure with its line, and do-now."""
    if first is None:
        return ["First failure: none (nothing above info)."]
    f = first.finding
    path = (f.source or "")[len(JOB_SOURCE_PREFIX):] if (f.source or "").startswith(
        JOB_SOURCE_PREFIX) else f.host
    where = f"{clean_text(path)}:{f.line}" if f.line else clean_text(path)
    what = f.code if f.xid is None else f"{f.code} {f.xid}"
    rank = f.details.rank
    who = f" rank {rank}" if rank is not None else ""
    kind = "First failure" if first.is_failure else "Earliest warning"
    out = [f"{kind}: {what}{who} ({where})"]
    if first.waiting and f.code != Code.NCCL_TIMEOUT:
        ranks = ", ".join(str(r) for r in first.waiting[:8])
        out[0] += f"; rank{'s' if len(first.waiting) > 1 else ''} {ranks} then timed out " \
                  "waiting on it"
    elif first.consequences:
        codes = sorted({str(c.code) for c in first.consequences})
        out[0] += f"; then {', '.join(codes)}"
    if first.culprit is not None and f.code == Code.NCCL_TIMEOUT:
        out.append(f"Culprit: {clean_text(first.culprit.why)}")
    if first.do_now:
        out.append(f"Do now: {clean_text(first.do_now)}")
    return out


def first_json(first: FirstFailure | None) -> dict[str, object] | None:
    """The ``first_failure`` object ``explain --json`` adds beside the contract's keys."""
    return None if first is None else first.to_json()
