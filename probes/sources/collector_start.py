"""Start the collector processes before the console's UI is imported and drawn (#38 item 5).

A collector process takes a few tenths of a second to start (the interpreter, asyncssh,
the sessions' modules) before its first SSH handshake; the console's UI takes most of a
second to import Textual and mount its first screen before its backend runs.  Started in
that order, one after the other, they were most of the second that the console's
start-up spent before its first handshake, and a fixed part of every connect storm.
``EarlyCollector.spawn`` starts the process (and hands it its job, as far as the pipe
takes it) as soon as the fleet is known, with the same argument list, pipes and session
as ``CollectorBackend`` uses; the backend's first run then adopts it (``adopt``) on its
event loop instead of starting another one.  A later restart starts afresh as before.

What the collector relays meanwhile waits in its pipe and in its relay, which never blocks
(``probes.transport.relay``).  Should the console never run its backend (it fails before),
the collector sees its stdin close, or its parent die, and stops as it always does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys

from probes.transport.collector_wire import CollectorJob, frame

WAIT_POLL_S = 0.05
"""How often an adopted process is polled for its exit (asyncio did not start it, so its
child watcher does not know it)."""


def collector_argv() -> list[str]:
    """The command that runs one collector for this console."""
    return [sys.executable, "-m", "probes.transport.collector_worker", str(os.getpid())]


class EarlyCollector:
    """A collector process started before the event loop runs, not yet adopted."""

    def __init__(self, popen: subprocess.Popen[bytes], unsent: bytes) -> None:
        self.popen = popen
        self.unsent = unsent
        """The job's bytes the pipe did not take at spawn: written once adopted."""

    @classmethod
    def spawn(cls, job: CollectorJob) -> EarlyCollector:
        """Start the collector and write as much of its job as its stdin pipe takes now
        (never blocking: the rest goes once the loop runs)."""
        popen = subprocess.Popen(collector_argv(), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        assert popen.stdin is not None
        data = frame(job)
        fd = popen.stdin.fileno()
        os.set_blocking(fd, False)
        sent = 0
        with contextlib.suppress(OSError):  # full (BlockingIOError) or gone: later
            while sent < len(data):
                sent += os.write(fd, data[sent:])
        return cls(popen, data[sent:])

    async def adopt(self) -> AdoptedProcess:
        """The process with asyncio streams on its pipes, as ``create_subprocess_exec``
        would have given it; the rest of its job already written to its stdin."""
        proc = await AdoptedProcess.of(self.popen)
        if self.unsent:
            proc.stdin.write(self.unsent)
        return proc


class AdoptedProcess:
    """What ``CollectorBackend`` uses of ``asyncio.subprocess.Process``, for a process
    started before the loop: ``pid``, ``returncode``, the three streams, ``wait``."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: asyncio.StreamWriter,
                 stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    async def of(cls, popen: subprocess.Popen[bytes]) -> AdoptedProcess:
        loop = asyncio.get_running_loop()
        assert popen.stdin is not None and popen.stdout is not None \
            and popen.stderr is not None
        readers: list[asyncio.StreamReader] = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader(loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            await loop.connect_read_pipe(lambda p=protocol: p, pipe)  # type: ignore[misc]
            readers.append(reader)
        transport, flow = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), popen.stdin)
        writer = asyncio.StreamWriter(transport, flow, None, loop)
        return cls(popen, writer, readers[0], readers[1])

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has ended (reaped here), else None."""
        return self._popen.poll()

    async def wait(self) -> int:
        """Wait for the process to end; its exit status."""
        while (rc := self._popen.poll()) is None:
            await asyncio.sleep(WAIT_POLL_S)
        return rc
