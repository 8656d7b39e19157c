"""A chunk that is one whole v2 tick is judged and relayed in one step (session 11, issue
38: the collector's CPU); everything a session and the console see must be as before.

Two relays are driven side by side with the same chunks: the code now (``Relay``,
``RelayReader``) and the code before (``relay_before_s11``: every chunk through the line
splitter and ``_relay_lines``).  The streams are the simulator's, spoiled as in
``test_relay_rows`` (static facts that change, ticks lost or twice, garbage, garbled ticks,
text to sanitise, odd and hostile PCIe chains, a restarted agent, v1 hosts), plus hostile
lines of our own (over-long ticks, a carriage return, a tick glued to the next line),
cut mostly a line a chunk (as SSH delivers a tick) and otherwise anywhere.  A console that
stops reading is played at random (the relay blocked: samples replaced, lines dropped, a
``static`` message lost so its ticks go as text), with small hold limits so it happens.
After every chunk: what the reader returned (field by field), its counts, streak and
state.  Each batch taken: entry by entry.  At the end: what the console's fold emits for
every host.  Negative controls: a one-step tick that does not look for text to sanitise,
and one that does not count its line, each make the comparison fail.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import pytest

from probes.config.fleet import HostSpec
from probes.transport import relay as relay_module
from probes.transport.collector_wire import Batch, CollectorJob, check_batch, frame, unframe
from probes.transport.relay import Relay, RelayReader
from probes.wire.compact import CompactStream
from probes.wire.events import Connected, SessionItem, SourceHealth
from probes.wire.protocol import MAX_LINE_BYTES, MessageReader
from tests.transport.relay_before_s11 import RelayBefore
from tests.transport.test_relay_rows import agent_stream, console_fold, differences

T0 = 1_800_000_000.0
HOSTILE = [
    b"[" + b"1," * (MAX_LINE_BYTES // 2) + b"1]\n",  # an over-long tick: counted, not relayed
    b"[" + b"1" * (MAX_LINE_BYTES - 1) + b"\n",  # as long as a line may be
]


def _lines(stream: bytes, rng: random.Random) -> list[bytes]:
    """The stream's lines (with their newlines), with hostile ones mixed in."""
    lines = stream.splitlines(keepends=True)
    out = []
    for line in lines:
        r = rng.random()
        if r < 0.01:
            out.append(rng.choice(HOSTILE))
        elif r < 0.03 and line.startswith(b"[") and line.endswith(b"\n"):
            line = line[:-1] + b"\r\n"  # JSON whitespace before the newline
        elif r < 0.04 and line.startswith(b"["):
            line = b" " + line  # a tick that does not start the chunk with "["
        out.append(line)
    return out


def _chunks(lines: list[bytes], rng: random.Random) -> list[bytes]:
    """Mostly a line a chunk (a tick as SSH delivers it), else lines glued or cut."""
    data = b"".join(lines)
    out: list[bytes] = []
    at = k = 0
    ends = []
    for line in lines:
        at += len(line)
        ends.append(at)
    at = 0
    while at < len(data):
        r = rng.random()
        if r < 0.8 and k < len(ends) and ends[k] > at:
            cut = ends[k]  # to the end of this line
        elif r < 0.9 and k + 1 < len(ends):
            cut = ends[k + 1]  # two lines (or a piece and a line)
        else:
            cut = at + rng.choice((1, 7, 300, 700, 2000, 9000))  # anywhere
        cut = min(cut, len(data))
        out.append(data[at:cut])
        at = cut
        while k < len(ends) and ends[k] <= at:
            k += 1
    return out


def _state(reader: MessageReader) -> tuple[Any, ...]:
    c = reader.compact
    return (reader.stats, reader.bad_streak, reader.tick_row, len(reader.mine),  # type: ignore[attr-defined]
            None if c is None else (c.static_id, c._has_static, c._fit))


def _same_batch(a: Batch, b: Batch, where: str) -> None:
    assert len(a) == len(b), f"{where}: {len(a)} entries, not {len(b)}"
    for k, ((i, x), (j, y)) in enumerate(zip(a, b, strict=True)):
        assert i == j and type(x) is type(y) and x == y, f"{where}: entry {k}: {x!r} / {y!r}"


def drive(streams: list[bytes], seed: int, new: type[Relay] = Relay) -> tuple[Batch, Batch]:
    """Feed both relays the same chunks; compare as they go; return each one's batches."""
    rng = random.Random(seed)
    specs = tuple(HostSpec(name=f"h{i}") for i in range(len(streams)))
    pending = [_chunks(_lines(s, rng), rng) for s in streams]
    r, w1 = os.pipe()
    r2, w2 = os.pipe()

    async def run() -> tuple[Batch, Batch]:
        job = CollectorJob(specs, 4, 3600.0, "collector 1")
        now, before = new(job, w1), RelayBefore(job, w2)
        out: tuple[Batch, Batch] = ([], [])
        pairs = [(now.new_reader(s.name), before.new_reader(s.name)) for s in specs]
        for s in specs:
            now.emit(s.name, Connected(T0))
            before.emit(s.name, Connected(T0))
        blocked = False

        def take() -> None:
            a, b = now._take(), before._take()
            _same_batch(a, b, "a batch")
            out[0].extend(a)
            out[1].extend(b)

        while any(pending):
            for i, chunks in enumerate(pending):
                if not chunks:
                    continue
                chunk = chunks.pop(0)
                got, want = pairs[i][0].feed(chunk), pairs[i][1].feed(chunk)
                assert differences(list(got), list(want)) == [], f"host {i}: {chunk[:60]!r}"
                assert _state(pairs[i][0]) == _state(pairs[i][1]), f"host {i}: {chunk[:60]!r}"
                for m in got:
                    now.emit(specs[i].name, m)
                for m in want:
                    before.emit(specs[i].name, m)
            if rng.random() < 0.08:  # the console stops reading, or reads again
                blocked = not blocked
                for relay in (now, before):
                    relay._unsent = memoryview(b"x") if blocked else None
            if not blocked and rng.random() < 0.3:
                take()
        for i, (a, b) in enumerate(pairs):
            for m in a.close():
                now.emit(specs[i].name, m)
            for m in b.close():
                before.emit(specs[i].name, m)
        for relay in (now, before):
            relay._unsent = None
        take()
        for relay in (now, before):
            if relay._flush is not None:
                relay._flush.cancel()
        return out

    try:
        batches = asyncio.run(run())
    finally:
        for fd in (r, w1, r2, w2):
            os.close(fd)
    return batches


