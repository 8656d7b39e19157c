"""Formatting shared by several panels: how a number reads and which class colours it."""

from __future__ import annotations

from probes.analysis.findings import Severity
from widgets._styled_table import MISSING, Cell

HOT_C = 85.0
WARM_C = 75.0
MEM_HIGH_PCT = 95.0

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


def temp_cell(temp_c: float | None) -> Cell:
    """A temperature, coloured when warm or hot."""
    if temp_c is None:
        return MISSING
    cls = "cell--hot" if temp_c >= HOT_C else "cell--warm" if temp_c >= WARM_C else None
    return f"{temp_c:.0f} °C", cls


def pct_cell(pct: float | None, high: float | None = None) -> Cell:
    """A percentage, coloured at or above ``high``."""
    if pct is None:
        return MISSING
    return f"{pct:.0f} %", "cell--mem-high" if high is not None and pct >= high else None


def mib(value: float) -> str:
    """Memory in MiB with thousands separators, as operators read nvidia-smi."""
    return f"{value:,.0f}"
