"""Types every parser and log rule returns, so ``explain`` can assemble one report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from probes.triage import Code, Severity, Step


@dataclass(frozen=True)
class ExplainFinding:
    """One finding from one input, anchored to the line that shows it.

    ``line`` is 1-based in the input as given (after the fixture header, if any); ``gpu`` is a
    bus id in contract form (``0000:3b:00.0``) or a name such as ``GPU3`` when that is all the
    input says; ``count`` is how many lines showed the same incident.
    """

    step: Step
    code: Code
    severity: Severity
    line: int
    evidence: str
    summary: str
    action: str
    xid: int | None = None
    gpu: str | None = None
    time: str | None = None
    count: int = 1
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, int | None]:
        """The contract's identity of a finding: distinct (step, code, xid)."""
        return (self.step.value, self.code, self.xid)

    def to_json(self, source: str) -> dict[str, object]:
        """The contract's finding object; optional fields are omitted when unknown."""
        out: dict[str, object] = {"step": self.step.value, "code": self.code}
        if self.xid is not None:
            out["xid"] = self.xid
        out.update({"severity": self.severity.value, "source": source, "line": self.line,
                    "evidence": self.evidence})
        if self.gpu is not None:
            out["gpu"] = self.gpu
        if self.time is not None:
            out["time"] = self.time
        out["summary"] = self.summary
        out["action"] = self.action
        if self.count > 1:
            out["count"] = self.count
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out


@dataclass(frozen=True)
class KindResult:
    """What one parser made of one input: the contract's ``parsed`` summary and findings."""

    kind: str
    parsed: Mapping[str, object]
    findings: tuple[ExplainFinding, ...] = ()


def merge_same(findings: list[ExplainFinding]) -> list[ExplainFinding]:
    """Fold findings with the same key into the first one seen, counting the rest.

    One incident on many lines (an Xid repeated, a watchdog line per rank) is one finding; the
    first line is kept as evidence because the first failure is what triage wants.
    """
    first: dict[tuple[str, str, int | None], ExplainFinding] = {}
    counts: dict[tuple[str, str, int | None], int] = {}
    worst: dict[tuple[str, str, int | None], Severity] = {}
    for f in findings:
        k = f.key
        if k not in first:
            first[k] = f
            counts[k] = 0
            worst[k] = f.severity
        counts[k] += f.count
        if f.severity.rank > worst[k].rank:
            worst[k] = f.severity
    out = []
    for k, f in first.items():
        if counts[k] != f.count or worst[k] is not f.severity:
            f = ExplainFinding(f.step, f.code, worst[k], f.line, f.evidence, f.summary, f.action,
                               f.xid, f.gpu, f.time, counts[k], f.extra)
        out.append(f)
    return out
