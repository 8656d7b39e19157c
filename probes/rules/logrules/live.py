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
from probes.rules.logrules.stamps import UTC, HostTime, line_time
from probes.rules.result import ExplainFinding
from probes.triage import OnsetClock
from probes.wire.samples import KERNEL_SOURCE

CONTEXT_LINES = 40
"""Lines before the new ones that a scan re-reads, for messages spread over lines."""
CONTEXT_BEFORE = 3
"""Lines shown before a finding's evidence line (an AER burst before the Xid, the frames
before an error)."""
MAX_PENDING = 2000
"""Lines queued before a scan is forced, so memory stays bounded however fast a log grows."""
WRITTEN_AFTER_READ_S = 2.0
"""A line's own stamp this far after it was read is no time of the line (a zone read
wrong, a stamp from elsewhere quoted in it): the read time stands."""


@dataclass(frozen=True)
class LiveHit:
    """One rule's finding on a live line, with the time that line was written."""

    finding: ExplainFinding
    source: str
    ts: float
    """When the evidence line happened (its own stamp, else placed by line order, else when
    it was read), on the console's clock (the host's, corrected for its skew)."""
    context: tuple[str, ...] = ()
    """The raw lines just before the evidence line, oldest first."""
    clock: OnsetClock = OnsetClock.READ
    """Which clock ``ts`` came from."""
    line: int = 0
    """The evidence line's number in its source, counted from the first line read."""


@dataclass(frozen=True)
class LineClock:
    """How a host's line stamps become console times: its zone and boot (its hello), and
    how far its clock runs ahead of the console's (the session's estimate)."""

    zone: HostTime = UTC
    offset_s: float = 0.0
    """Host clock minus console clock; the lines' read times arrive already corrected."""


@dataclass
class _Source:
    tail: deque[tuple[LogLine, float, OnsetClock]] = field(
        default_factory=lambda: deque(maxlen=CONTEXT_LINES))
    """The newest scanned lines with their event times."""
    pending: list[tuple[LogLine, float]] = field(default_factory=list)
    """Lines queued since the last scan, with when each was read."""
    last_t: float | None = None
    """The event time of the newest scanned line: no later line is placed before it."""
    number: int = 0
    reported: set[tuple[str, str, int | None]] = field(default_factory=set)
    ranks: RankPlaces = field(default_factory=RankPlaces)
    """Where the ranks of the job writing this log ran (NCCL init lines, torchrun)."""


class LiveLogScanner:
    """Per-source queues and tails for one host; ``scan`` returns only new findings' lines."""

    def __init__(self) -> None:
        self._sources: dict[str, _Source] = {}
        self.clock = LineClock()
        """The host's zone, boot and skew (set as the hello and the estimates arrive)."""

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
            timed = self._event_times(name, src)
            window = [*src.tail, *timed]
            first_new = src.pending[0][0].number
            when = {line.number: (t, clock) for line, t, clock in window}
            raw_of = {line.number: line.raw for line, _, _ in window}
            lines: Sequence[LogLine] = [line for line, _, _ in window]
            for f in scan_lines(lines, families_for(name)):
                if f.line >= first_new or f.key not in src.reported:
                    src.reported.add(f.key)
                    before = tuple(raw_of[n].rstrip() for n in
                                   range(f.line - CONTEXT_BEFORE, f.line) if n in raw_of)
                    t, clock = when.get(f.line, (window[-1][1], window[-1][2]))
                    hits.append(LiveHit(f, name, t, before, clock, f.line))
            src.tail.extend(timed)
            src.pending = []
        return hits

    def _event_times(self, name: str, src: _Source) -> list[tuple[LogLine, float, OnsetClock]]:
        """When each queued line happened, in line order (see :func:`event_times`)."""
        timed = event_times(src.pending, self.clock, src.last_t, name == KERNEL_SOURCE)
        if timed:
            src.last_t = timed[-1][1]
        return timed


def event_times(lines: Sequence[tuple[LogLine, float]], clock: LineClock,
                after: float | None, kernel: bool = False
                ) -> list[tuple[LogLine, float, OnsetClock]]:
    """Each line's event time on the console's clock, and which clock it came from.

    A line's own stamp wins (on the host's clock: its zone, then its skew taken off).  A
    kernel line's read time already is the kernel's time for it (the agent's conversion).
    A line without a stamp read together with stamped ones takes the time of the line above
    it, or, at the top of what was read, of the first stamped line below; else its read time.
    Line order is time order: no line is placed before the line above it (nor before
    ``after``, the last line of the previous scan), so a log read all at once keeps its order.

    Args:
        lines: (peeled line, when it was read on the console's clock), in file order.
        clock: the host's zone, boot and skew.
        after: the event time of the line before the first (None at the start of a source).
        kernel: the lines are the kernel log's (their read time is their time).
    """
    offset = clock.offset_s
    own: list[float | None] = []
    for line, read in lines:
        if kernel:
            own.append(read)
            continue
        t = line_time(line.time, line.text, clock.zone, read + offset)
        if t is not None:
            t -= offset
            if t > read + WRITTEN_AFTER_READ_S:
                t = None
        own.append(t)
    below: list[float | None] = [None] * len(lines)
    nxt: float | None = None
    for i in range(len(lines) - 1, -1, -1):
        below[i] = nxt
        if own[i] is not None:
            nxt = own[i]
        if i > 0 and lines[i - 1][1] != lines[i][1]:
            nxt = None  # read at another time: what is below says nothing about above
    out: list[tuple[LogLine, float, OnsetClock]] = []
    last = after
    last_read: float | None = None
    for i, (line, read) in enumerate(lines):
        t = own[i]
        clock_of = OnsetClock.KERNEL if kernel else OnsetClock.LINE
        if t is None:
            if last is not None and last_read == read:
                t, clock_of = last, OnsetClock.ORDER
            elif below[i] is not None:
                t, clock_of = below[i], OnsetClock.ORDER
            else:
                t, clock_of = read, OnsetClock.READ
        assert t is not None
        if last is not None and t < last:
            t, clock_of = last, OnsetClock.ORDER
        out.append((line, t, clock_of))
        last, last_read = t, read
    return out
