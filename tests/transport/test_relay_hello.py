"""A hello reaches the console as the ``Hello`` its collector decoded (issue 38, start-up).

The console used to decode each host's hello a second time (~1 ms a host on the UI at
start-up).  Now the collector relays the one its reader decoded (``RelayedHello``) with the
line's ``columns``; the console's reader takes it as it took the line.  Checked here,
through the real parts (the collector's ``RelayReader`` and ``Relay``, the frame, the
console's ``check_batch`` and ``CollectorBackend._fold``), against the console decoding the
bytes itself: the agent simulator's hellos (v1 and v2), spoiled at random as
``test_clean_tree`` spoils them (hostile text in keys and values at every depth, the block
keys, nesting near the depth limit), each followed by its static facts and ticks.  Equal
means: every field of every message (the hello's, with types and signs), the facts the
decode shares are the same objects, and the reader's state (counts, streak, v2 columns) and
so every later tick.  The relay keeps or drops a decoded hello as it did the hello's line,
and relays the hello as decoded, not as the collector's clock watch corrected it after.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
from typing import Any

import pytest

from probes import agent
from probes.agent.output import CompactEncoder, compact_columns
from probes.config.fleet import HostSpec
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import relay as relay_module
from probes.transport.collector_wire import (
    Batch,
    CollectorJob,
    RelayedHello,
    check_batch,
    frame,
    unframe,
)
from probes.transport.host_clock import clocked
from probes.transport.relay import Relay
from probes.wire import protocol, shared
from probes.wire.events import Connected, SessionItem
from probes.wire.protocol import MessageReader, decode_line
from probes.wire.samples import Hello
from tests.transport.test_collector_relay import _fill
from tests.transport.test_relay_rows import differences, value_differences
from tests.wire.test_clean_tree import _spoil

T0 = 1_800_000_000.0


def _wire(obj: object, ascii_only: bool = True) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass") + b"\n"


def _host(seed: int, rng: random.Random) -> bytes:
    """One host's stream: its hello (v1 or v2, spoiled at random), static facts, ticks."""
    sim = agent.Simulator(agent.parse_scenarios("healthy"), seed, f"sim-{seed}")
    facts, gpus = sim.facts()
    v = 1 if seed % 4 == 3 else 2
    hello: dict[str, Any] = {"type": "hello", "v": v, "agent": "test", "ts": T0, "host": facts,
                             "gpus": gpus, "probes": {"nvml": {"available": True}},
                             "simulated": ["sim"]}
    if v == 2:
        hello["columns"] = compact_columns()
    hello.update(sim.topology())
    if seed % 5:  # one in five as the agent sent it
        hello = _spoil(hello, rng)
    if seed % 7 == 6:  # a hello the decode refuses (garbled): its text goes, as before
        del hello["v"]
    lines = [_wire(hello, ascii_only=rng.random() < 0.7)]
    enc = CompactEncoder()
    for k in range(3):
        g, host, disks = sim.sample(3600.0 + k)
        msg = {"type": "sample", "v": 1, "seq": k, "ts": T0 + k, "gpus": g, "host": host,
               "disks": disks}
        lines += [_wire(msg)] if v == 1 else [_wire(m) for m in enc.encode(msg)]
    return b"".join(lines)


