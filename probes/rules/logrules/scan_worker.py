"""The live log rules run off the console's UI loop: one thread scans every host's lines.

A log line is folded on the UI loop the moment it arrives; the rules that read it (and the
40 lines of context around it) used to run there too, when the next redraw asked for
findings, so a flood of costly lines delayed keys by the cost of a scan (security review
2026-12-06, E1).  With a worker, folding a line only queues it (``LiveLogScanner.post``: a
deque append), and this thread cuts, peels, cues and scans it.  Hosts take turns, one
budgeted scan each (``SCAN_CUE_CHARS``), so one host's flood delays another host's finding
by one scan at most; the hits wait in the scanner until the UI loop takes them
(``FleetState.take_scans``) and ``on_done`` says there are some.

Python's regular expressions hold the interpreter lock while they match, so the thread
does not add a core: it keeps the loop's waits short.  Every pattern reads a line in
linear time and a line is cut to ``MAX_RULE_CHARS`` before a rule sees it, so the loop
waits at most one match (well under a millisecond) for the lock, never a whole scan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from probes.rules.logrules.live import LiveLogScanner

log = logging.getLogger(__name__)


class ScanWorker:
    """One daemon thread scanning the scanners handed to it, in turn, until stopped."""

    def __init__(self, on_done: Callable[[], None] | None = None) -> None:
        self.on_done = on_done
        """Called on the worker's thread after a round that found something (must not
        block: the console hands it to its loop)."""
        self._ready: deque[LiveLogScanner] = deque()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.scans = 0
        """Budgeted scans run so far (for tests and the metrics)."""
        self.busy_s = 0.0
        """Thread CPU time spent scanning so far."""

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rigwatch-log-scan",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop after the scan in progress; queued lines are left unscanned."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def submit(self, scanner: LiveLogScanner) -> None:
        """``scanner`` has lines posted: scan it in its turn (called on the UI loop)."""
        if not scanner.queued:
            scanner.queued = True
            self._idle.clear()
            self._ready.append(scanner)
            self._wake.set()

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until every posted line is scanned (tests, and a console closing); False
        when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if not self._idle.wait(max(0.0, left)):
                return False
            if not self._ready:  # idle was set just as a line came: wait for that one too
                return True
            time.sleep(0.001)

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait()
            self._wake.clear()
            found = False
            while self._ready and not self._stopping:
                scanner = self._ready.popleft()
                scanner.queued = False  # before the work: a line posted during it requeues
                start = time.thread_time()
                try:
                    more, hits = scanner.work()
                except Exception:  # a rule's bug costs that host's lines, never the thread
                    log.exception("log scan failed")
                    more, hits = False, False
                self.busy_s += time.thread_time() - start
                self.scans += 1
                found = found or hits
                if more:
                    self.submit(scanner)
            if found and self.on_done is not None:
                try:
                    self.on_done()
                except Exception:
                    log.exception("log scan: on_done failed")
            if not self._ready:
                self._idle.set()
