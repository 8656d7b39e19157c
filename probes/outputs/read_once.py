"""One read of any source, judged as the console judges it.

Every source (agents, collectors, a Prometheus, a recording) is read the same way: its
``run_once`` emits each host's items until each host has a sample or the deadline passes,
the items are filed per host (``OnceResult``), folded into a ``FleetState`` by the one fold
(``fold_once``) and every detector is run on each host's whole read.  ``snapshot`` and
``preflight`` judge the state this gives, whatever the source.

The fold lives here, downstream of ``probes.sources``: a source only emits items, and
``fleet_state`` never learns where they came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from probes.analysis.limits import DetectorLimits
from probes.fleet_state import FleetState
from probes.outputs.fold_once import fold_once
from probes.sources.base import Backend
from probes.transport.session import ONCE_TIMEOUT_S, OnceResult, file_item
from probes.wire.events import SessionItem

READ_DEADLINE_S = ONCE_TIMEOUT_S + 10.0
"""A whole read ends by then: each host's own read has ``ONCE_TIMEOUT_S``, a source's
queries their client's timeouts; a host still silent at the deadline is reported so."""

Fold = Callable[[list[OnceResult]], FleetState]


@dataclass
class FleetRead:
    """What one read of a source gave: each host's items, the state they fold to, and when
    and how long it took."""

    fleet: FleetState
    results: list[OnceResult]
    """Each host's read, in the source's host order."""
    taken_at: float
    seconds: float


async def read_once(backend: Backend, *, limits: DetectorLimits | None = None,
                    fold: Fold | None = None,
                    deadline_s: float = READ_DEADLINE_S) -> FleetRead:
    """Run ``backend`` once into a fleet state (``fold``: how the reads fold; default
    ``fold_once`` with ``limits``).

    Raises:
        whatever the source raises when it cannot be read at all (PrometheusError, …).
    """
    started = time.perf_counter()
    results = {s.name: OnceResult(s) for s in backend.specs}

    def file(host: str, item: SessionItem) -> None:
        r = results.get(host)
        if r is not None:
            file_item(r, item)

    with contextlib.suppress(asyncio.TimeoutError):  # the hosts still silent say so
        await asyncio.wait_for(backend.run_once(file), deadline_s)
    for r in results.values():
        if r.sample is None and r.failure is None:
            r.failure = f"no sample within {deadline_s:g} s"
    ordered = list(results.values())
    fleet = fold(ordered) if fold is not None else fold_once(ordered, limits=limits)
    return FleetRead(fleet, ordered, time.time(), time.perf_counter() - started)
