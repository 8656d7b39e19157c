"""A collector's per-chunk steps as they were before session 14 (main ``628515e``), kept
for ``test_coll_steps_s14.py`` (the same frames from old and new code) and for the
benches' ``before`` variant (``tests/bench/ab_coll14.py``):

* ``quick_row``: the GPU count, then ``_procs_fit`` (a method call), then every row's disk
  names through a set;
* ``RelayReader.feed``: the one step judges a copy of the chunk without its newline;
* the session's ``feed``: ``emit_each`` called for every chunk (an empty list nearly
  always), the stall watch's ``fed`` through ``loop.time()``;
* ``PushProcess``: every chunk through ``push_to``'s ``take`` (a frame that catches what
  the sink raised);
* ``LazyKeepalive.reset``: ``conn._loop.time()``.

``install()`` puts them in place (class attributes and ``session._stream_once``) and
returns the undo.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from probes.errors import DisconnectKind, TransportError
from probes.transport import read_chunks
from probes.transport import session as session_module
from probes.transport.collector_wire import relayed_tick
from probes.transport.relay import RelayReader
from probes.transport.session import (
    MAX_BAD_LINES_IN_A_ROW,
    StreamGarbled,
    _StallWatch,
    _stop_quietly,
    crash_reason,
)
from probes.transport.ssh_keepalive import LazyKeepalive
from probes.transport.ssh_push import PushProcess, Sink, _as_is, _drop
from probes.wire.compact import _DECODER, _DISK_NAME, CompactStream, SampleRow
from probes.wire.events import Connected, Emit, emit_each
from probes.wire.protocol import MAX_LINE_BYTES, MessageReader
from probes.wire.samples import AgentMessage, ProbeError
from probes.wire.sanitize import may_need_cleaning


def quick_row(self: CompactStream, line: bytes) -> SampleRow | None:
    if self._has_static and self.known:
        try:
            s = _DECODER.decode(line)
        except Exception:  # the checked path decides
            return None
        if len(s.gpus) == len(self._fit) and \
                self._procs_fit(s) and len(set(map(_DISK_NAME, s.disks))) == len(s.disks):
            return s
    return None


def feed(self: RelayReader, chunk: bytes) -> list[AgentMessage]:
    stream = self.compact
    if stream is not None and chunk[:1] == b"[" and chunk.find(b"\n") == len(chunk) - 1:
        line = chunk[:-1]
        relay, index = self._relay, self._index
        if self._splitter.idle() and len(line) <= MAX_LINE_BYTES and \
                index not in relay.lost_static and not may_need_cleaning(line):
            try:
                row = stream.quick_row(line)
            except Exception:
                row = None
            if row is not None:
                self.stats.lines += 1
                self.bad_streak = 0
                if self.mine:
                    self.mine = {}
                relay.add_tick(index, relayed_tick(stream.static_id, row))
                return []
    return self._relay_lines(self._splitter.feed(chunk))


def fed(self: _StallWatch) -> None:
    self._last = self._loop.time()


async def _stream_once(spec: Any, emit: Emit, transport: Any,
                       reader: MessageReader, stall_s: float) -> tuple[DisconnectKind, str, bool]:
    got_any = False
    try:
        await transport.start()
        for note in transport.notes:
            emit(spec.name, ProbeError(time.time(), "transport", note))
        emit(spec.name, Connected(time.time()))
        with _StallWatch(stall_s) as watch:
            def feed(chunk: bytes) -> None:
                nonlocal got_any
                watch.fed()
                got_any = emit_each(spec.name, reader.feed(chunk), emit) or got_any
                if reader.bad_streak > MAX_BAD_LINES_IN_A_ROW:
                    raise StreamGarbled(f"{reader.bad_streak} unusable lines in a row")
            try:
                await read_chunks(transport, feed)
            except asyncio.CancelledError:
                if not watch.fired:
                    raise
                raise watch.stalled() from None
        for msg in reader.close():
            emit(spec.name, msg)
        return DisconnectKind.DOWN, await transport.exit_reason(), got_any
    except TransportError as exc:
        return exc.kind, exc.msg, got_any
    except Exception as exc:
        session_module.log.warning("%s: session failed", spec.name, exc_info=True)
        return DisconnectKind.AGENT_FAILED, f"session failed: {crash_reason(exc)}", got_any
    finally:
        await _stop_quietly(spec, transport)


def data_received(self: PushProcess, data: bytes, datatype: Any) -> None:
    if datatype is None:
        if self._sink is not None:
            self._sink(data)
            return
        if self._held is not None:
            self._held.append(data)
            return
    super(PushProcess, self).data_received(data, datatype)


async def push_to(self: PushProcess, sink: Sink,
                  broken: Callable[[BaseException], BaseException] = _as_is) -> None:
    def take(chunk: bytes) -> None:
        try:
            sink(chunk)
        except Exception as exc:
            self._sink = _drop
            self._finish(exc, False)

    held, self._held = self._held or [], None
    self._sink, self._broken = take, broken
    try:
        for chunk in held:
            take(chunk)
        if self._end is None:
            self._ended = asyncio.get_running_loop().create_future()
            await self._ended
        else:
            exc, channel = self._end
            if exc is not None:
                raise broken(exc) if channel else exc
    finally:
        self._sink = _drop
        self._ended = None


def reset(self: LazyKeepalive) -> None:
    conn = self._conn
    if conn._auth_complete:
        self._last_read = conn._loop.time()
        if conn._keepalive_timer is None:
            conn._set_keepalive_timer()


def install() -> Callable[[], None]:
    """The steps before session 14 in place of the product's; returns the undo."""
    saved: list[tuple[Any, str, Any]] = [
        (CompactStream, "quick_row", CompactStream.quick_row),
        (RelayReader, "feed", RelayReader.feed),
        (_StallWatch, "fed", _StallWatch.fed),
        (session_module, "_stream_once", session_module._stream_once),
        (PushProcess, "data_received", PushProcess.data_received),
        (PushProcess, "push_to", PushProcess.push_to),
        (LazyKeepalive, "reset", LazyKeepalive.reset)]
    new = [quick_row, feed, fed, _stream_once, data_received, push_to, reset]
    for (owner, name, _), value in zip(saved, new, strict=True):
        setattr(owner, name, value)

    def undo() -> None:
        for owner, name, value in saved:
            setattr(owner, name, value)
    return undo
