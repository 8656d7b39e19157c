"""A collector process: runs the SSH (or local) sessions of one shard of the fleet.

Started by ``CollectorBackend`` as ``python -m probes.transport.collector_worker``; see
``collector_wire`` for what travels on its pipes.  The sessions are the console's own
(``AgentFleetBackend``: same backoff, stall and garbage limits, host-key policy), so a
host behaves the same in a collector as in the console; only where the CPU is spent
changes: handshakes, encryption and the session's own decode run here, on another core.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import BinaryIO

from probes.transport.backend import AgentFleetBackend
from probes.transport.collector_wire import (
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

    def __init__(self, job: CollectorJob, out: BinaryIO) -> None:
        self.job = job
        self.index = {spec.name: i for i, spec in enumerate(job.specs)}
        self.readers: dict[str, RelayReader] = {}
        self._out = out
        self._batch: Batch = []
        self._flush: asyncio.TimerHandle | None = None

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
        self._out.write(frame(batch))
        self._out.flush()


async def _commands(stdin: asyncio.StreamReader, backend: AgentFleetBackend,
                    job: CollectorJob) -> None:
    """Follow the console's commands until it closes our stdin."""
    while line := await stdin.readline():
        word, _, arg = line.decode(errors="replace").strip().partition(" ")
        if word == RETRY and arg.isdigit() and int(arg) < len(job.specs):
            backend.retry_now(job.specs[int(arg)].name)


async def serve(job: CollectorJob, stdin: asyncio.StreamReader, out: BinaryIO) -> None:
    """Run the shard's sessions until stdin ends; then stop every agent and return."""
    relay = Relay(job, out)
    backend = AgentFleetBackend(list(job.specs), max_connecting=job.max_connecting,
                                new_reader=relay.new_reader)
    sessions = asyncio.create_task(backend.run(relay.emit), name="collector sessions")
    try:
        await _commands(stdin, backend, job)
    finally:
        sessions.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sessions
        with contextlib.suppress(OSError):
            relay.flush()


async def _main() -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    length = frame_length(await stdin.readexactly(4))
    job = unframe(await stdin.readexactly(length))
    if not isinstance(job, CollectorJob):
        raise SystemExit("rigwatch collector: the first frame is not a job")
    await serve(job, stdin, os.fdopen(sys.stdout.fileno(), "wb", closefd=False))


def main() -> None:
    """Entry point of the collector process."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="collector %(process)d: %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        asyncio.run(_main())


if __name__ == "__main__":
    main()
