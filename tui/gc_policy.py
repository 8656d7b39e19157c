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


def tune_for_streaming() -> tuple[int, int, int]:
    """Apply the console's settings; returns the thresholds that were in force before.

    Process-wide: call it from an entry point (the console, a benchmark), not a library.
    """
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*STREAMING_THRESHOLDS)
    return before
