"""Local transport: the agent as a subprocess of the console (localhost and the demo fleet)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

from probes.errors import TransportError
from probes.transport.bootstrap import bootstrap_argv, shipped_source
from probes.transport.stderr_tail import StderrTail

READ_CHUNK = 64 * 1024


class LocalTransport:
    """Start the agent through the stdin bootstrap and read its stdout in chunks."""

    def __init__(self, agent_args: list[str], python: str | None = None) -> None:
        self.agent_args = agent_args
        self.python = python or sys.executable
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr = StderrTail()
        self.notes: list[str] = []
        """Nothing to report for a local process; kept for the session's interface."""

    async def start(self) -> None:
        """Spawn the agent and send it its source.

        Raises:
            TransportError: the interpreter cannot be started, or exits at once.
        """
        source = shipped_source(self.agent_args)
        argv = bootstrap_argv(self.python, self.agent_args, len(source))
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise TransportError(f"cannot start {self.python}: {exc.strerror or exc}") from None
        assert self._proc.stdin is not None and self._proc.stderr is not None
        self._stderr.follow(self._proc.stderr)
        try:
            self._proc.stdin.write(source)
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise TransportError(f"agent exited at start: {self.stderr_tail()}") from None

    async def chunks(self) -> AsyncIterator[bytes]:
        """Yield raw stdout chunks until the agent's stdout closes."""
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            chunk = await self._proc.stdout.read(READ_CHUNK)
            if not chunk:
                return
            yield chunk

    def stderr_tail(self) -> str:
        """The last line the agent wrote on stderr, for the "why did it stop" message."""
        return self._stderr.last_line()

    async def exit_reason(self) -> str:
        """Why the stream ended, once it has."""
        if self._proc is None:
            return "not started"
        try:
            rc = await asyncio.wait_for(self._proc.wait(), 2.0)
        except asyncio.TimeoutError:
            return "agent closed its output"
        await self._stderr.settle()
        tail = self.stderr_tail()
        return f"agent exited with status {rc}" + (f": {tail}" if tail else "")

    async def stop(self) -> None:
        """Close the agent's stdin (it exits at EOF), then make sure it is gone."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 3.0)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), 2.0)
        self._stderr.stop()
