"""What every log-rule family shares: severity aliases, the evidence window, list helpers.

Each family still decides *how much* of a long line to show around its hit (NCCL keeps 150
characters before it, the training rules 200, the kernel rules the head of the line), because
the explain contract's fixtures pin each one's evidence byte for byte; what they share is the
limit and the cutting.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probes.triage import Severity

CRIT = Severity.CRITICAL
WARN = Severity.WARNING
INFO = Severity.INFO

EVIDENCE_MAX = 600
"""Evidence is one log line; a longer one (a flattened traceback) is cut around the hit."""
ELLIPSIS = "…"

GAP = re.compile(r" {8,}")
"""A long run of spaces inside a line: a terminal hard-wrap or tqdm's padding."""
ISO_STAMP = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"
"""An ISO or Python-logging time stamp (``2022-06-21 09:14:07,552``)."""


def clip_evidence(shown: str, text: str, at: int, *, before: int, width: int = EVIDENCE_MAX,
                  mark_end: bool = False) -> str:
    """``shown`` when it fits in :data:`EVIDENCE_MAX`, else a window of ``text`` around ``at``.

    The window starts ``before`` characters ahead of the hit and is ``width`` long; a cut
    front is marked with ``…``, a cut end only when ``mark_end`` (each family's evidence is
    pinned by the contract fixtures as it was first written).
    """
    if len(shown) <= EVIDENCE_MAX:
        return shown
    start = max(0, at - before)
    out = text[start:start + width]
    tail = ELLIPSIS if mark_end and start + len(out) < len(text) else ""
    return (ELLIPSIS if start else "") + out + tail


def unique(values: Sequence[object | None]) -> list[object]:
    """The values in first-seen order, without repeats and without None."""
    out: list[object] = []
    for v in values:
        if v is not None and v not in out:
            out.append(v)
    return out


def names(values: Sequence[object], limit: int = 8) -> str:
    """``a, b, c`` up to ``limit`` values, then how many there were in all."""
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", … ({len(values)} in all)" if len(values) > limit else "")
