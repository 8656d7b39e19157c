"""A collector's per-chunk steps as session 14 wrote them (issue 38, the collector's CPU)
hand the console exactly what the steps before did (``coll_before_s14.py``):

* ``CompactStream.quick_row``: the same verdict and the same row as before (and for the
  line with its newline, as the reader's one step now passes it), over real
  ticks spoiled at random (GPU counts, process amounts null or of other counts, one, two or
  many disks with names repeated, garbage), for streams whose every GPU's count is known and
  for streams where some is not;
* the whole collector (``Relay`` on a real pipe, ``SessionFleet``, the session's ``feed``,
  the stall watch, ``PushProcess`` pushing each chunk as a channel would, its hosts scripted
  as in ``test_coalesce_relay``: spoiled streams, a host that stalls, one whose agent exits):
  every entry of every frame, per host in order, the same from the old steps and the new,
  for a console that keeps up and for one that does not read until the end (samples
  replaced, the newest kept, the drops counted);
* ``loop_clock``: ``time.monotonic`` for asyncio's own loops, the loop's own ``time`` for a
  loop with another clock (the keepalive's and the stall watch's virtual clocks in tests).

Negative controls: a quick check that lets two disks of one name through is told apart
(rows and frames), and so is a push that loses a chunk.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from probes.transport import loop_clock
from probes.transport.relay import Relay, RelayReader
from probes.transport.ssh_push import PushProcess, Sink
from probes.wire.compact import _DECODER, _DISK_NAME, CompactStream, SampleRow
from probes.wire.events import SourceHealth, emit_each
from tests.transport import coll_before_s14 as before
from tests.transport import test_coalesce_relay as tcr
from tests.transport.test_relay_rows import agent_stream
from tests.transport.test_ssh_push import _process

# ---- the quick check ------------------------------------------------------------------------


def _streams(seed: int) -> list[tuple[CompactStream, list[bytes]]]:
    """Readers of simulated hosts given their hello and statics; each with its ticks."""
    return asyncio.run(_made(seed))


async def _made(seed: int) -> list[tuple[CompactStream, list[bytes]]]:
    from probes.config.fleet import HostSpec
    from probes.transport.collector_wire import CollectorJob

    out = []
    rng = random.Random(seed)
    for h in range(6):
        lines = agent_stream(seed * 10 + h, 40, spoil=False).splitlines()
        ticks = [ln for ln in lines if ln.startswith(b"[")]
        relay = Relay(CollectorJob((HostSpec(name="h"),), 1, 0.05), _devnull())
        reader = RelayReader(0, relay)
        statics = [ln for ln in lines if not ln.startswith(b"[")]
        reader._relay_lines(iter(statics[:2]))  # the hello and the first static
        stream = reader.compact
        assert stream is not None and stream._has_static
        out.append((stream, [_spoil(t, rng) for t in ticks for _ in range(4)]))
    return out


def _devnull() -> int:
    import os
    return os.open("/dev/null", os.O_WRONLY)


def _spoil(line: bytes, rng: random.Random) -> bytes:
    """A tick with its GPUs, processes or disks changed at random (as JSON)."""
    tick: Any = msgspec.json.decode(line)
    r = rng.random()
    gpus, disks = tick[2], tick[4]
    if r < 0.15 and gpus:
        gpus.pop()  # a GPU fewer
    elif r < 0.3 and gpus:
        g = rng.choice(gpus)
        procs = g[-1] if isinstance(g, list) else None
        if isinstance(procs, list):
            g[-1] = None if rng.random() < 0.5 else [*procs, 1.0]
    elif r < 0.6:
        n = rng.choice([0, 1, 2, 2, 3, 5])
        base = disks[0] if disks else ["sda", 1, 2, 3, 4, 5, 6, 7, 8]
        names = [rng.choice(["sda", "sdb", "nvme0n1", "sda"]) for _ in range(n)]
        tick[4] = [[name, *base[1:]] for name in names]
    elif r < 0.65:
        return line[: len(line) // 2]  # garbage
    return msgspec.json.encode(tick)


def _verdicts(pairs: list[tuple[CompactStream, list[bytes]]],
              quick: Callable[[CompactStream, bytes], SampleRow | None]) -> list[Any]:
    return [quick(stream, t) for stream, ticks in pairs for t in ticks]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_quick_check_gives_the_same_verdicts_and_rows(seed: int) -> None:
    pairs = _streams(seed)
    old = _verdicts(pairs, before.quick_row)
    new = _verdicts(pairs, CompactStream.quick_row)
    assert old == new
    # the reader's one step judges the chunk with its newline (``\n``, or ``\r\n``)
    assert _verdicts(pairs, lambda stream, t: CompactStream.quick_row(stream, t + b"\n")) == old
    assert _verdicts(pairs, lambda stream, t: CompactStream.quick_row(stream, t + b"\r\n")) == old
    assert sum(v is None for v in new) > 20 and sum(v is not None for v in new) > 100
    # some GPU's count unknown: the loop of ``_procs_fit``, not the one comparison
    for stream, _ in pairs:
        stream._fit = [None, *stream._fit[1:]]
        stream._fit_all = False
    assert _verdicts(pairs, before.quick_row) == _verdicts(pairs, CompactStream.quick_row)


def test_negative_control_a_check_that_lets_two_disks_of_one_name_through() -> None:
    def loose(self: CompactStream, line: bytes) -> SampleRow | None:
        s = _DECODER.decode(line) if self._has_static else None
        if s is None or not self._procs_fit(s) or len(s.gpus) != len(self._fit):
            return None
        d = s.disks
        return s if len(d) < 3 or len(set(map(_DISK_NAME, d))) == len(d) else None

    pairs = _streams(1)
    assert _verdicts(pairs, before.quick_row) != _verdicts(pairs, _safe(loose))


def _safe(quick: Callable[[CompactStream, bytes], SampleRow | None]
          ) -> Callable[[CompactStream, bytes], SampleRow | None]:
    def safe(stream: CompactStream, line: bytes) -> SampleRow | None:
        try:
            return quick(stream, line)
        except Exception:
            return None
    return safe


# ---- the whole collector --------------------------------------------------------------------


class PushTransport(tcr.ScriptedTransport):
    """A scripted host whose chunks reach the session as an SSH channel's do: through
    ``PushProcess.data_received`` and ``push_to`` (``SshTransport.chunks_to``)."""

    lose: int | None = None
    """Negative control: the chunk of this index is lost."""

    async def chunks_to(self, sink: Sink) -> None:
        script = self._script
        assert script is not None
        proc = _process(PushProcess)
        ours, theirs = self._socks = socket.socketpair()
        ours.setblocking(False)

        def ring() -> None:
            try:
                for gap in script.gaps:
                    time.sleep(gap)
                    theirs.send(b"x")
            except OSError:
                pass
        threading.Thread(target=ring, daemon=True).start()
        loop = asyncio.get_running_loop()

        async def pump() -> None:
            for k, chunk in enumerate(script.chunks):
                assert await loop.sock_recv(ours, 1) == b"x"
                if k != self.lose:
                    proc.data_received(chunk, None)
            if not script.hang:
                proc.eof_received()
        task = asyncio.ensure_future(pump())
        try:
            await proc.push_to(sink)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _collector_run(monkeypatch: pytest.MonkeyPatch, seed: int, keeps_up: bool,
                   old: bool, lose: int | None = None) -> list[list[Any]]:
    transport = type("T", (PushTransport,), {"lose": lose})
    with monkeypatch.context() as m:
        m.setattr(tcr, "ScriptedTransport", transport)
        undo = before.install() if old else (lambda: None)
        try:
            per_host, _ = tcr.run(tcr.scripts(seed), coalesced=False, keeps_up=keeps_up)
        finally:
            undo()
    return per_host


@pytest.mark.parametrize(("seed", "keeps_up"), [(1, True), (2, True), (3, False)])
def test_the_console_gets_the_same_entries_from_the_old_steps_and_the_new(
        monkeypatch: pytest.MonkeyPatch, seed: int, keeps_up: bool) -> None:
    old = _collector_run(monkeypatch, seed, keeps_up, old=True)
    new = _collector_run(monkeypatch, seed, keeps_up, old=False)
    assert tcr.differences(old, new) == []
    kinds = tcr._kinds(new)
    assert "stalled" in kinds and kinds.count("down") >= 5
    ticks = sum(type(e) is tuple for h in new for e in h)
    if keeps_up:
        assert sum(len(h) for h in new) > 150
        assert ticks > 50  # ticks went the one step (relayed rows), not only as text
    else:  # samples replaced, each host's newest kept, the drops counted
        counts = [e.dropped_samples for h in new for e in h if isinstance(e, SourceHealth)]
        assert len(counts) == tcr.HOSTS and min(counts) > 10 and ticks > 0


def test_negative_control_a_lost_chunk_is_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    old = _collector_run(monkeypatch, 1, True, old=True)
    new = _collector_run(monkeypatch, 1, True, old=False, lose=9)
    assert tcr.differences(old, new) != []


def test_the_install_puts_the_old_steps_in_place_and_takes_them_out() -> None:
    from probes.transport import session as session_module
    now = session_module._stream_once, CompactStream.quick_row, PushProcess.data_received
    undo = before.install()
    try:
        assert session_module._stream_once is before._stream_once
        assert CompactStream.quick_row is before.quick_row  # type: ignore[comparison-overlap]
        assert RelayReader.feed is before.feed  # type: ignore[comparison-overlap]
    finally:
        undo()
    assert (session_module._stream_once, CompactStream.quick_row,
            PushProcess.data_received) == now


# ---- the loop's clock -----------------------------------------------------------------------


def test_loop_clock_is_monotonic_on_asyncio_s_loops_and_the_loop_s_own_elsewhere() -> None:
    class Virtual(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return 42.0

    loop = asyncio.new_event_loop()
    virtual = Virtual()
    try:
        assert loop_clock(loop) is time.monotonic
        a, b, c = loop.time(), loop_clock(loop)(), loop.time()
        assert a <= b <= c
        clock = loop_clock(virtual)
        assert clock is not time.monotonic and clock() == 42.0
    finally:
        loop.close()
        virtual.close()


def test_a_feed_with_nothing_to_emit_emits_nothing() -> None:
    got: list[Any] = []
    assert emit_each("h", [], lambda *a: got.append(a)) is False and got == []
