"""A collector process: runs the SSH (or local) sessions of one shard of the fleet.

Started by ``CollectorBackend`` as ``python -m probes.transport.collector_worker``; see
``collector_wire`` for what travels on its pipes.  The sessions are the console's own
(``AgentFleetBackend``: same backoff, stall and garbage limits, host-key policy), so a
host behaves the same in a collector as in the console; only where the CPU is spent
changes: handshakes, encryption and the session's own decode run here, on another core.

A collector never outlives the console: it asks the kernel for SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)`` on Linux), checks its parent id every ``PARENT_POLL_S`` where
that is not available, and stops on the end of stdin or a broken stdout.  Stopping, it
closes its sessions (each remote agent gets EOF) within ``STOP_S``, then kills what is left
of its process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from probes.transport.backend import AgentFleetBackend
from probes.transport.collector_wire import (
    HEARTBEAT_S,
    RETRY,
    Batch,
    CollectorJob,
    frame,
    frame_length,
    unframe,
)
from probes.wire.events import SessionItem
from probes.wire.protocol import MessageReader
from probes.wire.samples import AgentMessage

log = logging.getLogger("rigwatch.collector")

PARENT_POLL_S = 1.0
STOP_S = 8.0
"""Stopping the sessions gets this long, then ``EXIT_S`` more before the collector's group
is killed (within the console's own ``collectors.STOP_S``)."""
EXIT_S = 2.0
"""After the sessions' stop, the interpreter's own shutdown gets this long."""
PR_SET_PDEATHSIG = 1


class RelayReader(MessageReader):
    """A session's reader that also hands every chunk it is fed to the relay, first.

    The messages it decodes are the session's to act on, not to forward: the console
    decodes the same bytes itself.  ``mine`` holds them (strongly, so no id is reused)
    until the next chunk; the relay's emit drops any item it finds there.
    """

    def __init__(self, index: int, relay: Relay) -> None:
        super().__init__()
        self._index = index
        self._relay = relay
        self.mine: dict[int, AgentMessage] = {}

    def feed(self, chunk: bytes) -> list[AgentMessage]:
        self._relay.add(self._index, bytes(chunk))
        return self._keep(super().feed(chunk))

    def close(self) -> list[AgentMessage]:
        self._relay.add(self._index, None)
        return self._keep(super().close())

    def _keep(self, items: list[AgentMessage]) -> list[AgentMessage]:
        self.mine = {id(m): m for m in items}
        return items


class Relay:
    """Batches entries and writes one frame per ``flush_s`` to the console."""

    def __init__(self, job: CollectorJob, out: BinaryIO,
                 on_broken: Callable[[], None] | None = None) -> None:
        self.job = job
        self.index = {spec.name: i for i, spec in enumerate(job.specs)}
        self.readers: dict[str, RelayReader] = {}
        self._out = out
        self._batch: Batch = []
        self._flush: asyncio.TimerHandle | None = None
        self._on_broken = on_broken
        self._wrote = time.monotonic()
        self._beat: asyncio.TimerHandle | None = None

    def new_reader(self, host: str) -> MessageReader:
        reader = RelayReader(self.index[host], self)
        self.readers[host] = reader
        return reader

    def emit(self, host: str, item: SessionItem) -> None:
        """The sessions' emit: items the reader decoded stay here, the rest travel."""
        reader = self.readers.get(host)
        if reader is not None and reader.mine.pop(id(item), None) is not None:
            return
        self.add(self.index[host], item)

    def add(self, index: int, entry: bytes | SessionItem | None) -> None:
        self._batch.append((index, entry))
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self.job.flush_s, self.flush)

    def flush(self) -> None:
        """Write the batch as one frame (blocking: a console that stops reading slows the
        collector down rather than letting it buffer without bound)."""
        self._flush = None
        if not self._batch:
            return
        batch, self._batch = self._batch, []
        self._write(frame(batch))

    def heartbeat(self) -> None:
        """An empty batch when nothing was sent for ``HEARTBEAT_S``; then again and again."""
        if time.monotonic() - self._wrote >= HEARTBEAT_S:
            self._write(frame([]))
        self._beat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self.heartbeat)

    def stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()

    def _write(self, data: bytes) -> None:
        try:
            self._out.write(data)
            self._out.flush()
        except OSError:  # the console is gone: nobody reads what we would send
            self._batch.clear()
            if self._on_broken is not None:
                self._on_broken()
            return
        self._wrote = time.monotonic()


async def _commands(stdin: asyncio.StreamReader, backend: AgentFleetBackend,
                    job: CollectorJob) -> None:
    """Follow the console's commands until it closes our stdin."""
    while line := await stdin.readline():
        word, _, arg = line.decode(errors="replace").strip().partition(" ")
        if word == RETRY and arg.isdigit() and int(arg) < len(job.specs):
            backend.retry_now(job.specs[int(arg)].name)


async def serve(job: CollectorJob, stdin: asyncio.StreamReader, out: BinaryIO,
                on_broken: Callable[[], None] | None = None) -> None:
    """Run the shard's sessions until stdin ends (or this task is cancelled: the console
    died); then stop every agent, within ``STOP_S``, and return."""
    relay = Relay(job, out, on_broken)
    relay.heartbeat()  # at once: the console counts the silence from our start
    backend = AgentFleetBackend(list(job.specs), max_connecting=job.max_connecting,
                                new_reader=relay.new_reader)
    sessions = asyncio.create_task(backend.run(relay.emit), name="collector sessions")
    try:
        await _commands(stdin, backend, job)
    finally:
        relay.stop()
        sessions.cancel()
        await asyncio.wait({sessions}, timeout=STOP_S)
        relay.flush()


def _kill_group_after(seconds: float) -> None:
    """A stop that hangs (a session that never closes) must not keep the collector alive:
    after ``seconds`` the whole group (this process and its local agents) is killed."""
    def kill() -> None:
        time.sleep(seconds)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    threading.Thread(target=kill, name="collector stop deadline", daemon=True).start()


def die_with_parent(parent: int) -> bool:
    """Ask the kernel for SIGTERM when the console dies (Linux); False when the console is
    already gone (the request would then never fire)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    return parent <= 0 or os.getppid() == parent


async def _parent_gone(parent: int) -> None:
    """Returns when the console that started us is no longer our parent."""
    while parent <= 0 or os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL_S)


async def _main(parent: int) -> None:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, main.cancel)
    def stop(*_: object) -> None:
        main.cancel()

    orphan = loop.create_task(_parent_gone(parent))
    orphan.add_done_callback(stop)
    stdin = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    try:
        length = frame_length(await stdin.readexactly(4))
        job = unframe(await stdin.readexactly(length))
        if not isinstance(job, CollectorJob):
            raise SystemExit("rigwatch collector: the first frame is not a job")
        await serve(job, stdin, os.fdopen(sys.stdout.fileno(), "wb", closefd=False), stop)
    except asyncio.CancelledError:
        log.warning("the console is gone: stopped")
    finally:
        orphan.cancel()
        _kill_group_after(EXIT_S)  # serve gave the sessions STOP_S: what is left goes


def main() -> None:
    """Entry point of the collector process: ``collector_worker [CONSOLE_PID]``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="collector %(process)d: %(levelname)s %(name)s: %(message)s")
    parent = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
    if not die_with_parent(parent):
        raise SystemExit("rigwatch collector: the console is already gone")
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        asyncio.run(_main(parent))


if __name__ == "__main__":
    main()
