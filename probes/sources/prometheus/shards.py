"""A large fleet read a part at a time, so no single refresh asks for every series at once.

At 10,000 hosts × 8 GPUs one metric is 80,000 series and costs Prometheus most of a second
of CPU to answer (measured with Debian's 2.42 on backfilled blocks; ``count()`` alone is
half of it); the six read every refresh make several seconds, during which the console
shows nothing new.  So hosts are split into shards of at most ``SERIES_PER_READ`` series
a read, and the refresh reads one shard every ``refresh_s / shards``: every host is still
read once per ``refresh_s`` (the exporter's scrape interval), the table changes a shard at
a time, and the site's Prometheus sees an even load instead of a burst.  Up to 1,000
hosts × 8 GPUs there is one shard and no matcher at all; a larger fleet's read is never
bigger than that one's.

A shard is selected by a set of exact label values (``instance=~"a|b|…"``), which
Prometheus answers from its index without scanning other series.  The values are the
raw label values as discovered (remote text): they are escaped for RE2 and for PromQL's
string syntax, never pasted in as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SERIES_PER_READ = 48_000
"""Series one read may ask for across its queries (GPUs × metrics read every refresh): a
1,000-host fleet's six fields.  With 80,000 (six shards at 10,000 hosts) a read took
1.4 s and up to 2.4 s while the machine was busy, against 2 s the table may wait."""
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


@dataclass(frozen=True)
class Shard:
    """Hosts read together, and the label matcher that selects their series."""

    hosts: frozenset[str]
    matcher: str
    """``label=~"…"`` (empty: the whole fleet, no matcher)."""


def shard_count(gpus: int, fields_per_read: int) -> int:
    """Shards needed so one read asks for at most ``SERIES_PER_READ`` series."""
    return max(1, math.ceil(gpus * max(1, fields_per_read) / SERIES_PER_READ))


def plan(values: dict[str, set[str]], label: str, count: int) -> list[Shard]:
    """``count`` shards of hosts in name order; ``values`` holds each host's raw values of
    ``label`` (a host answering under two scrape addresses has two)."""
    hosts = sorted(values)
    if count <= 1 or len(hosts) <= 1:
        return [Shard(frozenset(hosts), "")]
    size = math.ceil(len(hosts) / count)
    out = []
    for k in range(0, len(hosts), size):
        part = hosts[k:k + size]
        raw = sorted({v for h in part for v in values[h]})
        out.append(Shard(frozenset(part), set_matcher(label, raw)))
    return out


def set_matcher(label: str, values: list[str]) -> str:
    """``label=~"v1|v2|…"`` matching exactly these values (RE2 is anchored by Prometheus)."""
    regex = "|".join(_re2_literal(v) for v in values)
    return f"{label}=~{promql_string(regex)}"


def _re2_literal(value: str) -> str:
    """``value`` matched literally: RE2's special characters escaped, anything outside
    printable ASCII written as ``\\x{…}`` (the query stays plain ASCII, whatever a host
    put in its label)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c if " " <= c <= "~"
                   else f"\\x{{{ord(c):x}}}" for c in value)


def promql_string(text: str) -> str:
    """``text`` as a double-quoted PromQL string literal (Go's escapes)."""
    body = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{body}"'
