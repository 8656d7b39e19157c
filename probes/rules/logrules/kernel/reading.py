"""Reading kernel-log lines: times, bus ids, terminal-wrap gaps, and the evidence shown.

Terminal hard-wraps are undone two ways: a long run of spaces inside a line is squeezed out
(:func:`squeeze`), and a message cut between two lines is matched on the pair (in ``rules``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from probes.rules.busid import BDF_IN_TEXT, normalize_bus_id
from probes.rules.logrules.common import EVIDENCE_MAX, GAP
from probes.rules.logrules.lines import LogLine
from probes.triage import Code, Severity, Step

_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
NVRM_LEAD = re.compile(r"^\s*(?:NVRM:\s*)?")
_RAW_TIME = re.compile(
    rf"^(?:<\d{{1,3}}>|\w+\s*:\s*\w+\s*:)?\s*\[\s*(?P<mono>\d+\.\d+)\]"
    rf"|^(?P<sys>{_MONTHS}\s+\d{{1,2}} \d\d:\d\d:\d\d(?:\.\d+)?)"
    r"|^(?P<full>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"(?: [A-Z]{2,5})?)"
    r"|^\d+,\d+,(?P<usec>\d+),[^;]*;")
_PCI_SHORT = re.compile(r"PCI:(?P<bdf>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?![.\w])")
GPU_NAME = re.compile(r"\bGPU ?(?P<n>\d{1,3})\b(?![:.]\d)")


@dataclass(frozen=True)
class Hit:
    """What one rule made of one line, before it becomes a finding."""

    code: Code
    severity: Severity
    summary: str
    action: str
    step: Step = Step.SYSLOG
    gpu: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)


# --- helpers -------------------------------------------------------------------------------


def bus_id(text: str) -> str | None:
    """The contract's form (``busid.normalize_bus_id``): the domain as Linux prints it, so
    ``PCI:00008ED0:00:00`` joins with lspci's and sysfs's ``8ed0:00:00.0``."""
    return normalize_bus_id(text)


def squeeze(text: str) -> str:
    """Undo a terminal hard-wrap that left a long run of spaces inside a word."""
    return GAP.sub("", text) if "        " in text else text


def gpu_in(text: str) -> str | None:
    """The GPU a message names: a bus id in contract form, else ``GPU3``-style, else None."""
    m = BDF_IN_TEXT.search(text)
    if m:
        return bus_id(m.group(0))
    short = _PCI_SHORT.search(text)
    if short:
        return bus_id(short.group("bdf") + ".0")
    name = GPU_NAME.search(text)
    return f"GPU{int(name.group('n'))}" if name else None


def _message_start(lines: Sequence[LogLine], i: int) -> int:
    """First line of a message whose continuation lines are indented and carry no time."""
    j = i
    while j > 0 and i - j < 4 and lines[j].time is None and lines[j].raw[:1].isspace():
        j -= 1
    return j


def gpu_around(lines: Sequence[LogLine], i: int, text: str) -> str | None:
    """``gpu_in`` on the line, then on the earlier lines of the same split message."""
    gpu = gpu_in(text)
    for j in range(i - 1, _message_start(lines, i) - 1, -1):
        if gpu is not None:
            break
        gpu = gpu_in(lines[j].text)
    return gpu


def line_times(lines: Sequence[LogLine]) -> tuple[list[str | None], list[bool]]:
    """Each line's time (the peeled one, a prefix the peeler left, or its message's), and
    whether the line carried a time of its own (a line without one may be a cut-off tail)."""
    out: list[str | None] = []
    own: list[bool] = []
    last: str | None = None
    for line in lines:
        t = line.time or _raw_time(line.raw)
        own.append(t is not None)
        if t is None and line.raw[:1].isspace():
            t = last
        out.append(t)
        last = t or last
    return out, own


def continues(lines: Sequence[LogLine], own_time: Sequence[bool], i: int) -> bool:
    """Line ``i`` is the wrapped or indented tail of the line before it."""
    if i == 0 or own_time[i]:
        return False
    return own_time[i - 1] or lines[i].raw[:1].isspace()


def _raw_time(raw: str) -> str | None:
    m = _RAW_TIME.match(raw.lstrip())
    if m is None:
        return None
    if m.group("usec"):
        return f"{int(m.group('usec')) / 1e6:.6f}"
    return m.group("mono") or m.group("sys") or m.group("full")


def evidence(*lines: LogLine) -> str:
    """The line as given, with terminal-wrap gaps closed up so it reads as one message."""
    return " ".join(squeeze(line.raw.strip()) for line in lines)[:EVIDENCE_MAX]
