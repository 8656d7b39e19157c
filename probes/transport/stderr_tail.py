"""Keep the last few KiB of an agent's stderr: the line that says why it died."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

KEEP_BYTES = 4096
READ_CHUNK = 64 * 1024


class _Readable(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class StderrTail:
    """Drain a stderr stream in the background, keeping only its end."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._task: asyncio.Task[None] | None = None

    def follow(self, stream: _Readable, errors: tuple[type[BaseException], ...] = ()) -> None:
        """Start draining ``stream``; ``errors`` end the drain quietly (a closed channel)."""

        async def drain() -> None:
            with contextlib.suppress(*errors):
                while chunk := await stream.read(READ_CHUNK):
                    self._buf += chunk
                    del self._buf[:-KEEP_BYTES]

        self._task = asyncio.create_task(drain())

    async def settle(self, timeout_s: float = 1.0) -> None:
        """Give the drain a moment to read what the process wrote before it exited."""
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)

    def last_line(self) -> str:
        """The last non-empty line written, or ''."""
        text = self._buf.decode("utf-8", "replace").strip()
        return text.splitlines()[-1] if text else ""

    def stop(self) -> None:
        """Stop draining."""
        if self._task is not None:
            self._task.cancel()
