"""Log lines with the prefixes launchers and collectors glue on peeled off.

A line from ``srun -l``, ``pdsh``, ``torchrun``, ``grep`` over rotated syslogs or a log
shipper reaches rigwatch as ``/var/log/syslog.1:Jun 21 14:02:19 host kernel: [4187.5] msg``
or ``198.51.100.23: 198.51.100.23: [rank3]: msg``.  Rules match on ``text`` (the message)
and report ``host``, ``rank`` and ``time`` from what was peeled.  Peeling is by shape, not
by sample: each prefix kind is tried repeatedly until none matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.rules.text import clean_line, rule_line

_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAYS = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"

_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # vLLM / Ray worker prefixes: "(VllmWorker rank=2 pid=225) ", "(VllmWorkerProcess pid=9) ",
    # "(RayWorkerWrapper pid=4411, ip=10.0.0.3) ", "(RayTrainWorker pid=7, ip=10.0.0.5) "
    ("worker", re.compile(
        r"^\((?P<v>[A-Za-z_][\w.]{0,60}(?: (?:rank|pid|ip|node_id)=[\w.:\-]{1,64},?)+|pid=\d+"
        r"(?:, ip=[\w.:\-]{1,64})?)\)\s")),
    # vLLM's logger: "ERROR 06-26 23:10:17 [multiproc_executor.py:527] " (before 0.6 without
    # the opening bracket: "INFO 09-03 19:10:35 config.py:813] ")
    ("applog", re.compile(
        r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<v>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
        r" \[?[\w.\-]{1,80}:\d{1,6}\]\s")),
    # torchrun --tee: "[default3]:" (role and local rank)
    ("rank", re.compile(r"^\[[A-Za-z_]{1,30}?(?P<v>\d{1,5})\]:\s?")),
    # grep over several files: "/var/log/syslog.1:" or "kern.log:"; not a source file's
    # "Loss.cu:250:" of an assert message, whose line number is no srun label
    ("file", re.compile(
        r"^(?P<v>(?:/[\w.\-]+)+|(?=[\w.\-]*?(?:syslog|kern|messages|dmesg))[\w.\-]+)"
        r"(?<!\.cu)(?<!\.cuh)(?<!\.c)(?<!\.cc)(?<!\.cpp)(?<!\.h)(?<!\.hpp)(?<!\.py)"
        r":(?=\S)")),
    # CloudWatch / table exports: "| 1700000000000 | msg |"
    # (the stamp starts and ends with a non-space: with spaces allowed at its ends too, a
    # run of spaces was split between it and the spaces around it in every possible way)
    ("time", re.compile(r"^\|\s*(?P<v>[\d\-T:.+Z][\d\-T:.+Z ]{8,38}?[\d\-T:.+Z])\s*\|\s*")),
    # dmesg -T: "[Sat Nov  8 03:17:44 2025] " (the opening bracket is sometimes lost)
    ("time", re.compile(rf"^\[?(?P<v>{_DAYS} {_MONTHS} [ \d]\d \d\d:\d\d:\d\d \d{{4}})\]\s?")),
    # syslog / journalctl: "Sep  3 02:11:58 host kernel: " (also "Sep 03", fractional
    # seconds of short-precise, short-full's "Sat 2025-11-08 03:17:44 UTC", CJK months)
    ("time", re.compile(
        rf"^(?P<v>(?:{_MONTHS}|\d{{1,2}}月) ?[ \d]?\d日? \d\d:\d\d:\d\d(?:\.\d+)?|"
        rf"{_DAYS} \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]{{2,5}})?|"
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
        r"\s+(?P<host>[\w.\-]+)\s+(?:kernel|[\w.\-/]+(?:\[\d+\])?):\s?")),
    # ISO / Python logging time: "2022-06-21 09:14:07,552 " or "2025-11-08T03:17:44.123+00:00 "
    ("time", re.compile(
        r"^(?P<v>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
        r"\s*(?:[|\-:]\s*)?")),
    # kernel monotonic time: "[  211.408317] ", also after dmesg -r "<4>" / -x "kern  :warn  : "
    ("mono", re.compile(
        r"^(?:<\d>|[a-z]+\s*:[a-z]+\s*:\s)?\[\s*(?P<v>\d+\.\d+)\]\s?"
        r"(?:[\w.\-]+ kernel: )?(?:\[\s*\d+\.\d+\]\s?)?")),
    # journal lines with host and time cut: "kernel: NVRM: …"
    ("tag", re.compile(r"^(?P<v>kernel): ")),
    # torch rank prefix: "[rank3]:" / "[Rank 3]: "
    ("rank", re.compile(r"^\[[Rr]ank ?(?P<v>\d+)\]:\s?")),
    # pdsh / launcher host or IP: "gpu017: ", "198.51.100.23: ", "ip-10-0-0-1: "
    ("host", re.compile(
        r"^(?P<v>(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z](?:[^\W\d]|-)*\d[\w\-.]*"
        r"|[0-9a-fA-F:]{0,39}::[0-9a-fA-F:]{1,39}):\s")),
    # srun -l label: "13: "
    ("rank", re.compile(r"^(?P<v>\d{1,5}):\s")),
)


_WORKER_RANK = re.compile(r"\brank=(\d{1,5})\b")
_WORKER_IP = re.compile(r"\bip=([\w.:\-]{1,64})")
_LAUNCHER_KINDS = frozenset({"host", "rank"})
"""Launchers prefix the line before the log's own time; after a time these are message text."""
_NOT_A_HOST = re.compile(r"^(?:CPU|GPU|cpu|nvme|sd[a-z]|eth|ib|mlx\d_)\d*$")
"""Words shaped like host names that kernel messages use as their own subject."""


