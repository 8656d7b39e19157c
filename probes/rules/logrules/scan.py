"""All log rules over one input, in triage order: kernel, then NCCL, then the model code."""

from __future__ import annotations

from probes.rules.logrules import kernel, nccl, training
from probes.rules.logrules.lines import LogLine, log_lines
from probes.rules.result import ExplainFinding, KindResult, merge_same


def scan_log_lines(lines: list[LogLine]) -> list[ExplainFinding]:
    """Findings of every step from already-peeled lines (the live console's entry point)."""
    found: list[ExplainFinding] = []
    for rules in (kernel, nccl, training):
        found.extend(rules.scan(lines))
    return merge_same(found)


def explain_log(lines: list[str]) -> KindResult:
    """The ``log`` kind: ``parsed`` is the line count, findings come from every rule set."""
    return KindResult("log", {"lines": len(lines)}, tuple(scan_log_lines(log_lines(lines))))
