"""Formatting shared by several panels: how a number reads and which class colours it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.content import Content

from probes.analysis.findings import Finding
from probes.analysis.judge import TempLevel
from probes.triage import Severity
from widgets._styled_table import MISSING, Cell

SEVERITY_CLASS = {
    Severity.CRITICAL: "cell--sev-critical",
    Severity.WARNING: "cell--sev-warning",
    Severity.INFO: "cell--sev-info",
}
SEVERITY_VARIABLE = {
    Severity.CRITICAL: "$sev-critical",
    Severity.WARNING: "$sev-warning",
    Severity.INFO: "$sev-info",
}
"""For markup (``Content``) panels, which name theme variables directly."""


TEMP_CLASS = {TempLevel.HOT: "cell--hot", TempLevel.WARM: "cell--warm"}
TEMP_VARIABLE = {TempLevel.HOT: "$gpu-hot", TempLevel.WARM: "$gpu-warm",
                 TempLevel.OK: "$foreground", TempLevel.UNKNOWN: "$text-dim"}
"""A temperature's colour from the core's level (``probes.analysis.judge.temp_level``)."""


def temp_cell(temp_c: float | None, level: TempLevel) -> Cell:
    """A temperature, coloured by the level the core judged for it."""
    if temp_c is None:
        return MISSING
    return f"{temp_c:.0f} °C", TEMP_CLASS.get(level)


def finding_line(f: Finding) -> Content:
    """``CRITICAL gpu  Xid 79 on 0000:3b:00.0`` with the severity word coloured."""
    return Content.from_markup(
        f"[bold {SEVERITY_VARIABLE[f.severity]}]$sev[/] [$text-dim]$step[/] $summary",
        sev=f"{f.severity.value:<8}", step=f"{f.step.value:<6}", summary=f.summary,
    )


def pct_cell(pct: float | None, high: bool = False) -> Cell:
    """A percentage, coloured when the core judged it ``high``."""
    if pct is None:
        return MISSING
    return f"{pct:.0f} %", "cell--mem-high" if high else None


def mib(value: float) -> str:
    """Memory in MiB with thousands separators, as operators read nvidia-smi."""
    return f"{value:,.0f}"


SPARK_MAX = 1e15


def spark_values(values: Sequence[float]) -> list[float]:
    """Values a ``Sparkline`` can draw: finite and within ±1e15 (an infinity made it raise).

    The decoder bounds what hosts send; this guards a recording made before it.
    """
    return [v for v in values if math.isfinite(v) and -SPARK_MAX <= v <= SPARK_MAX]
