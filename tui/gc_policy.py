"""The console's garbage-collector settings for streaming many hosts.

Each host-sample leaves a few hundred container objects alive for a few seconds (the
newest sample, the history's staging batch), long enough to reach the oldest generation.
With CPython's default thresholds (700, 10, 10) a 1024-host console then ran a full
collection of about a million objects every second or two: a fifth to a third of ingest
CPU in ``tests/bench/bench_ingest.py``, and about 100 ms each time, which the operator
sees as a key press not answered.

Nearly all of that garbage is freed by reference counting; the collector is only needed
for the rare cycle, so it can run far less often.  ``gc.freeze`` moves what exists after
start-up (modules, the widget tree, the inventory) out of every later collection.
"""

from __future__ import annotations

import gc

STREAMING_THRESHOLDS = (50_000, 20, 100)
"""Young-generation collections every 50,000 net allocations (about 10 ms each at 1024
hosts, measured by ``tests/bench/bench_ingest.py``) instead of every 700."""


REFREEZE_AFTER_S = (30.0, 120.0, 600.0)
"""When the console freezes again (seconds after it starts): a fleet's long-lived structure
is made after start-up — each host's history, its step series, its rows, as its hosts
connect and its coarse tiers first fill (minutes 1–10) — and at a thousand hosts is over
half a million tracked objects, which each middle-generation collection walked again (about
100 ms, a key not answered; issue 38).  Three times bound what freezing can keep: a cycle
that becomes garbage after it was frozen is never collected (a screen open at that moment
and closed later), so the console freezes a few times, not on every tick."""

_tuned = False


def tune_for_streaming() -> tuple[int, int, int]:
    """Apply the console's settings; returns the thresholds that were in force before.

    Process-wide: call it from an entry point (the console, a benchmark), not a library.
    """
    global _tuned
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*STREAMING_THRESHOLDS)
    _tuned = True
    return before


def tuned() -> bool:
    """The process took the streaming settings (its entry point is the console's): only
    then does the console freeze again (``refreeze``), never inside a test runner."""
    return _tuned


def refreeze() -> int:
    """Move what is alive now out of every later collection; returns how many objects are
    frozen in all.  The young generations are collected first (cheap: no old objects), so
    a recent cycle is freed, not frozen."""
    gc.collect(1)
    gc.freeze()
    return gc.get_freeze_count()
