"""Read inputs, detect their kinds, parse, and assemble the contract's JSON document."""

from __future__ import annotations

from dataclasses import dataclass

from probes.errors import RigwatchError
from probes.explain.detect import KINDS, detect_kind, parse_as
from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import decode, split_lines
from probes.triage import Step

CONTRACT_VERSION = 1
STEP_ORDER = {s.value: i for i, s in enumerate(Step)}


class ExplainInputError(RigwatchError):
    """An input cannot be read (missing, a directory, unreadable); names the path."""

    title = "Input unreadable"


@dataclass(frozen=True)
class ExplainedInput:
    """One input and what its parser made of it."""

    path: str
    result: KindResult


def explain_bytes(path: str, raw: bytes, kind: str | None = None) -> ExplainedInput:
    """Detect (unless ``kind`` is given) and parse one input."""
    lines = split_lines(decode(raw))
    chosen = kind if kind is not None else detect_kind(lines)
    if chosen not in KINDS and chosen != "unknown":
        raise ExplainInputError(f"unknown kind {chosen!r}; known: {', '.join(KINDS)}")
    return ExplainedInput(path, parse_as(chosen, lines))


def ordered(inputs: list[ExplainedInput]) -> list[tuple[str, ExplainFinding]]:
    """Every finding with its source, in triage order, then worst first, then by line."""
    pairs = [(i.path, f) for i in inputs for f in i.result.findings]
    pairs.sort(key=lambda p: (STEP_ORDER[p[1].step.value], -p[1].severity.rank, p[0], p[1].line))
    return pairs


def to_document(inputs: list[ExplainedInput]) -> dict[str, object]:
    """The contract's top-level object."""
    return {
        "version": CONTRACT_VERSION,
        "inputs": [{"path": i.path, "kind": i.result.kind, "parsed": dict(i.result.parsed)}
                   for i in inputs],
        "findings": [f.to_json(src) for src, f in ordered(inputs)],
    }
