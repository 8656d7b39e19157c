"""Whether a drained node may go back to work: judged again from a fresh read, never from
what the console remembers.

A resume is allowed only when the node's host was read now and neither the finding that
caused the drain (same code, and the same GPU and Xid where the drain named them) nor any
critical finding holds.  A host that could not be read is not shown healthy: refused too.
The operator may override with a reason; the override and what still failed are recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from probes.actions.evidence import Evidence
from probes.analysis.findings import Finding
from probes.triage import Severity
from probes.wire.sanitize import clean_text

MAX_SHOWN = 8
"""Findings named in a refusal; more are counted."""


@dataclass(frozen=True)
class ResumeCheck:
    """The fresh judgement of a drained node's host."""

    host: str | None
    read: bool
    """The host answered with a sample."""
    holding: tuple[Finding, ...] = ()
    """What still fails: the drain's own finding, and every critical one."""
    failure: str | None = None
    """Why the host could not be read, when it could not."""
    judged: str = ""
    """What was looked at (``GPU state and kernel log of n3, read now``)."""

    @property
    def allowed(self) -> bool:
        """Read now, and nothing that caused the drain or anything critical holds."""
        return self.read and not self.holding

    def still_failing(self) -> tuple[str, ...]:
        """One line per thing that still fails (for the refusal and the audit)."""
        if not self.read:
            return (f"{self.host or 'the node'} could not be read now: "
                    f"{self.failure or 'no answer'}",)
        lines = [_line(f) for f in self.holding[:MAX_SHOWN]]
        if len(self.holding) > MAX_SHOWN:
            lines.append(f"and {len(self.holding) - MAX_SHOWN} more")
        return tuple(lines)


def _line(f: Finding) -> str:
    gpu = f" GPU{f.gpu}" if f.gpu is not None and f.gpu >= 0 else ""
    xid = f" (Xid {f.xid})" if f.xid is not None else ""
    return clean_text(f"{f.severity.value} {f.code}{xid} on {f.host}{gpu}: {f.summary}")[:300]


def caused_by(f: Finding, cause: Evidence) -> bool:
    """Whether ``f`` is the finding a drain named: its code, and its GPU and Xid where the
    drain named them."""
    return (str(f.code) == cause.code
            and (cause.gpu is None or f.gpu == cause.gpu)
            and (cause.xid is None or f.xid == cause.xid))


def judge_resume(findings: Sequence[Finding], cause: Evidence | None, *, host: str | None,
                 read: bool, failure: str | None = None, judged: str = "") -> ResumeCheck:
    """Judge a fresh read of a drained node's host.

    Args:
        findings: what the core finds in the read now (``fold_once``), the host's only.
        cause: the drain's evidence (``audit.last_drain``), None when rigwatch did not
            drain it: then any critical finding refuses.
        host: the host read.
        read: whether the host answered with a sample.
        failure: why it did not.
        judged: what was looked at, said in the result.
    """
    if not read:
        return ResumeCheck(host, False, failure=failure, judged=judged)
    holding = [f for f in findings
               if f.severity is Severity.CRITICAL
               or (cause is not None and caused_by(f, cause)
                   and f.severity is not Severity.INFO)]
    holding.sort(key=lambda f: (cause is None or not caused_by(f, cause),
                                -f.severity.rank, f.code))
    return ResumeCheck(host, True, tuple(holding), judged=judged)
