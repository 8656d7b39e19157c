"""What the console receives from a collector is the same on its coalescing loop (issue 38,
session 12) as on asyncio's own loop, the loop every collector ran on before.

The collector's own parts run in this process: its ``Relay`` on a real pipe, its sessions
(``SessionFleet``: readers, stall watch, backoff, the clock's items), fed by scripted
transports whose chunks come on timers: the simulator's streams spoiled as in
``test_relay_rows`` (garbage, garbled and lost ticks, restarted agents, text to sanitise,
over-long lines), cut mostly a line a chunk, a host whose stream stalls mid-way (the stall
watch ends it, the session comes back and streams the rest), a host whose agent exits.
Each run goes once on ``asyncio.Runner()``'s loop and once on the coalescing loop paused at
every wait (``busy=True``: as a collector of a large shard).  Compared, per host, in order:
every entry of every batch the console got (lines, relayed ticks and hellos, session
items without their times, the counts of what was dropped).  A console that keeps up; and
one that does not read until the streams ended (its pipe full from the start: samples
replaced, each host's newest kept, the drops counted).  Negative control: a run whose
reader loses one chunk is told apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import os
import random
import selectors
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest

from probes.config.fleet import HostSpec
from probes.errors import TransportError
from probes.sources.collectors import FLUSH_S
from probes.transport import session as session_module
from probes.transport.coalesce import GAP_S, CoalescingSelector
from probes.transport.collector_wire import Batch, CollectorJob, frame_length, unframe
from probes.transport.relay import Relay, RelayReader
from probes.transport.session import SessionPolicy
from probes.transport.sessions import SessionFleet
from probes.wire.events import ClockOffset, Disconnected, SourceHealth
from tests.transport.test_relay_one_step import _chunks, _lines
from tests.transport.test_relay_rows import agent_stream

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.Runner")

HOSTS = 6
STALLS = 2
"""Host 2's stream stops after its first third (the stall watch ends it) and its session
comes back with the rest; host 3's agent exits after its first half, and comes back too."""
POLICY = SessionPolicy(backoff_base_s=0.05, backoff_cap_s=0.05, jitter=0.0, stall_s=0.3)
F_SETPIPE_SZ = 1031


@dataclasses.dataclass
class Script:
    chunks: list[bytes]
    gaps: list[float]
    hang: bool
    """After its chunks: silence (a stall) rather than the end of the stream."""


class ScriptedTransport:
    """One connection of a scripted host: each chunk rung in on a socket (a thread writes a
    byte per chunk, at the script's gaps), so the loop wakes for it as for a host's bytes;
    no script left, it never starts."""

    def __init__(self, scripts: list[Script], done: Callable[[], None]) -> None:
        self.notes: list[str] = []
        self._scripts = scripts
        self._script: Script | None = None
        self._done = done
        self._socks: tuple[socket.socket, socket.socket] | None = None

    async def start(self) -> None:
        if not self._scripts:
            self._done()
            await asyncio.Event().wait()  # the host's story is over: it never connects
            raise TransportError("unreachable")
        self._script = self._scripts.pop(0)

    async def chunks(self) -> AsyncIterator[bytes]:
        script = self._script
        assert script is not None
        ours, theirs = self._socks = socket.socketpair()
        ours.setblocking(False)

        def ring() -> None:
            with contextlib.suppress(OSError):
                for gap in script.gaps:
                    time.sleep(gap)
                    theirs.send(b"x")
        threading.Thread(target=ring, daemon=True).start()
        loop = asyncio.get_running_loop()
        for chunk in script.chunks:
            assert await loop.sock_recv(ours, 1) == b"x"
            yield chunk
        if script.hang:
            await asyncio.Event().wait()

    async def exit_reason(self) -> str:
        return "agent exited with status 0"

    async def stop(self) -> None:
        if self._socks is not None:
            for s in self._socks:
                s.close()


def scripts(seed: int) -> dict[str, list[Script]]:
    rng = random.Random(seed)
    out: dict[str, list[Script]] = {}
    for h in range(HOSTS):
        chunks = _chunks(_lines(agent_stream(seed * 10 + h, 30), rng), rng)
        gaps = [rng.choice((0.0, 0.0005, 0.002, 0.004)) for _ in chunks]
        if h == STALLS:
            cut = len(chunks) // 3
            out[f"h{h}"] = [Script(chunks[:cut], gaps[:cut], hang=True),
                            Script(chunks[cut:], gaps[cut:], hang=False)]
        elif h == STALLS + 1:
            cut = len(chunks) // 2
            out[f"h{h}"] = [Script(chunks[:cut], gaps[:cut], hang=False),
                            Script(chunks[cut:], gaps[cut:], hang=False)]
        else:
            out[f"h{h}"] = [Script(chunks, gaps, hang=False)]
    return out


def _fill(w: int) -> int:
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    filled = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filled += os.write(w, b"x" * 512)
    return filled


class Console(threading.Thread):
    """Reads the collector's pipe: at once (keeps up), or only once ``go`` is set."""

    def __init__(self, r: int, go: threading.Event) -> None:
        super().__init__(daemon=True)
        self.r, self.go, self.data = r, go, bytearray()

    def run(self) -> None:
        self.go.wait()
        while chunk := os.read(self.r, 1 << 20):
            self.data += chunk


