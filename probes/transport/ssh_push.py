"""An agent's stdout handed to the session as each chunk arrives, not read from a stream.

Reading ``SSHClientProcess.stdout`` costs, for every chunk of every host, a stream buffer,
a lock, a future, a wake of the session's task and an async generator step: a fifth of a
collector's busy time under cProfile at 256 hosts (issue 38, tests/bench/RESULTS.md "#38 the
collector's CPU (session 7)").  ``PushProcess`` calls the session's sink from the
channel's own ``data_received`` instead, as a bare ``SSHClientSession`` does: same bytes,
same order, no task switch.

Until a sink is attached, stdout is held in order (what the agent sent between its start
and the session's first read); ``held_chunks`` gives them up to a caller that reads the old
way (the process's stdout stream, an async iterator).  The end of the stream is the
stream's: EOF or a clean close, or the channel lost with an error ("stream broke").
stderr is not touched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncssh

Sink = Callable[[bytes], None]


def _drop(_chunk: bytes) -> None:
    """After the session stopped reading: nothing more is kept (it closes the channel)."""


def _as_is(exc: BaseException) -> BaseException:
    return exc


class PushProcess(asyncssh.SSHClientProcess[bytes]):
    """An ``SSHClientProcess`` whose stdout goes to a sink (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: list[bytes] | None = []
        """stdout before a sink (or the stream) took over; None once one did."""
        self._sink: Sink | None = None
        self._ended: asyncio.Future[None] | None = None
        self._end: tuple[BaseException | None, bool] | None = None
        """How stdout ended, once it did: (None, _) at EOF, (error, True) when the channel
        broke, (error, False) when the sink failed."""
        self._broken: Callable[[BaseException], BaseException] = _as_is

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype is None:
            sink = self._sink
            if sink is not None:
                try:  # as ``take`` does, without its frame (a chunk a tick, issue 38)
                    sink(data)
                except Exception as exc:  # the session ends on it, in its own task
                    self._sink = _drop
                    self._finish(exc, False)
                return
            if self._held is not None:
                self._held.append(data)
                return
        super().data_received(data, datatype)

    def eof_received(self) -> bool:
        self._finish(None, True)
        return bool(super().eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(exc, True)
        super().connection_lost(exc)

    def _finish(self, exc: BaseException | None, channel: bool) -> None:
        if self._end is None:
            self._end = (exc, channel)
            if self._ended is not None and not self._ended.done():
                if exc is None:
                    self._ended.set_result(None)
                else:
                    self._ended.set_exception(self._broken(exc) if channel else exc)

    async def push_to(self, sink: Sink,
                      broken: Callable[[BaseException], BaseException] = _as_is) -> None:
        """Hand stdout to ``sink`` (what was held first) until it ends; returns at EOF.

        Raises what the sink raised (the session's: a garbled stream, a reader's bug; the
        chunks after it are dropped), or ``broken`` of the channel's error when it broke."""
        def take(chunk: bytes) -> None:
            try:
                sink(chunk)
            except Exception as exc:  # the session ends on it, in its own task
                self._sink = _drop
                self._finish(exc, False)

        held, self._held = self._held or [], None
        self._sink, self._broken = sink, broken  # ``data_received`` catches as ``take``
        try:
            for chunk in held:
                take(chunk)
            if self._end is None:
                self._ended = asyncio.get_running_loop().create_future()
                await self._ended
            else:  # it ended before we came, or while the held chunks went
                exc, channel = self._end
                if exc is not None:
                    raise broken(exc) if channel else exc
        finally:
            self._sink = _drop
            self._ended = None

    def held_chunks(self) -> list[bytes]:
        """What was held, taken: from now on stdout goes to the process's stream (the
        pull way, ``stdout.read``)."""
        held, self._held = self._held or [], None
        return held
