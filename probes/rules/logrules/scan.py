"""``explain``'s ``log`` kind: every log-rule family over one pasted input, in triage order."""

from __future__ import annotations

from probes.rules.logrules.families import scan_lines
from probes.rules.logrules.lines import log_lines
from probes.rules.result import KindResult
from probes.rules.throughput import series_of


def explain_log(lines: list[str]) -> KindResult:
    """The ``log`` kind: ``parsed`` is the line count, findings come from every family.

    A pasted file's source is unknown, so unlike the live console (which runs only the
    families that read each source) every family reads it.
    """
    peeled = log_lines(lines)
    parsed: dict[str, object] = {"lines": len(lines)}
    speed = series_of(peeled)
    if speed is not None:  # a training log: its throughput series (probes.rules.throughput)
        parsed["throughput"] = speed.to_parsed()
    return KindResult("log", parsed, tuple(scan_lines(peeled)))
