"""Ablations for ``bench_collector_ab.py`` (measurement only, never a product): each variant
removes one part of a collector's tick path, to see what it costs in a real collector
(RESULTS.md, "#38 the collectors' steady state").  ``RW_AB_SET`` picks the set:

* ``parts`` (default): base, ticks decoded but not relayed, tick lines skipped;
* ``relay``: base, not relayed, encoded but not queued, queued as an empty row;
* ``floor``: base, tick lines skipped, the floor's own handler (split, ``orjson.loads``)
  in ``PushProcess.data_received`` with nothing to the session.

    RW_AB_SET=floor python tests/bench/bench_collector_ab.py --variants tests/bench/ab_ablate_s11.py
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from probes.transport import relay as relay_module
from probes.transport.relay import Relay, RelayReader
from probes.transport.ssh_push import PushProcess
from probes.wire.samples import AgentMessage, Hello

Install = Callable[[], Callable[[], None]]


def _lines(mode: str) -> Callable[[RelayReader, Iterable[bytes | None]], list[AgentMessage]]:
    """``RelayReader._relay_lines`` with its tick step cut as ``mode`` says."""
    def relay_lines(self: RelayReader, lines: Iterable[bytes | None]) -> list[AgentMessage]:
        items: list[AgentMessage] = []
        run: list[bytes] = []
        r, index = self._relay, self._index
        for line in lines:
            if mode == "skip" and line is not None and line[:1] == b"[":
                continue
            self.tick_row = None
            msg = self._decode(line)
            if msg is not None:
                items.append(msg)
            if line is None:
                continue
            if type(msg) is Hello:
                if run:
                    r.add(index, b"".join(run))
                    run = []
                r.add_hello(index, relay_module.relayed_hello(self, line, msg), line)
                continue
            row = self.tick_row
            if row is not None and self.compact is not None:
                if run:
                    r.add(index, b"".join(run))
                    run = []
                if index not in r.lost_static:
                    if mode == "encode":
                        relay_module.relayed_tick(self.compact.static_id, row)
                    elif mode == "empty":
                        r.add_tick(index, (self.compact.static_id, b""))
                    elif mode != "none":
                        r.add_tick(index, relay_module.relayed_tick(self.compact.static_id, row))
                    continue
            run += (line, b"\n")
        if run:
            r.add(index, b"".join(run))
        self.tick_row = None
        self.mine = {id(m): m for m in items}
        return items
    return relay_lines


def _general(mode: str) -> Install:
    """Every chunk the general way (no one step), with the tick step cut."""
    def install() -> Callable[[], None]:
        saved = RelayReader.feed, RelayReader._relay_lines
        RelayReader.feed = lambda self, chunk: self._relay_lines(  # type: ignore[method-assign]
            self._splitter.feed(chunk))
        RelayReader._relay_lines = _lines(mode)  # type: ignore[method-assign,assignment]

        def undo() -> None:
            RelayReader.feed, RelayReader._relay_lines = saved  # type: ignore[method-assign]
        return undo
    return install


def _floorlike() -> Callable[[], None]:
    saved = PushProcess.data_received

    def data_received(self: Any, data: bytes, datatype: Any) -> None:
        if datatype is None and self._sink is not None:
            *done, self._floor_buf = (getattr(self, "_floor_buf", b"") + data).split(b"\n")
            for ln in done:
                orjson.loads(ln)
            return
        saved(self, data, datatype)

    PushProcess.data_received = data_received  # type: ignore[method-assign]

    def undo() -> None:
        PushProcess.data_received = saved  # type: ignore[method-assign]
    return undo


_SETS: dict[str, list[tuple[str, Install]]] = {
    "parts": [("base", _general("relay")), ("not_relayed", _general("none")),
              ("ticks_skipped", _general("skip"))],
    "relay": [("base", _general("relay")), ("not_relayed", _general("none")),
              ("encoded_not_queued", _general("encode")),
              ("queued_empty", _general("empty"))],
    "floor": [("base", _general("relay")), ("ticks_skipped", _general("skip")),
              ("floorlike", _floorlike)],
}
VARIANTS = _SETS[os.environ.get("RW_AB_SET", "parts")]
_ = Relay  # the relay itself is not patched: its queue, frames and writes are the product's