def _framed(batch: Batch, hosts: int) -> Batch:
    return check_batch(unframe(frame(batch)[4:]), hosts)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Small hold limits (a blocked relay drops lines and a ``static`` message), reports
    at once, a fixed clock for them; and a count of the ticks taken in one step."""
    monkeypatch.setattr(relay_module, "KEEP_BYTES", 6000)
    monkeypatch.setattr(relay_module, "LOG_BYTES", 3000)
    monkeypatch.setattr(relay_module, "REPORT_S", 0.0)
    monkeypatch.setattr(relay_module.time, "time", lambda: T0)
    taken = [0]
    inside = [False]
    quick = CompactStream.quick_row
    general = RelayReader._relay_lines

    def counting(self: CompactStream, line: bytes) -> Any:
        row = quick(self, line)
        taken[0] += row is not None and not inside[0]
        return row

    def lines(self: RelayReader, got: Any) -> Any:
        inside[0] = True
        try:
            return general(self, got)
        finally:
            inside[0] = False

    monkeypatch.setattr(CompactStream, "quick_row", counting)
    monkeypatch.setattr(RelayReader, "_relay_lines", lines)
    return taken


@pytest.mark.parametrize("seed", range(6))
def test_the_one_step_tick_relays_and_counts_as_the_general_path(
        seed: int, counted: list[int]) -> None:
    streams = [agent_stream(100 * seed + k, 90, v=1 if k == 3 else 2) for k in range(5)]
    now, before = drive(streams, seed)
    assert counted[0] > 60, counted  # the one step was taken, and often
    got = console_fold(_framed(now, len(streams)), len(streams))
    want = console_fold(_framed(before, len(streams)), len(streams))
    for i in range(len(streams)):
        assert differences(got[i], want[i]) == [], f"host {i}"
        assert sum(type(m).__name__ == "HostSample" for m in got[i]) > 20


def test_the_drops_and_the_lost_static_were_played(counted: list[int]) -> None:
    """Not vacuous: the blocked relay replaced samples, dropped lines and lost a
    ``static`` message (its ticks then went as text), and over-long lines came."""
    streams = [agent_stream(k, 150) for k in range(5)]
    now, _ = drive(streams, 7)
    reports = [e for _, e in now if isinstance(e, SourceHealth)]
    assert any(e.dropped_samples for e in reports)
    assert any(e.dropped_lines for e in reports)
    text_ticks = sum(e.count(b"\n[") + e.startswith(b"[")
                     for _, e in now if isinstance(e, bytes))
    assert text_ticks > 20


class _NoSanitiseCheck(Relay):
    """Negative control: the one step taken for a line with text to sanitise."""

    def new_reader(self, host: str) -> MessageReader:
        reader = _Unchecked(self.index[host], self)
        self.readers[host] = reader
        return reader


class _Unchecked(RelayReader):
    def feed(self, chunk: bytes) -> list[Any]:
        saved = relay_module.may_need_cleaning
        relay_module.may_need_cleaning = lambda line: False
        try:
            return super().feed(chunk)
        finally:
            relay_module.may_need_cleaning = saved


class _Uncounted(Relay):
    """Negative control: the one step forgets to count its line."""

    def new_reader(self, host: str) -> MessageReader:
        reader = _NoCount(self.index[host], self)
        self.readers[host] = reader
        return reader


class _NoCount(RelayReader):
    def feed(self, chunk: bytes) -> list[Any]:
        lines = self.stats.lines
        out = super().feed(chunk)
        if self.stats.lines == lines + 1 and chunk.startswith(b"[") and \
                chunk.count(b"\n") == 1 and chunk.endswith(b"\n") and not out:
            self.stats.lines = lines
        return out


@pytest.mark.parametrize("wrong", [_NoSanitiseCheck, _Uncounted])
def test_the_comparison_sees_a_one_step_that_skips_a_check(
        wrong: type[Relay], counted: list[int]) -> None:
    streams = [agent_stream(k, 90) for k in range(5)]
    with pytest.raises(AssertionError):
        drive(streams, 3, wrong)


def test_the_fold_comparison_sees_a_wrong_relayed_entry(counted: list[int]) -> None:
    """Negative control at the console: a relay's batch with one tick's row from another
    host gives another fold."""
    streams = [agent_stream(k, 60) for k in range(3)]
    now, before = drive(streams, 11)
    ticks = [k for k, (i, e) in enumerate(now) if i == 1 and isinstance(e, tuple)]
    other = next(e for i, e in now if i == 2 and isinstance(e, tuple))
    spoiled: list[tuple[int, SessionItem | Any]] = list(now)
    spoiled[ticks[len(ticks) // 2]] = (1, other)
    got = console_fold(_framed(spoiled, 3), 3)
    want = console_fold(_framed(before, 3), 3)
    assert differences(got[1], want[1]) != []