@dataclass(frozen=True)
class LogLine:
    """One input line: its number, the raw text and the message with prefixes removed."""

    number: int
    raw: str
    text: str
    host: str | None = None
    rank: int | None = None
    time: str | None = None


def peel(line: str) -> tuple[str, str | None, int | None, str | None]:
    """Strip launcher and collector prefixes; returns (message, host, rank, time).

    The line is first cut as every rule reads it (:func:`probes.rules.text.rule_line`).
    """
    text = clean_line(rule_line(line)).lstrip()
    host: str | None = None
    rank: int | None = None
    time: str | None = None
    applog_time: str | None = None
    for _ in range(8):
        for kind, pattern in _PREFIXES:
            if kind in _LAUNCHER_KINDS and time is not None:
                continue
            m = pattern.match(text)
            if m is None or (kind == "host" and _NOT_A_HOST.match(m.group("v"))):
                continue
            value = m.group("v")
            if kind == "time" and time is None:
                time = value.strip()
                if "host" in pattern.groupindex and host is None:
                    host = m.group("host")
            elif kind == "mono" and time is None:
                time = value
            elif kind == "worker":
                r = _WORKER_RANK.search(value)
                if r is not None and rank is None:
                    rank = int(r.group(1))
                ip = _WORKER_IP.search(value)
                if ip is not None and host is None:
                    host = ip.group(1)
            elif kind == "applog":
                # the application's own stamp: torch's "[rank2]:" may still follow it
                applog_time = applog_time or value
            elif kind == "rank" and rank is None:
                rank = int(value)
            elif kind == "tag":
                pass
            elif kind == "host" and host is None:
                host = value
            text = text[m.end():].lstrip()
            break
        else:
            break
    return text, host, rank, time or applog_time


def log_line(number: int, raw: str) -> LogLine:
    """One input line, cut as the rules read it (``raw`` too: rules and evidence read it)
    and peeled."""
    raw = rule_line(raw)
    text, host, rank, time = peel(raw)
    return LogLine(number, raw, text, host, rank, time)


def log_lines(lines: list[str]) -> list[LogLine]:
    """Peel every line; numbering is 1-based, as the contract's ``line`` field is."""
    return [log_line(i, raw) for i, raw in enumerate(lines, 1)]
