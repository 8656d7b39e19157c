"""Which kind of input is this?  The most specific recogniser wins; a log is the fallback.

Order matters: a ``-q`` report can contain commas and a topo matrix can contain words a
log rule would like, so structured kinds are tried from the most distinctive signature to
the least, and anything with lines that none claims is a log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from probes.rules.logrules.scan import explain_log
from probes.rules.parsers import (
    dcgmi_diag,
    dmon,
    ibstat,
    iostat,
    lspci,
    nccl_tests,
    nvlink,
    smi_csv,
    smi_q,
    smi_table,
    topo,
)
from probes.rules.result import KindResult


class Parser(Protocol):
    """What every parser module offers: its kind, a cheap recogniser and the parse itself."""

    KIND: str

    def looks_like(self, lines: list[str]) -> bool: ...

    def explain(self, lines: list[str]) -> KindResult: ...


@dataclass(frozen=True)
class Recogniser:
    """A parser in detection order; ``kind_of`` names the kind when one module parses two."""

    parser: Parser
    kind_of: Callable[[list[str]], str] | None = None

    @property
    def kind(self) -> str:
        return self.parser.KIND


RECOGNISERS: tuple[Recogniser, ...] = (
    Recogniser(smi_csv),
    Recogniser(dmon, dmon.kind_of),
    Recogniser(dcgmi_diag),
    Recogniser(smi_table),
    Recogniser(smi_q),
    Recogniser(ibstat),
    Recogniser(nvlink),
    Recogniser(topo),
    Recogniser(lspci),
    Recogniser(iostat),
    Recogniser(nccl_tests),
)
"""Recognisers in the order tried.  CSV and dmon come first because they demand nvidia-smi's
own field names or ``# gpu`` headers, while the table's error-only form (one "Unable to
determine the device handle" line) would also claim a short CSV that ends in that error."""
_ALIASES = {"pmon": "dmon"}
_LOG_RULES_TOO = frozenset({nccl_tests.KIND})
"""Kinds whose text is also a log: nccl-tests prints NCCL's own warnings beside its table, and
its findings are the log rules' (``probes.rules.logrules.nccl_tests``)."""
"""Kinds served by another kind's module (``dmon`` parses both and says which)."""
_BY_KIND: dict[str, Parser] = {r.kind: r.parser for r in RECOGNISERS}
LOG = "log"
UNKNOWN = "unknown"
KINDS: tuple[str, ...] = (*(r.kind for r in RECOGNISERS), *_ALIASES, LOG)
"""Every kind ``--kind`` accepts."""


def detect_kind(lines: list[str]) -> str:
    """The kind of the input: a structured output's kind, ``log``, or ``unknown`` (no text)."""
    if not any(line.strip() for line in lines):
        return UNKNOWN
    for r in RECOGNISERS:
        if r.parser.looks_like(lines):
            return r.kind_of(lines) if r.kind_of is not None else r.kind
    return LOG


def parse_as(kind: str, lines: list[str]) -> KindResult:
    """Run the parser for ``kind``; ``log`` runs every log-rule family."""
    if kind == UNKNOWN:
        return KindResult(UNKNOWN, {})
    if kind == LOG:
        return explain_log(lines)
    done = _BY_KIND[_ALIASES.get(kind, kind)].explain(lines)
    if kind in _LOG_RULES_TOO:
        found = (*done.findings, *explain_log(lines).findings)
        return KindResult(done.kind, done.parsed, found)
    return done
