"""The log rules applied to a live stream of lines, one host at a time.

``explain`` sees a whole file; the console sees lines arrive one by one.  Rules that read a
message spread over several lines (a wrapped OOM report, a traceback, "fallen off the bus"
continued on the next line) need the lines around the newest ones, so each source keeps a
short tail and every scan covers the new lines plus that context.  Scans are batched: lines
are queued as they arrive and scanned when the console asks for findings, so a burst of a
thousand lines costs one pass, not a thousand.

No line costs more than once, and no scan more than a budget (the scan runs on the console's
UI loop; security review 2026-12-06, E1).  A line is cut (``rule_line``), peeled and tested
for each family's cue once, when it arrives; a family runs only for a batch in which some new
line has its cue, so an expensive line is not read again for each ordinary line after it.
The context a family re-reads is at most :data:`CONTEXT_CHARS`, and one scan takes at most
:data:`SCAN_CUE_CHARS` of cue lines from the queues (the rest wait for the next scan, oldest
first; past :data:`MAX_BACKLOG_CHARS` a source's oldest waiting lines are skipped, counted).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from probes.rules.logrules.families import Family, families_for, scan_lines
from probes.rules.logrules.lines import LogLine, log_line
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
"""Lines of a source queued since its last scan before ``add`` asks the caller to scan."""
CONTEXT_CHARS = 16 * 1024
"""Characters of context a family re-reads at most: the newest of the ``CONTEXT_LINES``
lines that fit (a tail of 40 ordinary lines is a few KB and fits whole; 40 hostile 8 KB
lines would have every scan re-read 320 KB)."""
SCAN_CUE_CHARS = 32 * 1024
"""Characters of lines with a family's cue that one scan takes from the queues (at least one
line per source): at about 1 µs a character for the costliest lines, a scan of a flood costs
tens of milliseconds, not seconds.  Lines without a cue cost next to nothing; all are taken."""
MAX_BACKLOG_CHARS = 1024 * 1024
"""Characters a source's queue holds at most; past it the oldest waiting lines are skipped
(``skipped`` counts them).  The agent sends at most 64 KB a file a tick, so only a flood that
outruns the scans tick after tick loses lines, and memory stays bounded."""
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
    families: tuple[Family, ...]
    tail: deque[tuple[LogLine, float, OnsetClock]] = field(
        default_factory=lambda: deque(maxlen=CONTEXT_LINES))
    """The newest scanned lines with their event times."""
    pending: deque[tuple[LogLine, float]] = field(default_factory=deque)
    """Lines queued and not yet scanned, with when each was read."""
    cues: dict[int, int] = field(default_factory=dict)
    """Line number → which families' cues the waiting line has (bit i: ``families[i]``)."""
    pending_chars: int = 0
    since_scan: int = 0
    last_t: float | None = None
    """The event time of the newest scanned line: no later line is placed before it."""
    number: int = 0
    reported: set[tuple[str, str, int | None]] = field(default_factory=set)
    ranks: RankPlaces = field(default_factory=RankPlaces)
    """Where the ranks of the job writing this log ran (NCCL init lines, torchrun)."""
    newest: str = ""
    """The newest line's peeled text (the worker's throughput reading reads it)."""


