"""The triage vocabulary every rule shares: the four steps and how urgent a finding is.

Kept apart from the rules themselves so parsers, log rules and the live findings can all
import it without importing each other.
"""

from __future__ import annotations

from enum import Enum


class Step(str, Enum):
    """The fixed triage order: GPU state, then system log, then NCCL, then model code."""

    GPU = "gpu"
    SYSLOG = "syslog"
    NCCL = "nccl"
    MODEL = "model"


class Severity(str, Enum):
    """How urgent a finding is."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is worse; for sorting and "worst finding" columns."""
        return {"critical": 3, "warning": 2, "info": 1}[self.value]


DISK_SATURATED_UTIL = 90.0
"""%util at which a disk counts as saturated (``disk-saturated``), live and in ``explain``."""
