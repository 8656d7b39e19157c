"""A session holds no message it has emitted (issue 38, memory).

In a collector a v2 tick decodes to nothing (the reader only checks it and relays it), so a
loop variable in the session's frame kept the last message it did decode, the host's hello
or fabric report (~8 KB a host), for as long as the ticks went on.  Here a stream of a
hello, the static facts and ticks (``bench_ingest``'s simulated host) goes through
``run_session`` with such a reader; once ticks have followed the hello, nothing but the
emitted list's weak references points at it.  Negative control: the session's loop as it
was (main at 5b279c4, ``_old_stream_once`` below) keeps the hello alive.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref
from typing import Any

import pytest

import probes.transport.session as session
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind, TransportError
from probes.transport import Transport
from probes.transport.session import (
    MAX_BAD_LINES_IN_A_ROW,
    SessionPolicy,
    StreamGarbled,
    _StallWatch,
    _stop_quietly,
    crash_reason,
    run_session,
)
from probes.wire.events import Connected, Emit
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, ProbeError
from tests.bench.bench_ingest import template

log = logging.getLogger(__name__)


class _ChecksTicks(MessageReader):
    """A collector's reader as far as the session sees it: a tick decodes to nothing."""

    builds_ticks = False


class _Stream:
    """The simulated host's hello and static facts, then one tick a chunk, then silence."""

    def __init__(self) -> None:
        (_, _), (hello, ticks) = template(0, 12)
        self._chunks = [hello, *ticks]
        self.notes: list[str] = []
        self.sent = 0

    async def start(self) -> None:
        return None

    async def chunks(self):  # type: ignore[no-untyped-def]
        for c in self._chunks:
            await asyncio.sleep(0.01)
            self.sent += 1
            yield c
        await asyncio.sleep(3600)

    async def exit_reason(self) -> str:
        return "agent closed its output"

    async def stop(self) -> None:
        return None


async def _hello_alive_after_ticks(monkeypatch: pytest.MonkeyPatch) -> bool:
    stream = _Stream()
    monkeypatch.setattr(session, "make_transport", lambda *_a, **_k: stream)
    hellos: list[weakref.ref[Hello]] = []

    def emit(_host: str, item: Any) -> None:
        if isinstance(item, Hello):
            hellos.append(weakref.ref(item))

    task = asyncio.create_task(run_session(
        HostSpec(name="h1"), emit, SessionPolicy(0.01, 0.01, jitter=0.0, stall_s=60.0),
        new_reader=lambda _name: _ChecksTicks()))
    t0 = time.monotonic()
    while stream.sent < len(stream._chunks):
        assert time.monotonic() - t0 < 10.0
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)
    gc.collect()
    try:
        assert len(hellos) == 1
        return hellos[0]() is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_session_lets_go_of_the_last_message(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not await _hello_alive_after_ticks(monkeypatch)


async def test_negative_control_the_loop_before_holds_the_hello(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "_stream_once", _old_stream_once)
    assert await _hello_alive_after_ticks(monkeypatch)


# --- the session's loop before (main at 5b279c4) --------------------------------------------

async def _old_stream_once(spec: HostSpec, emit: Emit, transport: Transport,
                       reader: MessageReader, stall_s: float) -> tuple[DisconnectKind, str, bool]:
    """Run one connection to its end; returns (kind, reason, whether any message came)."""
    got_any = False
    try:
        await transport.start()
        for note in transport.notes:
            emit(spec.name, ProbeError(time.time(), "transport", note))
        emit(spec.name, Connected(time.time()))
        with _StallWatch(stall_s) as watch:
            try:
                async for chunk in transport.chunks():
                    watch.fed()
                    for msg in reader.feed(chunk):
                        got_any = True
                        emit(spec.name, msg)
                    if reader.bad_streak > MAX_BAD_LINES_IN_A_ROW:
                        raise StreamGarbled(f"{reader.bad_streak} unusable lines in a row")
            except asyncio.CancelledError:
                if not watch.fired:
                    raise
                raise watch.stalled() from None
        for msg in reader.close():
            emit(spec.name, msg)
        return DisconnectKind.DOWN, await transport.exit_reason(), got_any
    except TransportError as exc:
        return exc.kind, exc.msg, got_any
    except Exception as exc:  # any failure is this host's state, never a crash
        # A reader that raised on hostile input (RecursionError), a transport's bug: this
        # host shows agent-failed and retries; the other hosts never hear of it.
        log.warning("%s: session failed", spec.name, exc_info=True)
        return DisconnectKind.AGENT_FAILED, f"session failed: {crash_reason(exc)}", got_any
    finally:
        await _stop_quietly(spec, transport)