class LiveLogScanner:
    """Per-source queues and tails for one host; ``scan`` returns only new findings' lines."""

    def __init__(self) -> None:
        self._sources: dict[str, _Source] = {}
        self.clock = LineClock()
        """The host's zone, boot and skew (set as the hello and the estimates arrive)."""
        self._turn = 0
        self.skipped = 0
        """Lines never scanned: their source's queue was over :data:`MAX_BACKLOG_CHARS`."""
        # Scanned by a ScanWorker (probes.rules.logrules.scan_worker): the UI loop only
        # appends to ``inbox`` and takes from ``done`` (deque ends: safe across threads);
        # everything else is the worker's.  Each of the three queues is the empty tuple
        # until its first item (an empty deque is ~0.8 KB, and most hosts log nothing:
        # issue 38); each is made once, by the one thread that appends to it, before the
        # other thread can look for anything in it, and is never replaced.
        self.inbox: deque[tuple[str, str, float]] | tuple[()] = ()
        self.done: deque[LiveHit] | tuple[()] = ()
        self.queued = False
        """In the worker's queue now (set and cleared by the worker's ``submit``/turn)."""
        self._places: dict[int, LoggedRank] | None = None
        """``rank_places`` as of the worker's last turn (None: no worker scans this)."""
        self.reader: Callable[[str], tuple[str, float] | None] | None = None
        """Reads a job-log line's training speed on the worker (the throughput tracker's
        reading): its results wait in ``readings`` for the UI loop."""
        self.readings: deque[tuple[str, float, tuple[str, float], str]] | tuple[()] = ()
        """(source, when read, (unit, value), the line) for the UI loop's tracker."""

    def post(self, source: str, line: str, ts: float) -> None:
        """Queue one line for the worker (the UI loop's whole cost of a line)."""
        if self._places is None:
            self._places = {}
        inbox = self.inbox
        if not isinstance(inbox, deque):
            inbox = self.inbox = deque()
        inbox.append((source, line, ts))

    def work(self) -> tuple[bool, bool]:
        """The worker's turn: take the posted lines and run one budgeted scan.

        Returns:
            (lines are still waiting for another turn, the scan found something).
        """
        inbox, reader = self.inbox, self.reader
        while inbox:
            assert isinstance(inbox, deque)
            source, line, ts = inbox.popleft()
            self.add(source, line, ts)
            if reader is not None and source != KERNEL_SOURCE:
                got = reader(self._sources[source].newest)
                if got is not None:
                    readings = self.readings
                    if not isinstance(readings, deque):
                        readings = self.readings = deque()
                    readings.append((source, ts, got, line))
        hits = self.scan()
        if hits:
            done = self.done
            if not isinstance(done, deque):
                done = self.done = deque()
            done.extend(hits)
        self._places = self._rank_places()
        return self.pending > 0 or bool(inbox), bool(hits)

    def take(self) -> list[LiveHit]:
        """The worker's hits not taken yet, oldest first (on the UI loop)."""
        done = self.done
        if not isinstance(done, deque):
            return []
        return [done.popleft() for _ in range(len(done))]

    def take_readings(self) -> list[tuple[str, float, tuple[str, float], str]]:
        """The worker's speed readings not taken yet, oldest first (on the UI loop)."""
        readings = self.readings
        if not isinstance(readings, deque):
            return []
        return [readings.popleft() for _ in range(len(readings))]

    def add(self, source: str, line: str, ts: float) -> bool:
        """Queue one line; True every :data:`MAX_PENDING` lines of a source between scans,
        when the caller should scan."""
        src = self._sources.get(source)
        if src is None:
            src = self._sources[source] = _Source(families_for(source))
        src.number += 1
        logged = log_line(src.number, line)  # cut and peeled once, for every scan
        src.ranks.add(logged.text)
        src.newest = logged.text
        src.pending.append((logged, ts))
        src.cues[src.number] = sum(1 << i for i, f in enumerate(src.families) if f.cue(logged))
        src.pending_chars += len(logged.raw)
        while src.pending_chars > MAX_BACKLOG_CHARS and len(src.pending) > 1:
            _pop(src)
            self.skipped += 1
        src.since_scan += 1
        return src.since_scan >= MAX_PENDING

    def rank_places(self) -> dict[int, LoggedRank]:
        """rank → host (and GPU bus id) as this host's logs told them so far (with a
        worker: as of its last turn)."""
        places = self._places
        return dict(places) if places is not None else self._rank_places()

    def _rank_places(self) -> dict[int, LoggedRank]:
        out: dict[int, LoggedRank] = {}
        for src in self._sources.values():
            out.update(src.ranks.places())
        return out

    @property
    def pending(self) -> int:
        """Lines queued and not yet scanned (a scan over its budget leaves some)."""
        return sum(len(s.pending) for s in self._sources.values())

    def scan(self) -> list[LiveHit]:
        """Run the rules over every source's new lines (with context), within the budget
        (:data:`SCAN_CUE_CHARS`): lines past it stay queued for the next scan.

        A finding whose evidence line lies in the context, not among the new lines, was
        reported by an earlier scan and is not repeated, unless its kind was never reported
        from this source: then the message only became complete with the new lines.  Only
        the families cued by a new line run (the others could add nothing new).
        """
        hits: list[LiveHit] = []
        budget = [SCAN_CUE_CHARS]
        for name, src in self._in_turn():
            new, cued = _take(src, budget)
            if not new:
                continue
            run = tuple(f for i, f in enumerate(src.families) if cued >> i & 1)
            timed = self._event_times(name, src, new)
            window = [*_context(src.tail), *timed] if run else timed
            first_new = new[0][0].number
            when = {line.number: (t, clock) for line, t, clock in window}
            raw_of = {line.number: line.raw for line, _, _ in window}
            lines: Sequence[LogLine] = [line for line, _, _ in window]
            for f in scan_lines(lines, run):
                if f.line >= first_new or f.key not in src.reported:
                    src.reported.add(f.key)
                    before = tuple(raw_of[n].rstrip() for n in
                                   range(f.line - CONTEXT_BEFORE, f.line) if n in raw_of)
                    t, clock = when.get(f.line, (window[-1][1], window[-1][2]))
                    hits.append(LiveHit(f, name, t, before, clock, f.line))
            src.tail.extend(timed)
        return hits

    def _in_turn(self) -> Iterator[tuple[str, _Source]]:
        """Every source, starting one further each scan, so a budget spent on one source's
        flood delays the others by one scan at most."""
        names = list(self._sources)
        if names:
            self._turn = (self._turn + 1) % len(names)
        for name in names[self._turn:] + names[:self._turn]:
            src = self._sources[name]
            src.since_scan = 0
            yield name, src

    def _event_times(self, name: str, src: _Source, new: Sequence[tuple[LogLine, float]]
                     ) -> list[tuple[LogLine, float, OnsetClock]]:
        """When each of the new lines happened, in line order (see :func:`event_times`)."""
        timed = event_times(new, self.clock, src.last_t, name == KERNEL_SOURCE)
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


