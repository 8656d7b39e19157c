"""Which kind of input is this?  The most specific recogniser wins; a log is the fallback.

Order matters: a ``-q`` report can contain commas and a topo matrix can contain words a
log rule would like, so structured kinds are tried from the most distinctive signature to
the least, and anything with lines that none claims is a log.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from probes.rules.result import KindResult

_MODULES: tuple[tuple[str, str], ...] = (
    ("nvidia-smi-csv", "probes.rules.parsers.smi_csv"),
    ("dmon", "probes.rules.parsers.dmon"),
    ("nvidia-smi-table", "probes.rules.parsers.smi_table"),
    ("nvidia-smi-q", "probes.rules.parsers.smi_q"),
    ("topo", "probes.rules.parsers.topo"),
    ("lspci", "probes.rules.parsers.lspci"),
    ("iostat", "probes.rules.parsers.iostat"),
)
"""Recognisers in the order tried.  CSV and dmon come first because they demand nvidia-smi's
own field names or ``# gpu`` headers, while the table's error-only form (one "Unable to
determine the device handle" line) would also claim a short CSV that ends in that error."""
_ALIASES = {"pmon": "dmon"}
"""Kinds served by another kind's module (``dmon`` parses both and says which)."""
LOG = "log"
UNKNOWN = "unknown"
KINDS: tuple[str, ...] = (*(k for k, _ in _MODULES), *_ALIASES, LOG)
"""Every kind ``--kind`` accepts."""


def _module(kind: str) -> ModuleType:
    name = dict(_MODULES)[_ALIASES.get(kind, kind)]
    return importlib.import_module(name)


def detect_kind(lines: list[str]) -> str:
    """The kind of the input: a structured output's kind, ``log``, or ``unknown`` (no text)."""
    if not any(line.strip() for line in lines):
        return UNKNOWN
    for kind, _ in _MODULES:
        module = _module(kind)
        looks_like: Callable[[list[str]], bool] = module.looks_like
        if looks_like(lines):
            kind_of: Callable[[list[str]], str] | None = getattr(module, "kind_of", None)
            return kind_of(lines) if kind_of is not None else kind
    return LOG


def parse_as(kind: str, lines: list[str]) -> KindResult:
    """Run the parser for ``kind``; ``log`` runs every log rule set."""
    if kind == UNKNOWN:
        return KindResult(UNKNOWN, {})
    if kind == LOG:
        from probes.rules.logrules.scan import explain_log
        return explain_log(lines)
    explain: Callable[[list[str]], KindResult] = _module(kind).explain
    return explain(lines)
