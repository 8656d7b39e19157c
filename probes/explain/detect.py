"""Which kind of input is this?  The most specific recogniser wins; a log is the fallback.

Order matters: a ``-q`` report can contain commas and a topo matrix can contain words a
log rule would like, so structured kinds are tried from the most distinctive signature to
the least, and anything with lines that none claims is a log.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from probes.explain.result import KindResult

_MODULES: tuple[tuple[str, str], ...] = (
    ("nvidia-smi-table", "probes.parsers.smi_table"),
    ("topo", "probes.parsers.topo"),
    ("lspci", "probes.parsers.lspci"),
    ("iostat", "probes.parsers.iostat"),
)
LOG = "log"
UNKNOWN = "unknown"
KINDS: tuple[str, ...] = (*(k for k, _ in _MODULES), LOG)
"""Every kind ``--kind`` accepts.  The ``-q``, CSV and dmon/pmon parsers are not written yet."""


def _module(kind: str) -> ModuleType:
    name = dict(_MODULES)[kind]
    return importlib.import_module(name)


def detect_kind(lines: list[str]) -> str:
    """The kind of the input: a structured output's kind, ``log``, or ``unknown`` (no text)."""
    if not any(line.strip() for line in lines):
        return UNKNOWN
    for kind, _ in _MODULES:
        looks_like: Callable[[list[str]], bool] = _module(kind).looks_like
        if looks_like(lines):
            return kind
    return LOG


def parse_as(kind: str, lines: list[str]) -> KindResult:
    """Run the parser for ``kind``; ``log`` runs every log rule set."""
    if kind == UNKNOWN:
        return KindResult(UNKNOWN, {})
    if kind == LOG:
        from probes.logrules.scan import explain_log
        return explain_log(lines)
    explain: Callable[[list[str]], KindResult] = _module(kind).explain
    return explain(lines)