async def collector(plan: dict[str, list[Script]], w: int, reads: threading.Event,
                    wrap: Callable[[RelayReader], None] | None) -> None:
    """The collector's ``serve`` with scripted hosts: until every host's story is over."""
    specs = tuple(HostSpec(name=name) for name in plan)
    relay = Relay(CollectorJob(specs, 32, FLUSH_S, "collector 1"), w)
    over: set[str] = set()
    all_over = asyncio.Event()

    def make(spec: HostSpec, **_kw: Any) -> ScriptedTransport:
        def done() -> None:
            over.add(spec.name)
            if len(over) == len(specs):
                all_over.set()
        return ScriptedTransport(plan[spec.name], done)

    new_reader = relay.new_reader
    if wrap is not None:
        def new_reader(host: str) -> Any:
            reader = relay.new_reader(host)
            wrap(reader)  # type: ignore[arg-type]
            return reader
    relay.heartbeat()
    if not reads.is_set():  # the pipe is full: blocked from the first heartbeat, before any
        while not relay.blocked:  # host streams (else the first frame's entries vary)
            await asyncio.sleep(0.01)
    fleet = SessionFleet(list(specs), policy=POLICY, new_reader=new_reader)
    saved = session_module.make_transport
    session_module.make_transport = make  # type: ignore[assignment]
    try:
        task = asyncio.create_task(fleet.run(relay.emit))
        await asyncio.wait_for(all_over.wait(), 60)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        session_module.make_transport = saved
    reads.set()
    await relay.close(10.0)
    os.close(w)


def run(plan: dict[str, list[Script]], coalesced: bool, keeps_up: bool,
        wrap: Callable[[RelayReader], None] | None = None
        ) -> tuple[list[list[Any]], int | None]:
    """Each host's entries, in order, as the console got them; and the selector's pauses."""
    r, w = os.pipe()
    if keeps_up:  # a pipe that never fills: a frame (a hello is ~70 KiB) never blocks it
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    skip = 0 if keeps_up else _fill(w)
    reads = threading.Event()
    if keeps_up:
        reads.set()
    console = Console(r, reads)
    console.start()
    sel = CoalescingSelector(selectors.DefaultSelector(), GAP_S, busy=True)
    factory = (lambda: asyncio.SelectorEventLoop(sel)) if coalesced else None
    runner_type = getattr(asyncio, "Runner", None)  # 3.11+ (the tests skip before)
    assert runner_type is not None
    with runner_type(loop_factory=factory) as runner:
        runner.run(collector(plan, w, reads, wrap))
    console.join(10)
    os.close(r)
    data = bytes(console.data[skip:])
    per_host: list[list[Any]] = [[] for _ in plan]
    while data:
        n = frame_length(data[:4])
        for i, entry in cast(Batch, unframe(data[4:4 + n])):
            per_host[i].append(_timeless(entry))
        data = data[4 + n:]
    return per_host, sel.pauses if coalesced else None


def _timeless(entry: Any) -> Any:
    """An entry without the times its loop stamped on it (when a session connected, when
    a count was sent; a clock estimate is made from arrival times)."""
    if isinstance(entry, ClockOffset):
        return "ClockOffset"
    if dataclasses.is_dataclass(entry) and not isinstance(entry, type) \
            and hasattr(entry, "ts"):
        return dataclasses.replace(entry, ts=0.0)
    return entry


def differences(a: list[list[Any]], b: list[list[Any]]) -> list[str]:
    out = []
    for h, (x, y) in enumerate(zip(a, b, strict=True)):
        if len(x) != len(y):
            out.append(f"h{h}: {len(x)} entries against {len(y)}")
        for k, (p, q) in enumerate(zip(x, y, strict=False)):
            if type(p) is not type(q) or p != q:
                out.append(f"h{h} entry {k}: {p!r:.80} / {q!r:.80}")
                break
    return out


def _kinds(per_host: list[list[Any]]) -> list[str]:
    return [e.kind for h in per_host for e in h if isinstance(e, Disconnected)]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_console_that_keeps_up_gets_the_same_entries(seed: int) -> None:
    plan = scripts(seed)
    before, _ = run(scripts(seed), coalesced=False, keeps_up=True)
    after, pauses = run(plan, coalesced=True, keeps_up=True)
    assert differences(before, after) == []
    assert pauses and pauses >= 5  # it did pause, again and again (a gap each)
    kinds = _kinds(after)
    assert "stalled" in kinds and kinds.count("down") >= 5  # the stall and the exits played
    assert sum(len(h) for h in after) > 200


@pytest.mark.parametrize("seed", [3])
def test_a_console_that_does_not_read_gets_the_same_newest_samples_and_counts(
        seed: int) -> None:
    before, _ = run(scripts(seed), coalesced=False, keeps_up=False)
    after, _ = run(scripts(seed), coalesced=True, keeps_up=False)
    assert differences(before, after) == []
    counts = [e.dropped_samples for h in after for e in h if isinstance(e, SourceHealth)]
    assert len(counts) == HOSTS and min(counts) > 10  # samples were replaced and counted


def test_negative_control_a_lost_chunk_is_told_apart() -> None:
    def lose_one(reader: RelayReader) -> None:
        feed, seen = reader.feed, [0]

        def feed_losing(chunk: bytes) -> list[Any]:
            seen[0] += 1
            return [] if seen[0] == 9 else feed(chunk)
        reader.feed = feed_losing  # type: ignore[method-assign]

    before, _ = run(scripts(1), coalesced=False, keeps_up=True)
    after, _ = run(scripts(1), coalesced=True, keeps_up=True, wrap=lose_one)
    assert differences(before, after) != []
