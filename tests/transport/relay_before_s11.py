"""The collector's reader and relay as they were before session 11's one-step tick
(main ``c12fc7c``): every chunk through the line splitter and ``_relay_lines``, a tick
judged by ``CompactStream.readable`` as it was written then, queued through ``Relay._line``.
Kept for ``test_relay_one_step.py``, which compares the new path with this one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from probes.transport.collector_wire import relayed_hello, relayed_tick
from probes.transport.relay import Kind, Relay, RelayReader
from probes.wire import decode_fields, protocol
from probes.wire.compact import _DECODER, _DISK_NAME, CompactStream, SampleRow
from probes.wire.protocol import MessageReader
from probes.wire.samples import AgentMessage, Hello


class CompactStreamBefore(CompactStream):
    def readable(self, line: bytes | None, parsed: Callable[[], Any]) -> SampleRow | None:
        if self._has_static and self.known and line is not None:
            try:
                s = _DECODER.decode(line)
            except Exception:  # the checked path below decides
                pass
            else:
                if len(s.gpus) == len(self._fit) and \
                        self._procs_fit(s) and len(set(map(_DISK_NAME, s.disks))) == len(s.disks):
                    return s
        self.sample(line, parsed)
        return None


class RelayReaderBefore(RelayReader):
    """``RelayReader`` before: no one-step tick."""

    def _stream(self, columns: Any) -> CompactStream:
        return CompactStreamBefore(columns, decode_fields._decode_sample, builds=self.builds_ticks,
                                   parse=protocol._parsed)

    def feed(self, chunk: bytes) -> list[AgentMessage]:
        return self._relay_lines(self._splitter.feed(chunk))

    def close(self) -> list[AgentMessage]:
        items = self._relay_lines(self._splitter.flush())
        self._relay.add(self._index, None)
        return items

    def _relay_lines(self, lines: Iterable[bytes | None]) -> list[AgentMessage]:
        items: list[AgentMessage] = []
        run: list[bytes] = []
        relay, index = self._relay, self._index
        for line in lines:
            self.tick_row = None
            msg = self._decode(line)
            if msg is not None:
                items.append(msg)
            if line is None:  # over-long: counted, not relayed
                continue
            if type(msg) is Hello:  # decoded here: the console takes it as it is
                if run:
                    relay.add(index, b"".join(run))
                    run = []
                relay.add_hello(index, relayed_hello(self, line, msg), line)
                continue
            row = self.tick_row
            if row is not None and self.compact is not None:
                if run:  # first what came before (a static line the relay may drop)
                    relay.add(index, b"".join(run))
                    run = []
                if index not in relay.lost_static:
                    relay.add_tick(index, relayed_tick(self.compact.static_id, row))
                    continue
            run += (line, b"\n")
        if run:
            relay.add(index, b"".join(run))
        self.tick_row = None
        self.mine = {id(m): m for m in items}
        return items


class RelayBefore(Relay):
    """``Relay`` before: a tick queued through ``_line``; readers of the old kind."""

    def new_reader(self, host: str) -> MessageReader:
        reader = RelayReaderBefore(self.index[host], self)
        self.readers[host] = reader
        return reader

    def add_tick(self, index: int, tick: tuple[int, bytes]) -> None:
        self._line(index, tick, Kind.SAMPLE)
        if self._flush is None:
            import asyncio
            self._flush = asyncio.get_running_loop().call_later(self.job.flush_s, self.flush)
