"""An agent's stdout pushed to the session (``ssh_push``, issue 38: the collector's CPU)
hands on exactly what reading the process's stdout stream did: the same bytes in the same
order, the same ending (clean at EOF or a clean close, "stream broke" with the channel's
error), whatever the timing of chunks against the reader.

The old way is run as it was (``SSHClientProcess`` and ``stdout.read`` in a loop, as
``SshTransport.chunks`` read before), the new way through ``SshTransport.chunks_to``'s own
call; both over the same channel stand-in (asyncssh's channel is what the real-sshd tests in
``test_ssh_sshd.py`` run), on random streams.  A broken push (the held chunks handed on
after the first new one) is caught by the same comparison: the negative control.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import asyncssh
import pytest

from probes.transport.ssh import READ_CHUNK, HostUnreachable, _broke
from probes.transport.ssh_push import PushProcess, Sink


class _Chan:
    """The little of ``SSHClientChannel`` a process's stream side asks of it."""

    def get_connection(self) -> None:
        return None

    def get_encoding(self) -> tuple[None, str]:
        return None, "strict"

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def get_recv_window(self) -> int:
        return 2 * 1024 * 1024

    def get_read_datatypes(self) -> set[int | None]:
        return {None, asyncssh.EXTENDED_DATA_STDERR}

    def get_write_datatypes(self) -> set[int | None]:
        return {None}

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_exit_status(self) -> None:
        return None


def _process(cls: type[Any]) -> Any:
    proc = cls()
    proc.connection_made(_Chan())
    proc.session_started()
    return proc


Script = list[tuple[str, Any]]
"""("data", bytes) | ("stderr", bytes) | ("wait", turns) | ("eof", None) |
("lost", error or None) | ("start", None): when the reader starts."""


def _script(rng: random.Random) -> Script:
    lines = [bytes(rng.randrange(32, 127) for _ in range(rng.randrange(0, 90))) + b"\n"
             for _ in range(rng.randrange(0, 40))]
    data = b"".join(lines) + (b"tail" if rng.random() < 0.3 else b"")
    chunks, at = [], 0
    while at < len(data):
        n = rng.randrange(1, 300)
        chunks.append(data[at:at + n])
        at += n
    script: Script = [("data", c) for c in chunks]
    for _ in range(rng.randrange(0, 6)):
        script.insert(rng.randrange(len(script) + 1), ("wait", rng.randrange(1, 4)))
    if rng.random() < 0.3:
        script.insert(rng.randrange(len(script) + 1), ("stderr", b"oops\n"))
    script.insert(rng.randrange(len(script) + 1), ("start", None))
    end = rng.choice(["eof", "close", "broke", "eof+broke"])
    if end == "eof":
        script.append(("eof", None))
    elif end == "close":
        script.append(("lost", None))
    elif end == "broke":
        script.append(("lost", ConnectionResetError("peer reset")))
    else:
        script += [("eof", None), ("lost", ConnectionResetError("late"))]
    return script


async def _old_reader(proc: Any, got: list[bytes]) -> str:
    """``SshTransport.chunks`` before ``ssh_push``, as the session drove it."""
    while True:
        try:
            chunk = await proc.stdout.read(READ_CHUNK)
        except (asyncssh.Error, OSError) as exc:
            return str(_broke(exc))
        if not chunk:
            return "end"
        got.append(chunk)


async def _new_reader(proc: PushProcess, got: list[bytes]) -> str:
    try:
        await proc.push_to(got.append, _broke)
    except HostUnreachable as exc:
        return str(exc)
    return "end"


async def _play(script: Script, cls: type[Any], read: Any) -> tuple[bytes, str]:
    proc = _process(cls)
    got: list[bytes] = []
    task: asyncio.Task[str] | None = None
    for what, arg in script:
        if what == "start":
            task = asyncio.ensure_future(read(proc, got))
        elif what == "data":
            proc.data_received(arg, None)
        elif what == "stderr":
            proc.data_received(arg, asyncssh.EXTENDED_DATA_STDERR)
        elif what == "wait":
            for _ in range(arg):
                await asyncio.sleep(0)
        elif what == "eof":
            proc.eof_received()
        else:
            proc.connection_lost(arg)
    assert task is not None
    end = await asyncio.wait_for(task, 5)
    return b"".join(got), end


async def test_pushed_stdout_is_the_stream_s_bytes_and_ending_on_random_streams() -> None:
    rng = random.Random(38)
    ends = set()
    for _ in range(300):
        script = _script(rng)
        old = await _play(script, asyncssh.SSHClientProcess, _old_reader)
        new = await _play(script, PushProcess, _new_reader)
        assert new == old, script
        ends.add(old[1])
    assert ends == {"end", "stream broke: peer reset"}  # both endings were exercised


class _HeldLast(PushProcess):
    """A push that hands on what was held after the first chunk that comes later."""

    async def push_to(self, sink: Sink, broken: Any = None) -> None:
        held, self._held = self._held or [], None
        first: list[bytes] = []

        def take(chunk: bytes) -> None:
            if held and not first:
                first.append(chunk)
                sink(chunk)
                for c in held:
                    sink(c)
                held.clear()
                return
            sink(chunk)

        self._held = []
        await super().push_to(take, broken or _broke)


async def test_negative_control_a_push_that_reorders_held_chunks_is_caught() -> None:
    rng = random.Random(38)
    caught = 0
    for _ in range(300):
        script = _script(rng)
        old = await _play(script, asyncssh.SSHClientProcess, _old_reader)
        bad = await _play(script, _HeldLast, _new_reader)
        caught += bad != old
    assert caught > 10


async def test_a_sink_that_fails_ends_the_push_with_its_error_and_gets_nothing_more() -> None:
    proc = _process(PushProcess)
    got: list[bytes] = []

    def sink(chunk: bytes) -> None:
        got.append(chunk)
        if chunk == b"bad\n":
            raise ValueError("garbled")

    proc.data_received(b"held\n", None)
    task = asyncio.ensure_future(proc.push_to(sink, _broke))
    await asyncio.sleep(0)
    for chunk in (b"ok\n", b"bad\n", b"after\n"):
        proc.data_received(chunk, None)
    with pytest.raises(ValueError, match="garbled"):
        await asyncio.wait_for(task, 5)
    assert got == [b"held\n", b"ok\n", b"bad\n"]
    proc.data_received(b"later\n", None)  # dropped: the session closes the channel
    assert got == [b"held\n", b"ok\n", b"bad\n"]


async def test_a_cancelled_push_stops_handing_on() -> None:
    proc = _process(PushProcess)
    got: list[bytes] = []
    task = asyncio.ensure_future(proc.push_to(got.append, _broke))
    await asyncio.sleep(0)
    proc.data_received(b"one\n", None)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    proc.data_received(b"two\n", None)
    proc.eof_received()  # the future it awaited is gone: no error
    assert got == [b"one\n"]
