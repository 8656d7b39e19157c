"""The log-rule families: one registry that both the live console and ``explain`` read.

A family is a module with ``scan(lines) -> list[ExplainFinding]`` and the kind of log it
reads, and a cheap ``cue(line)``: whether the line could add a finding of the family (the
live console skips a family for a batch of lines none of which has its cue).  The kernel
family reads only the host's kernel log and the job-log families only job logs: that is what
stops a training log that quotes an ``NVRM`` line from being read as the host's own kernel
speaking, and a kernel line from counting as a job error.  ``explain`` does not know where a
pasted file came from, so it runs every family.  A new family is one line in
:data:`FAMILIES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from probes.rules.logrules import fabric_manager, kernel, nccl, nccl_tests, training
from probes.rules.logrules.lines import LogLine
from probes.rules.result import ExplainFinding, merge_same
from probes.wire.samples import KERNEL_SOURCE

Scan = Callable[[Sequence[LogLine]], list[ExplainFinding]]
Cue = Callable[[LogLine], bool]


def always(line: LogLine) -> bool:
    """The kernel family's cue: it reads every line (its messages continue over lines, and
    a kernel log line is short: printk cuts a record at about 1 KB)."""
    return True


class LogKind(Enum):
    """Which log a family reads."""

    KERNEL = "kernel"
    JOB = "job"


@dataclass(frozen=True)
class Family:
    """One set of log rules: its name, the log it reads, and its scan."""

    name: str
    reads: LogKind
    scan: Scan
    cue: Cue = always


FAMILIES: tuple[Family, ...] = (
    Family("kernel", LogKind.KERNEL, kernel.scan),
    Family("fabric-manager", LogKind.JOB, fabric_manager.scan, fabric_manager.cue),
    Family("nccl", LogKind.JOB, nccl.scan, nccl.cue),
    Family("nccl-tests", LogKind.JOB, nccl_tests.scan, nccl_tests.cue),
    Family("training", LogKind.JOB, training.scan, training.cue),
)
"""In triage order: the kernel (``syslog`` step), then NCCL, then the model code."""


def log_kind(source: str) -> LogKind:
    """The kind of log a live source is: ``kernel`` is the kernel log, ``job:<path>`` a job's."""
    return LogKind.KERNEL if source == KERNEL_SOURCE else LogKind.JOB


def families_for(source: str) -> tuple[Family, ...]:
    """The families that read a live source, in registry order."""
    kind = log_kind(source)
    return tuple(f for f in FAMILIES if f.reads is kind)


def scan_lines(lines: Sequence[LogLine],
               families: Sequence[Family] = FAMILIES) -> list[ExplainFinding]:
    """Every family's findings over already-peeled lines, merged where they repeat."""
    found: list[ExplainFinding] = []
    for family in families:
        found.extend(family.scan(lines))
    return merge_same(found)