def _pop(src: _Source) -> tuple[LogLine, float]:
    line, ts = src.pending.popleft()
    src.pending_chars -= len(line.raw)
    src.cues.pop(line.number, None)
    return line, ts


def _take(src: _Source, budget: list[int]) -> tuple[list[tuple[LogLine, float]], int]:
    """The oldest waiting lines of ``src`` whose cue lines fit the budget's characters (at
    least one line), and the families they cue (bits); the budget is spent in place."""
    new: list[tuple[LogLine, float]] = []
    cued = 0
    while src.pending:
        line = src.pending[0][0]
        cues = src.cues.get(line.number, 0)
        cost = len(line.raw) if cues else 0
        if new and cost > budget[0]:
            break
        new.append(_pop(src))
        budget[0] = max(0, budget[0] - cost)
        cued |= cues
    return new, cued


def _context(tail: deque[tuple[LogLine, float, OnsetClock]]
             ) -> list[tuple[LogLine, float, OnsetClock]]:
    """The newest lines of ``tail`` that fit :data:`CONTEXT_CHARS`, oldest first."""
    kept: list[tuple[LogLine, float, OnsetClock]] = []
    chars = 0
    for entry in reversed(tail):
        chars += len(entry[0].raw)
        if chars > CONTEXT_CHARS:
            break
        kept.append(entry)
    kept.reverse()
    return kept
