"""A log line's own time, as seconds since the epoch on the host's clock.

Triage orders what happened by when it happened, not by when rigwatch read it: a job log
read from 4 MiB back, or a finished job's log, arrives in one piece long after its lines
were written.  :func:`peel` already cuts the stamps launchers and loggers put in front of a
message (syslog, ISO 8601, Python logging, ``dmesg -T``, the kernel's ``[sec.usec]``,
vLLM's ``06-26 23:10:17``); this turns them into times, and reads the two that stay inside
the message: torch/c10's glog header ``[E1206 05:40:12.101202 1234 ProcessGroupNCCL.cpp:616]``
and a container runtime's ``2024-12-06T05:40:12.123456789Z stdout F`` prefix.

A stamp without a zone is the host's local time (``utc_offset_s`` from its hello); one
without a year is the year that puts it nearest before the line was read.  A kernel
``[sec.usec]`` counts from the host's boot.  Every pattern here is anchored and bounded: a
stamp costs what its characters cost.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_UTC_NAMES = frozenset({"UTC", "GMT", "Z", "UT"})

_ISO = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
    r"(?:\s?(Z|[+-]\d\d:?\d\d))?")
_SYSLOG = re.compile(
    r"^(?:([A-Z][a-z]{2})|(\d{1,2})月) ?\s?(\d{1,2})日? (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?$")
_SHORT_FULL = re.compile(
    r"^[A-Z][a-z]{2} (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?: ([A-Z]{2,5}))?$")
_DMESG_T = re.compile(
    r"^[A-Z][a-z]{2} ([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})$")
_MONTH_DAY = re.compile(r"^(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?$")
_MONO = re.compile(r"^(\d{1,10})\.(\d{1,9})$")
_EPOCH_MS = re.compile(r"^(\d{13})$")
_GLOG = re.compile(
    r"^\[?[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? {1,8}\d{1,10} "
    r"[\w.\-]{1,80}:\d{1,7}\]")
"""glog's ``Lmmdd hh:mm:ss.uuuuuu threadid file:line]``, as c10 prints it (torch ≥ 2.4
puts it in brackets after the rank mark)."""
_CRI = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) "
                  r"(?:stdout|stderr) [FP] ")
"""A container log file line (the CRI format kubelet writes): stamp, stream, full/partial."""

MAX_STAMP_CHARS = 64
"""A time string longer than this is no stamp rigwatch knows: it is not parsed."""
FUTURE_SLACK_S = 86400.0
"""How far after the read a year-less stamp may fall before the previous year is meant."""


@dataclass(frozen=True)
class HostTime:
    """What turns a host's stamps into times: its zone and its boot."""

    utc_offset_s: float = 0.0
    """The host's local time minus UTC (its hello), for stamps that name no zone."""
    boot_time: float | None = None
    """When the host booted (epoch seconds, its clock), for the kernel's ``[sec.usec]``."""


UTC = HostTime()


def _frac(text: str | None) -> float:
    return float("0." + text) if text else 0.0


def _local(year: int, month: int, day: int, hh: int, mm: int, ss: int, frac: float,
           zone: HostTime) -> float | None:
    try:
        return calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0)) + frac \
            - zone.utc_offset_s
    except (OverflowError, ValueError):
        return None


