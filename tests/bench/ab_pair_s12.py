"""Variant sets for ``bench_client_pair.py``'s ``collector:SET`` clients (measurement only):
each set is one variant installed for the whole run (``bench_collector_ab``'s wrapper, which
installs it before the collector's loop starts).

* ``base``: the product on asyncio's own loop (as before ``coalesce``);
* ``base_co``: the product as it is (its loop coalescing wakes);
* ``floorlike``, ``floorlike_co``: the same with the floor's handler as each session's
  reader (``RelayReader.feed``: split, ``orjson.loads``): nothing is decoded or relayed,
  the stall watch is fed (``ab_ablate_s11``'s handler in ``PushProcess.data_received``
  starves it: run for longer than 15 s, every host reconnects).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import orjson

from probes.transport import coalesce
from probes.transport.relay import RelayReader

Install = Callable[[], Callable[[], None]]


def _plain_loop() -> Callable[[], None]:
    saved = coalesce.run
    coalesce.run = lambda main, gap_s=0.0: asyncio.run(main)

    def undo() -> None:
        coalesce.run = saved
    return undo


def _both(*installs: Install) -> Install:
    def install() -> Callable[[], None]:
        undos = [i() for i in installs]

        def undo() -> None:
            for u in reversed(undos):
                u()
        return undo
    return install


def _floorlike() -> Callable[[], None]:
    """Each session's reader does the floor's work (split, ``orjson.loads``) and nothing
    else: the session (its stall watch fed), the channel and the loop are the product's."""
    saved = RelayReader.feed

    def feed(self: Any, chunk: bytes) -> list[Any]:
        *done, self._floor_buf = (getattr(self, "_floor_buf", b"") + chunk).split(b"\n")
        for ln in done:
            orjson.loads(ln)
        return []

    RelayReader.feed = feed  # type: ignore[method-assign]

    def undo() -> None:
        RelayReader.feed = saved  # type: ignore[method-assign]
    return undo


def _nothing() -> Callable[[], None]:
    return lambda: None


_SETS: dict[str, list[tuple[str, Install]]] = {
    "base": [("base", _plain_loop)],
    "base_co": [("base_co", _nothing)],
    "floorlike": [("floorlike", _both(_plain_loop, _floorlike))],
    "floorlike_co": [("floorlike_co", _floorlike)],
}
VARIANTS = _SETS[os.environ.get("RW_PAIR_SET", "base")]