def _relayed(streams: list[bytes]) -> Batch:
    """What the collector's relay sends for these streams (each fed in two chunks)."""
    specs = tuple(HostSpec(name=f"h{i}") for i in range(len(streams)))
    r, w = os.pipe()

    async def run() -> Batch:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        for i, s in enumerate(streams):
            relay.emit(specs[i].name, Connected(T0))
            reader = relay.new_reader(specs[i].name)
            for chunk in (s[:len(s) // 3], s[len(s) // 3:]):
                for m in reader.feed(chunk):
                    relay.emit(specs[i].name, m)  # the session's: not relayed
        batch = relay._take()
        assert relay._flush is not None
        relay._flush.cancel()
        return batch

    try:
        batch = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    return check_batch(batch, len(streams))


def _console(batch: Batch, hosts: int) -> tuple[list[list[SessionItem]], list[MessageReader]]:
    """The console's fold of a batch: what it emits per host, and its readers."""
    specs = tuple(HostSpec(name=f"h{i}") for i in range(hosts))
    shard = _Shard(1, CollectorJob(specs, 4, 0.05))
    got: list[list[SessionItem]] = [[] for _ in range(hosts)]

    def emit(host: str, item: SessionItem) -> None:
        got[int(host[1:])].append(item)

    asyncio.run(CollectorBackend._fold(shard, batch, emit, FoldSlices()))
    return got, [shard.readers[i] for i in range(hosts)]


def _by_itself(stream: bytes) -> tuple[list[SessionItem], MessageReader]:
    """What the console got decoding the bytes itself (before)."""
    reader = MessageReader()
    return [Connected(T0), *reader.feed(stream)], reader


def _state(reader: MessageReader) -> tuple[object, ...]:
    c = reader.compact
    return (reader.stats, reader.bad_streak, None if c is None else
            (c.cols, c.known, id(c.columns), c.static_id, c._has_static, c._fit))


def _unshared(got: object, want: object, canon: set[int], at: str = "") -> list[str]:
    """Where ``want`` holds one of the shared table's objects and ``got`` another object."""
    if id(want) in canon:
        return [] if got is want else [f"{at}: not the shared object"]
    if dataclasses.is_dataclass(want):
        return [d for f in dataclasses.fields(want)
                for d in _unshared(getattr(got, f.name), getattr(want, f.name), canon,
                                   f"{at}.{f.name}")]
    if isinstance(want, dict) and isinstance(got, dict):
        return [d for k in want for d in _unshared(got.get(k), want[k], canon, f"{at}.{k}")]
    if isinstance(want, tuple | list) and isinstance(got, tuple | list):
        return [d for k, (x, y) in enumerate(zip(got, want, strict=False))
                for d in _unshared(x, y, canon, f"{at}[{k}]")]
    return []


def _compare(batch: Batch, streams: list[bytes]) -> list[str]:
    batch = check_batch(unframe(frame(batch)[4:]), len(streams))  # as the console gets it
    got, readers = _console(batch, len(streams))
    out = []
    for i, stream in enumerate(streams):
        want, reader = _by_itself(stream)
        out += [f"host {i}: {d}" for d in differences(got[i], want)]
        canon = {id(v) for v in shared._table.values()}
        for a, b in zip(got[i], want, strict=False):
            if isinstance(b, Hello):
                out += [f"host {i}: {d}" for d in value_differences(a, b, "hello")]
                out += [f"host {i}: {d}" for d in _unshared(a, b, canon, "hello")]
        if _state(readers[i]) != _state(reader):
            out.append(f"host {i}: reader state {_state(readers[i])} for {_state(reader)}")
    return out


@pytest.fixture(scope="module")
def fleet() -> tuple[list[bytes], Batch]:
    rng = random.Random(3838)
    streams = [_host(seed, rng) for seed in range(60)]
    return streams, _relayed(streams)


def test_hostile_hellos_relayed_decoded_are_the_hellos_the_console_decoded(
        fleet: tuple[list[bytes], Batch]) -> None:
    streams, batch = fleet
    relayed = [e for _, e in batch if isinstance(e, RelayedHello)]
    as_text = sum(1 for _, e in batch if isinstance(e, bytes) and b'"type":"hello"' in e)
    assert len(relayed) > 35 and sum(h.columns is not None for h in relayed) > 25
    assert as_text > 0  # hellos the decode refused travel as their text, as before
    assert _compare(batch, streams) == []


def test_negative_control_a_hello_relayed_without_its_columns_is_caught(
        fleet: tuple[list[bytes], Batch]) -> None:
    streams, batch = fleet
    at = next(k for k, (_, e) in enumerate(batch)
              if isinstance(e, RelayedHello) and e.columns is not None)
    i, entry = batch[at]
    assert isinstance(entry, RelayedHello)
    wrong = list(batch)
    wrong[at] = (i, dataclasses.replace(entry, columns=None))
    assert any("reader state" in d for d in _compare(wrong, streams))


def test_negative_control_a_relayed_hello_not_shared_again_is_caught(
        fleet: tuple[list[bytes], Batch], monkeypatch: pytest.MonkeyPatch) -> None:
    streams, batch = fleet
    monkeypatch.setattr(protocol, "reshared", lambda hello: hello)
    assert any("not the shared object" in d for d in _compare(batch, streams))


def test_a_blocked_relay_keeps_and_drops_a_decoded_hello_as_its_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """While the console does not read, hellos count against ``KEEP_BYTES`` by their line's
    length, as their lines did; a console that reads again gets the kept ones whole."""
    rng = random.Random(7)
    line = _host(0, rng).splitlines(keepends=True)[0]
    monkeypatch.setattr(relay_module, "KEEP_BYTES", 2 * len(line) + 10)
    specs = (HostSpec(name="h0"), HostSpec(name="h1"))
    r, w = os.pipe()

    async def run() -> tuple[list[object], list[object], Relay]:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        _fill(w)
        relay.add(0, b"x" * 8192 + b"\n")
        relay.flush()
        assert relay.blocked
        reader = relay.new_reader("h0")
        for _ in range(3):
            reader.feed(line)  # decoded: relayed as its hello
            relay.add(1, line)  # as its text, the rule before
        entries = relay._queue
        kept = [[e for e in entries if e is not None and e[0] == i] for i in (0, 1)]
        asyncio.get_running_loop().remove_writer(w)
        return kept[0], kept[1], relay

    try:
        decoded, text, relay = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    assert len(decoded) == len(text) == 2
    assert relay.dropped_lines[0] == relay.dropped_lines[1] == 1
    for _, e in decoded:
        assert isinstance(e, RelayedHello) and e.size == len(line)
        assert value_differences(e.hello, decode_line(line)) == []


def test_the_relayed_hello_is_the_one_on_the_wire_not_the_collectors_clock_corrected_one(
        ) -> None:
    """The collector's clock watch corrects a hello's time in place after the decode (a host
    an hour ahead); the console's own watch corrects the relayed one: it must get it as the
    line gave it, or the hour is taken off twice."""
    line = _wire({"type": "hello", "v": 2, "agent": "t", "ts": T0, "host": {"hostname": "x"},
                  "gpus": [], "columns": compact_columns()})
    specs = (HostSpec(name="h0"),)
    r, w = os.pipe()

    async def run() -> tuple[Batch, Hello]:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        emit = clocked(relay.emit, clock=lambda: T0 - 3600.0)
        reader = relay.new_reader("h0")
        (hello,) = reader.feed(line)
        assert isinstance(hello, Hello)
        emit("h0", hello)
        batch = relay._take()
        assert relay._flush is not None
        relay._flush.cancel()
        return batch, hello

    try:
        batch, corrected = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    assert corrected.ts == T0 - 3600.0  # the collector's watch did correct its own
    (entry,) = [e for _, e in batch if isinstance(e, RelayedHello)]
    assert entry.hello.ts == T0


def test_a_relayed_hello_that_holds_no_hello_is_refused() -> None:
    """A tampered or broken pipe: the frame is refused (that collector restarts alone)."""
    good = RelayedHello(decode_line(_wire({"type": "hello", "v": 1, "ts": 1.0})), None, 30)
    assert check_batch([(0, good)], 1) == [(0, good)]
    for bad in (RelayedHello({"type": "hello"}, None, 30), RelayedHello(good.hello, None, 3.5),
                RelayedHello(Connected(1.0), None, 30)):  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="no hello"):
            check_batch([(0, bad)], 1)
