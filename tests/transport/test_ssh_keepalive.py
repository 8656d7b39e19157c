"""The lazily re-armed keepalive sends its requests and drops at asyncssh's own times.

asyncssh's real keepalive methods (``SSHConnection._reset_keepalive_timer`` and friends, taken
from the installed asyncssh) run on a stand-in connection over a virtual clock; the same random
reads and keepalive answers go through a second stand-in with ``lazy_keepalive`` installed.
Every keepalive request and the drop must come at the same virtual time.  A negative control
(a read that notes nothing) shows the comparison can fail.  One test installs it on a real
asyncssh client connection, so an asyncssh that renamed what this relies on is caught.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from asyncssh.connection import SSHConnection

from probes.transport import ssh_keepalive
from probes.transport.ssh_keepalive import LazyKeepalive, lazy_keepalive


class Handle:
    def __init__(self, when: float, seq: int, callback: Callable[[], None]) -> None:
        self.when, self.seq, self.callback, self.cancelled = when, seq, callback, False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: Handle) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class VirtualLoop:
    """``time`` and ``call_later`` on a clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.heap: list[Handle] = []
        self.seq = itertools.count()
        self.armed = 0

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Handle:
        self.armed += 1
        h = Handle(self.now + delay, next(self.seq), callback)
        heapq.heappush(self.heap, h)
        return h

    def run_until(self, t: float) -> None:
        while self.heap and self.heap[0].when <= t:
            h = heapq.heappop(self.heap)
            if not h.cancelled:
                self.now = h.when
                h.callback()
        self.now = t


class StandIn:
    """The attributes and methods asyncssh's keepalive code uses, its own methods bound."""

    _cancel_keepalive_timer = SSHConnection._cancel_keepalive_timer
    _set_keepalive_timer = SSHConnection._set_keepalive_timer
    _reset_keepalive_timer = SSHConnection._reset_keepalive_timer
    _keepalive_timer_callback = SSHConnection._keepalive_timer_callback

    def __init__(self, interval: float, count_max: int, answers: list[float | None]) -> None:
        self._loop = VirtualLoop()
        self._auth_complete = True
        self._keepalive_interval = interval
        self._keepalive_count = 0
        self._keepalive_count_max = count_max
        self._keepalive_timer: Handle | None = None
        self.answers = iter(answers)
        """Per keepalive request: the answer's delay, or None (never answered)."""
        self.events: list[tuple[str, float]] = []
        self.lost = False

    def is_client(self) -> bool:
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append(("lost", self._loop.now))
        self.lost = True
        self._cancel_keepalive_timer()

    async def _make_keepalive_request(self) -> None:  # never awaited here
        raise AssertionError

    def create_task(self, coro: Any) -> None:
        coro.close()
        self.events.append(("keepalive", self._loop.now))
        delay = next(self.answers, None)
        if delay is not None:
            self._loop.call_later(delay, self._answered)

    def _answered(self) -> None:
        if not self.lost:  # the answer is a packet read, then the request's await returns
            self.read()
            self._keepalive_count = 0

    def read(self) -> None:
        if not self.lost:
            self._reset_keepalive_timer()


def run(reads: list[float], answers: list[float | None], interval: float, count_max: int,
        lazy: Callable[[Any], object] | None) -> tuple[list[tuple[str, float]], int]:
    conn = StandIn(interval, count_max, answers)
    conn._set_keepalive_timer()  # armed at the end of authentication, as asyncssh does
    if lazy is not None:
        lazy(conn)
    for t in reads:
        conn._loop.run_until(t)
        conn.read()
    conn._loop.run_until((reads[-1] if reads else 0.0) + interval * (count_max + 3))
    return conn.events, conn._loop.armed


def scenario(rng: random.Random) -> tuple[list[float], list[float | None], float, int]:
    interval = rng.choice([0.5, 1.0, 5.0, 15.0])
    t, reads = 0.0, []
    for _ in range(rng.randrange(0, 400)):
        # mostly a streaming host (several packets a second), now and then a long silence
        t += rng.expovariate(4.0) if rng.random() < 0.97 else rng.uniform(0, 4 * interval)
        reads.append(round(t, 6))
    answers: list[float | None] = [
        None if rng.random() < 0.3 else rng.uniform(0, 0.8 * interval) for _ in range(50)]
    return reads, answers, interval, rng.randrange(1, 5)


def close(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    return len(a) == len(b) and all(
        ka == kb and abs(ta - tb) < 1e-6 for (ka, ta), (kb, tb) in zip(a, b, strict=True))


def test_requests_and_drops_come_when_asyncssh_would_send_them() -> None:
    rng = random.Random(38)
    kinds = set()
    armed_stock = armed_lazy = 0
    for _ in range(400):
        reads, answers, interval, count_max = scenario(rng)
        stock, n_stock = run(reads, answers, interval, count_max, None)
        lazy, n_lazy = run(reads, answers, interval, count_max, lazy_keepalive)
        assert close(stock, lazy), (reads, answers, interval, count_max, stock, lazy)
        kinds.update(k for k, _ in stock)
        armed_stock += n_stock
        armed_lazy += n_lazy
    assert kinds == {"keepalive", "lost"}  # the streams did reach both
    assert armed_lazy * 2 < armed_stock  # and far fewer timers were armed


class Forgetful(LazyKeepalive):
    """Negative control: a read that notes nothing (as if reads were not seen)."""

    def reset(self) -> None:
        conn = self._conn
        if conn._keepalive_timer is None:
            conn._set_keepalive_timer()


def test_negative_control_a_read_not_noted_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ssh_keepalive, "LazyKeepalive", Forgetful)
    rng = random.Random(38)
    differ = 0
    for _ in range(50):
        reads, answers, interval, count_max = scenario(rng)
        stock, _ = run(reads, answers, interval, count_max, None)
        lazy, _ = run(reads, answers, interval, count_max, ssh_keepalive.lazy_keepalive)
        differ += not close(stock, lazy)
    assert differ > 25


def test_installed_on_a_real_asyncssh_connection(tmp_path: Path) -> None:
    """What the lazy timer relies on is there in the installed asyncssh, and it keeps time."""

    async def go() -> None:
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")

        async def answer(process: asyncssh.SSHServerProcess[bytes]) -> None:
            for _ in range(6):
                process.stdout.write(b"x\n")
                await asyncio.sleep(0.1)
            process.exit(0)

        server = await asyncssh.listen(
            "127.0.0.1", 0, server_host_keys=[host_key], encoding=None,
            authorized_client_keys=asyncssh.import_authorized_keys(
                client_key.export_public_key().decode()), process_factory=answer)
        try:
            async with asyncssh.connect(
                    "127.0.0.1", server.get_port(), client_keys=[client_key],
                    known_hosts=None, keepalive_interval=0.2, keepalive_count_max=2) as conn:
                lazy = lazy_keepalive(conn)
                assert lazy is not None
                assert conn._keepalive_timer_callback == lazy.fire
                out = await conn.run("stream", encoding=None, timeout=10)
                assert out.stdout == b"x\n" * 6
                assert conn._keepalive_timer is not None  # still armed, through fire
                await asyncio.sleep(0.5)  # silence past the interval: asyncssh's own path
                assert conn._keepalive_count == 0  # the server answered its requests
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(go(), 30))