def _valid(month: int, day: int, hh: int, mm: int, ss: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31 and hh < 24 and mm < 60 and ss < 61


def _yearless(month: int, day: int, hh: int, mm: int, ss: int, frac: float, zone: HostTime,
              read_at: float) -> float | None:
    """The latest of this year's and last year's readings that is not after the read."""
    if not _valid(month, day, hh, mm, ss):
        return None
    year = _year_of(read_at)
    for y in (year + 1, year, year - 1):
        t = _local(y, month, day, hh, mm, ss, frac, zone)
        if t is not None and t <= read_at + FUTURE_SLACK_S:
            return t
    return None


def _year_of(ts: float) -> int:
    try:
        return time.gmtime(ts).tm_year
    except (OverflowError, OSError, ValueError):
        return 1970


def _iso(m: re.Match[str], zone: HostTime) -> float | None:
    year, month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    if not _valid(month, day, hh, mm, ss):
        return None
    tz = m.group(8)
    if tz is None:
        return _local(year, month, day, hh, mm, ss, _frac(m.group(7)), zone)
    offset = 0.0
    if tz != "Z":
        digits = tz[1:].replace(":", "")
        offset = (int(digits[:2]) * 3600 + int(digits[2:]) * 60) * (1 if tz[0] == "+" else -1)
    t = _local(year, month, day, hh, mm, ss, _frac(m.group(7)), UTC)
    return None if t is None else t - offset


def stamp_time(stamp: str, zone: HostTime, read_at: float) -> float | None:
    """A peeled time string (``LogLine.time``) as epoch seconds, None when it is not one.

    Args:
        stamp: what :func:`probes.rules.logrules.lines.peel` cut off as the line's time.
        zone: the host's zone and boot time.
        read_at: when the line was read (the host's clock), to place a stamp without a year.
    """
    if not stamp or len(stamp) > MAX_STAMP_CHARS:
        return None
    c = stamp[0]
    if c.isdigit():
        m = _ISO.match(stamp)
        if m is not None:
            return _iso(m, zone)
        m = _MONO.match(stamp)
        if m is not None:
            if zone.boot_time is None:
                return None
            return zone.boot_time + int(m.group(1)) + _frac(m.group(2))
        m = _MONTH_DAY.match(stamp)
        if m is not None:
            month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 6))
            return _yearless(month, day, hh, mm, ss, _frac(m.group(6)), zone, read_at)
        m = _EPOCH_MS.match(stamp)
        if m is not None:
            return int(m.group(1)) / 1000.0
        m = _SYSLOG.match(stamp)  # "9月 3日 02:11:58"
        if m is not None and m.group(2):
            return _syslog(m, zone, read_at)
        return None
    m = _SYSLOG.match(stamp)
    if m is not None:
        return _syslog(m, zone, read_at)
    m = _SHORT_FULL.match(stamp)
    if m is not None:
        year, month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
        if not _valid(month, day, hh, mm, ss):
            return None
        named = m.group(7)
        return _local(year, month, day, hh, mm, ss, 0.0,
                      UTC if named in _UTC_NAMES else zone)
    m = _DMESG_T.match(stamp)
    if m is not None:
        month = _MONTHS.get(m.group(1), 0)
        day, hh, mm, ss, year = (int(m.group(i)) for i in range(2, 7))
        if not _valid(month, day, hh, mm, ss):
            return None
        return _local(year, month, day, hh, mm, ss, 0.0, zone)
    return None


def _syslog(m: re.Match[str], zone: HostTime, read_at: float) -> float | None:
    month = _MONTHS.get(m.group(1), 0) if m.group(1) else int(m.group(2))
    day, hh, mm, ss = (int(m.group(i)) for i in range(3, 7))
    return _yearless(month, day, hh, mm, ss, _frac(m.group(7)), zone, read_at)


def message_time(text: str, zone: HostTime, read_at: float) -> float | None:
    """The time a message carries at its start after :func:`peel` (torch/c10's glog header,
    a container runtime's prefix), None when it carries none."""
    if not text:
        return None
    c = text[0]
    if c == "[" or c in "IWEF":
        m = _GLOG.match(text)
        if m is not None:
            month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 6))
            return _yearless(month, day, hh, mm, ss, _frac(m.group(6)), zone, read_at)
        return None
    if c.isdigit():
        m = _CRI.match(text)
        if m is not None:
            iso = _ISO.match(m.group(1))
            return _iso(iso, zone) if iso is not None else None
    return None


def line_time(stamp: str | None, text: str, zone: HostTime, read_at: float) -> float | None:
    """A line's own time: its peeled stamp, else the stamp its message starts with."""
    if stamp:
        t = stamp_time(stamp, zone, read_at)
        if t is not None:
            return t
    return message_time(text, zone, read_at)
