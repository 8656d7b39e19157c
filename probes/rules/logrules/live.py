"""The log rules applied to a live stream of lines, one host at a time.

``explain`` sees a whole file; the console sees lines arrive one by one.  Rules that read a
message spread over several lines (a wrapped OOM report, a traceback, "fallen off the bus"
continued on the next line) need the lines around the newest ones, so each source keeps a
short tail and every scan covers the new lines plus that context.  Scans are batched: lines
are queued as they arrive and scanned when the console asks for findings, so a burst of a
thousand lines costs one pass, not a thousand.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from probes.rules.logrules.families import families_for, scan_lines
from probes.rules.logrules.lines import LogLine, peel
from probes.rules.logrules.rank_places import LoggedRank, RankPlaces
from probes.rules.result import ExplainFinding

CONTEXT_LINES = 40
"""Lines before the new ones that a scan re-reads, for messages spread over lines."""
CONTEXT_BEFORE = 3
"""Lines shown before a finding's evidence line (an AER burst before the Xid, the frames
before an error)."""
MAX_PENDING = 2000
"""Lines queued before a scan is forced, so memory stays bounded however fast a log grows."""


@dataclass(frozen=True)
class LiveHit:
    """One rule's finding on a live line, with the agent's timestamp of that line."""

    finding: ExplainFinding
    source: str
    ts: float
    context: tuple[str, ...] = ()
    """The raw lines just before the evidence line, oldest first."""


@dataclass
class _Source:
    tail: deque[tuple[LogLine, float]] = field(default_factory=lambda: deque(maxlen=CONTEXT_LINES))
    pending: list[tuple[LogLine, float]] = field(default_factory=list)
    number: int = 0
    reported: set[tuple[str, str, int | None]] = field(default_factory=set)
    ranks: RankPlaces = field(default_factory=RankPlaces)
    """Where the ranks of the job writing this log ran (NCCL init lines, torchrun)."""


class LiveLogScanner:
    """Per-source queues and tails for one host; ``scan`` returns only new findings' lines."""

    def __init__(self) -> None:
        self._sources: dict[str, _Source] = {}

    def add(self, source: str, line: str, ts: float) -> bool:
        """Queue one line; True when the queue is long enough that the caller should scan."""
        src = self._sources.get(source)
        if src is None:
            src = self._sources[source] = _Source()
        src.number += 1
        text, host, rank, time = peel(line)
        src.ranks.add(text)
        src.pending.append((LogLine(src.number, line, text, host, rank, time), ts))
        return len(src.pending) >= MAX_PENDING

    def rank_places(self) -> dict[int, LoggedRank]:
        """rank → host (and GPU bus id) as this host's logs told them so far."""
        out: dict[int, LoggedRank] = {}
        for src in self._sources.values():
            out.update(src.ranks.places())
        return out

    @property
    def pending(self) -> int:
        """Lines queued and not yet scanned."""
        return sum(len(s.pending) for s in self._sources.values())

    def scan(self) -> list[LiveHit]:
        """Run the rules over every source's new lines (with context); clears the queues.

        A finding whose evidence line lies in the context, not among the new lines, was
        reported by an earlier scan and is not repeated, unless its kind was never reported
        from this source: then the message only became complete with the new lines.
        """
        hits: list[LiveHit] = []
        for name, src in self._sources.items():
            if not src.pending:
                continue
            window = [*src.tail, *src.pending]
            first_new = src.pending[0][0].number
            ts_of = {line.number: ts for line, ts in window}
            raw_of = {line.number: line.raw for line, _ in window}
            lines: Sequence[LogLine] = [line for line, _ in window]
            for f in scan_lines(lines, families_for(name)):
                if f.line >= first_new or f.key not in src.reported:
                    src.reported.add(f.key)
                    before = tuple(raw_of[n].rstrip() for n in
                                   range(f.line - CONTEXT_BEFORE, f.line) if n in raw_of)
                    hits.append(LiveHit(f, name, ts_of.get(f.line, window[-1][1]), before))
            src.tail.extend(src.pending)
            src.pending = []
        return hits
