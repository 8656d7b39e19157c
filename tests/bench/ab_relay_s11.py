"""Variants for ``bench_collector_ab.py``: the collector's tick path before session 11
(every chunk through the line splitter and ``_relay_lines``, a tick queued through
``Relay._line``) against the one step (``RelayReader.feed``), swapped in one collector.

    python tests/bench/bench_collector_ab.py --variants tests/bench/ab_relay_s11.py
"""

from __future__ import annotations

from collections.abc import Callable

from probes.transport.relay import Relay, RelayReader
from tests.transport.relay_before_s11 import RelayBefore, RelayReaderBefore


def _after() -> Callable[[], None]:
    return lambda: None


def _before() -> Callable[[], None]:
    saved = RelayReader.feed, RelayReader._relay_lines, Relay.add_tick
    RelayReader.feed = RelayReaderBefore.feed  # type: ignore[method-assign,assignment]
    RelayReader._relay_lines = RelayReaderBefore._relay_lines  # type: ignore[method-assign,assignment]
    Relay.add_tick = RelayBefore.add_tick  # type: ignore[method-assign,assignment]

    def undo() -> None:
        RelayReader.feed, RelayReader._relay_lines, Relay.add_tick = saved  # type: ignore[method-assign]
    return undo


VARIANTS = [("before", _before), ("after", _after)]
