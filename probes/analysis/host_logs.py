"""One host's logs as folded from its session: the lines queued for the log rules (and the
scan worker they are handed to), how the agent reads the kernel log and each job's files,
the kernel lines already seen, the training speed read from job logs; a concern of
``HostState`` of its own (issue #37: the fold split by concern, its reads pure).

The writes are ``add``, ``note_source``, ``set_zone``/``set_offset``, ``scan`` and
``take_readings``, each called by the fold; every other method reads.  What the log rules
find is not kept here: ``scan`` hands the hits to the fold, whose findings keep them
(``probes.analysis.host_findings``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from probes.analysis.findings import Finding
from probes.analysis.job_log_state import keep_job_log_state, refused_job_logs
from probes.analysis.log_source import kernel_log_summary, log_source_findings
from probes.analysis.throughput import ThroughputTracker, reading
from probes.rules.logrules.live import LineClock, LiveHit, LiveLogScanner
from probes.rules.logrules.rank_places import LoggedRank
from probes.rules.logrules.scan_worker import ScanWorker
from probes.rules.logrules.stamps import HostTime
from probes.wire.events import ClockOffset
from probes.wire.samples import KERNEL_SOURCE, Hello, LogEvent, LogSourceState

SEEN_KERNEL_LINES = 20000
"""Kernel lines remembered per host so a reconnect's look-back is not counted twice."""


@dataclass
class HostLogs:
    """One host's log lines on their way to the rules, and what is known of how they are read."""

    worker: ScanWorker | None = field(default=None, repr=False, compare=False)
    """The thread that runs the log rules (the console's); None: they run when asked."""
    scanner: LiveLogScanner = field(default_factory=LiveLogScanner)
    """The queued lines and each source's tail (with a worker: its inbox and finds)."""
    events: deque[LogEvent] | tuple[()] = ()
    """The newest lines, as the host screen shows them (a deque from the first line on: an
    empty one is ~0.8 KB a host; issue 38, memory)."""
    speed: ThroughputTracker = field(default_factory=ThroughputTracker)
    """Training throughput per job log (``probes.analysis.throughput``)."""
    source: LogSourceState | None = None
    """How the agent reads this host's kernel log, from its latest ``logsource`` message."""
    job_logs: dict[str, LogSourceState] = field(default_factory=dict)
    """How it reads each file a job named (``job:<path>``), from the same messages."""
    seen_kernel: dict[tuple[str | None, str], None] = field(default_factory=dict)
    """Recent kernel lines by (boot, cursor or line), oldest first: a reconnect resends
    dmesg's whole ring buffer, and the same Xid must not count twice."""

    def __post_init__(self) -> None:
        if self.worker is not None:
            self.scanner.reader = reading  # the speed is read on the worker too

    # writes

    def set_zone(self, hello: Hello) -> None:
        """The host's zone and boot, from its hello (its lines' stamps are read in them)."""
        self.scanner.clock = LineClock(HostTime(hello.clock.utc_offset_s or 0.0,
                                                hello.clock.boot_time),
                                       self.scanner.clock.offset_s)

    def set_offset(self, clock: ClockOffset) -> None:
        """The session's newest clock estimate (its lines' times are corrected by it)."""
        self.scanner.clock = LineClock(self.scanner.clock.zone, clock.applied_s)

    def add(self, event: LogEvent) -> bool:
        """Take one line: kept for the host screen, queued for the rules (with a worker:
        handed to it; a kernel line already seen is dropped).  True when so many lines
        wait, with no worker, that the owner should ``scan`` now."""
        if event.source == KERNEL_SOURCE and self._seen_before(event):
            return False
        if not isinstance(self.events, deque):
            self.events = deque(maxlen=500)
        self.events.append(event)
        if self.worker is not None:
            self.scanner.post(event.source, event.line, event.ts)
            self.worker.submit(self.scanner)
            return False
        if event.source != KERNEL_SOURCE:
            self.speed.add(event.source, event.line, event.ts)
        return self.scanner.add(event.source, event.line, event.ts)

    def note_source(self, state: LogSourceState) -> None:
        """How the agent reads the kernel log or one job's file, from a ``logsource``."""
        if state.source == KERNEL_SOURCE:
            self.source = state
        else:
            keep_job_log_state(self.job_logs, state)

    def scan(self) -> list[LiveHit] | None:
        """Run the rules over the queued lines (with a worker: take what it found); None
        when there was nothing to scan or take."""
        if self.worker is not None:
            return self.scanner.take() if self.scanner.done else None
        return self.scanner.scan() if self.scanner.pending else None

    def take_readings(self) -> bool:
        """Fold the speeds the worker read into ``speed``; True when the worker left
        readings or finds (the host's findings are old then)."""
        scanner = self.scanner
        if not (scanner.done or scanner.readings):  # most hosts, most calls: nothing
            return False  # (``take_readings`` would hand back none; issue 38)
        for source, ts, got, line in scanner.take_readings():
            self.speed.add_reading(source, ts, got, line)
        return True

    def _seen_before(self, event: LogEvent) -> bool:
        """Whether this kernel line already arrived (remembering it if not).

        The journal's cursor names an entry exactly; a dmesg line carries its own
        monotonic stamp, so within one boot its text is its identity.
        """
        key = (event.boot, event.cursor or event.line)
        if key in self.seen_kernel:
            return True
        self.seen_kernel[key] = None
        if len(self.seen_kernel) > SEEN_KERNEL_LINES:
            del self.seen_kernel[next(iter(self.seen_kernel))]
        return False

    # reads

    def findings(self, host: str) -> list[Finding]:
        """What is wrong with how the logs are read (a kernel log unreadable, a job's
        file refused)."""
        return (log_source_findings(host, self.source)
                + refused_job_logs(host, self.job_logs.values()))

    def summary(self, simulated: bool) -> str:
        """How the kernel log is read, for triage's "what was checked"."""
        return kernel_log_summary(self.source, simulated)

    def rank_places(self) -> dict[int, LoggedRank]:
        """rank → host (and GPU) as this host's job logs told them so far."""
        return self.scanner.rank_places()
