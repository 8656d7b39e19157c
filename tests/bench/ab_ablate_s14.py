"""Ablations for ``bench_collector_ab.py`` at session 14 (measurement only, never a
product): where a collector's steady-state CPU goes above the floor's.

* ``base``: the product;
* ``floorlike``: each session's reader does the floor's work (split, ``orjson.loads``),
  nothing decoded, checked or relayed (the sessions, channel, keepalive, stall watch and
  loop are the product's);
* ``decoded``: the reader's one step decodes and checks the tick (``quick_row``), nothing
  relayed;
* ``nogc``: the product with the garbage collector off (its collections' share).

With ``RW_AB_GC=FILE`` every collection is counted (generation, seconds) into FILE at each
switch.

    python tests/bench/bench_collector_ab.py --variants tests/bench/ab_ablate_s14.py
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from probes.transport.relay import RelayReader

Install = Callable[[], Callable[[], None]]
_gc_log: dict[str, Any] = {"t": 0.0, "n": [0, 0, 0], "s": [0.0, 0.0, 0.0]}


def _gc_hook(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_log["t"] = time.perf_counter()
    else:
        g = info["generation"]
        _gc_log["n"][g] += 1
        _gc_log["s"][g] += time.perf_counter() - _gc_log["t"]


if os.environ.get("RW_AB_GC"):
    gc.callbacks.append(_gc_hook)


def _note(name: str) -> None:
    path = os.environ.get("RW_AB_GC")
    if path:
        with open(path, "a") as f:
            f.write(f"{name} {_gc_log['n']} {[round(s, 4) for s in _gc_log['s']]}\n")
        _gc_log["n"], _gc_log["s"] = [0, 0, 0], [0.0, 0.0, 0.0]


def _base() -> Callable[[], None]:
    return lambda: _note("base")


def _floorlike() -> Callable[[], None]:
    saved = RelayReader.feed

    def feed(self: Any, chunk: bytes) -> list[Any]:
        *done, self._floor_buf = (getattr(self, "_floor_buf", b"") + chunk).split(b"\n")
        for ln in done:
            orjson.loads(ln)
        return []

    RelayReader.feed = feed  # type: ignore[method-assign]

    def undo() -> None:
        RelayReader.feed = saved  # type: ignore[method-assign]
        _note("floorlike")
    return undo


def _decoded() -> Callable[[], None]:
    saved = RelayReader.feed

    def feed(self: Any, chunk: bytes) -> list[Any]:
        stream = self.compact
        if stream is not None and chunk[:1] == b"[" and chunk.find(b"\n") == len(chunk) - 1 \
                and stream.quick_row(chunk[:-1]) is not None:
            self.stats.lines += 1
            return []
        return saved(self, chunk)

    RelayReader.feed = feed  # type: ignore[method-assign]

    def undo() -> None:
        RelayReader.feed = saved  # type: ignore[method-assign]
        _note("decoded")
    return undo


def _nogc() -> Callable[[], None]:
    gc.disable()

    def undo() -> None:
        gc.enable()
        _note("nogc")
    return undo


VARIANTS: list[tuple[str, Install]] = [("base", _base), ("floorlike", _floorlike),
                                       ("decoded", _decoded), ("nogc", _nogc)]
