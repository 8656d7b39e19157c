"""Decode once (issue 38 item 2): a v2 tick a collector decoded reaches the console as its
row, and the console's sample is the one it got by decoding the tick's bytes.

Real parts: the collector's own reader and relay (``RelayReader``, ``Relay``), its frame,
the console's ``check_batch`` and ``CollectorBackend._fold``.  The agent streams come from
the agent's simulator and its v2 encoder (``CompactEncoder``), spoiled as real links and
hosts spoil them: static facts that change mid-stream, ticks dropped or repeated, a second
hello, garbage and garbled lines, ticks that take the checked path (text to sanitise, PCIe
chains), lines cut across chunks; and a v1 stream.  Each host's messages through the relay
must equal, field by field (the GPUs built, the row, the static epoch), what a console
reader gets from the same bytes.  A relayed tick is then attacked: nothing in it is
believed that the tick's text would not have had to prove.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import random
from typing import Any

import msgspec
import pytest

from probes import agent
from probes.agent.main import PCIE_EVERY_TICKS
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
    relayed_sample,
    relayed_tick,
    unframe,
)
from probes.transport.relay import Relay
from probes.wire.compact import CompactStream, SampleRow, StaticEpoch
from probes.wire.events import Connected, SessionItem, SourceHealth
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.transport.test_collector_relay import _fill

T0 = 1_800_000_000.0
SCENARIOS = ("healthy", "leak:3,throttle:2", "xid79:2@5,throttle:1", "link-downgrade:2")
GARBAGE = [b"Last login: Sun Dec  6 from 10.0.0.1\n", b"[1,2\n", b"\n", b"{\"type\":\"nope\"}\n",
           b"[\"x\",1.0,[],[],[]]\n", b"\x1b[31mwarning\x1b[0m\n", b"[" * 100 + b"\n"]


ODD_CHAINS: list[Any] = [
    {"0000:01:00.0": [{"address": "0000:00:01.0", "speed_gts": 16.0, "width": 16}]},
    {"0000:01:00.0": [{"address": "0000:01:00.0", "speed_gts": 8, "width": 4, "numa_node": -1,
                       "more": [1, {"x": None}]}], "0000:02:00.0": []},  # an int speed
    {}, {"0000:01:00.0": []},
    {"0000:01:00.0": [{"address": None, "speed_gts": None, "local_cpulist": "0-7"}, {}]},
    # what the typed decode refuses and the checked path nulls or skips:
    {"0000:01:00.0": [{"address": 7, "speed_gts": "fast", "width": 16.0, "numa_node": True}]},
    {"0000:01:00.0": [{"address": "0000:01:00.0", "speed_gts": float("nan")}]},
    {"0000:01:00.0": [{"address": "0000:01:00.0", "max_width": 2**60, "speed_gts": -1e300}]},
    {"0000:01:00.0": ["0000:00:01.0", None, {"width": 8}], "0000:02:00.0": None},
    {"0000:01:00.0": [{"address": "0000:00:01.0\u001b]0;x\u0007", "local_cpulist": "0-7"}]},
    ["0000:01:00.0"],
]
"""PCIe chains beside the agent's own: odd but believable (the fast path takes them) and
hostile (its typed decode refuses them; the checked path nulls, skips or cleans)."""


def _wire(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _hello(sim: Any, v: int) -> bytes:
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": v, "agent": "test", "ts": T0, "host": facts,
                             "gpus": gpus, "probes": {}, "simulated": ["sim"]}
    if v == 2:
        hello["columns"] = compact_columns()
    hello.update(sim.topology())
    return _wire(hello)


def agent_stream(seed: int, ticks: int, v: int = 2, spoil: bool = True) -> bytes:
    """One simulated host's stream, spoiled at random (seeded) unless not ``spoil``."""
    rng = random.Random(seed)
    sim = agent.Simulator(agent.parse_scenarios(SCENARIOS[seed % len(SCENARIOS)]), seed,
                          f"sim-{seed}")
    lines = [_hello(sim, v)]
    enc = CompactEncoder()
    for k in range(ticks):
        g, host, disks = sim.sample(3600.0 + k)
        if k % 9 == 4 and g and g[0].get("processes"):  # a job's process ends: new statics
            g[0]["processes"] = g[0]["processes"][:-1]
        if k % 13 == 6:
            g[-1]["power_limit_w"] = 250.0 + k  # a static field moves
        msg: dict[str, Any] = {"type": "sample", "v": 1, "seq": k, "ts": T0 + k, "gpus": g,
                               "host": host, "disks": disks}
        if k > 0 and k % PCIE_EVERY_TICKS == 0:  # the agent's own chains, every 30th tick
            msg["pcie"] = sim.pcie(3600.0 + k)
        r = rng.random() if spoil else 1.0
        if r < 0.04:  # text to sanitise: the checked path on both sides
            disks["sd\u001b]0;x\u0007" if rng.random() < 0.5 else "sd\u00e9"] = {"r_s": 1.0}
        elif r < 0.10:  # PCIe chains of other shapes: typed, or refused to the checked path
            msg["pcie"] = rng.choice(ODD_CHAINS)
        out = [_wire(msg)] if v == 1 else [_wire(m) for m in enc.encode(msg)]
        r = rng.random() if spoil else 1.0
        if r < 0.04:
            out = out[:-1]  # the tick lost (its static, if any, still sent)
        elif r < 0.06:
            out = []  # lost with its static: the next ticks read against the old facts
        elif r < 0.10:
            out.append(out[-1])  # sent twice
        elif r < 0.15:
            out.append(rng.choice(GARBAGE))
        elif r < 0.19 and v == 2:  # a tick garbled: a value of the wrong type
            row = json.loads(out[-1])
            row[2][rng.randrange(len(row[2]))][rng.randrange(3)] = rng.choice(["x", -1, None])
            out[-1] = _wire(row)
        elif r < 0.20:  # the agent restarts: a new hello, the statics again
            out = [_hello(sim, v)]
            enc = CompactEncoder()
        lines += out
    return b"".join(lines)


def _chunks(data: bytes, rng: random.Random) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        n = rng.choice((1, 7, 300, 700, 2000, 9000))
        out.append(data[at:at + n])
        at += n
    return out


def collector_batch(streams: list[bytes], seed: int) -> Batch:
    """What a collector's relay sends for these hosts' streams, chunks interleaved."""
    rng = random.Random(seed)
    specs = tuple(HostSpec(name=f"h{i}") for i in range(len(streams)))
    r, w = os.pipe()

    async def run() -> Batch:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        readers = [relay.new_reader(s.name) for s in specs]
        pending = [_chunks(s, rng) for s in streams]
        for s in specs:
            relay.emit(s.name, Connected(T0))
        while any(pending):
            for i, chunks in enumerate(pending):
                if chunks:
                    for m in readers[i].feed(chunks.pop(0)):
                        relay.emit(specs[i].name, m)  # the session's: not relayed
        for i, reader in enumerate(readers):
            for m in reader.close():
                relay.emit(specs[i].name, m)
        batch = relay._take()
        assert relay._flush is not None
        relay._flush.cancel()
        return batch

    try:
        batch = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    body = frame(batch)[4:]
    return check_batch(unframe(body), len(streams))


def console_fold(batch: Batch, hosts: int) -> list[list[SessionItem]]:
    """The console's fold of a batch: what it emits, per host."""
    specs = tuple(HostSpec(name=f"h{i}") for i in range(hosts))
    shard = _Shard(1, CollectorJob(specs, 4, 0.05))
    got: list[list[SessionItem]] = [[] for _ in range(hosts)]

    def emit(host: str, item: SessionItem) -> None:
        got[int(host[1:])].append(item)

    asyncio.run(CollectorBackend._fold(shard, batch, emit, FoldSlices()))
    return got


def decoded(stream: bytes, seed: int) -> list[SessionItem]:
    """What the console got by decoding the bytes itself (before issue 38 item 2)."""
    reader = MessageReader()
    out: list[SessionItem] = [Connected(T0)]
    for chunk in _chunks(stream, random.Random(seed)):
        out += reader.feed(chunk)
    return out + reader.close()


def differences(got: list[SessionItem], want: list[SessionItem]) -> list[str]:
    """Where two hosts' message lists differ: type, every field (a sample's GPUs built and
    compared), the row, the static epoch's halves, and which samples share an epoch."""
    if len(got) != len(want):
        return [f"{len(got)} messages, not {len(want)}"]
    out = []
    epochs: dict[int, int] = {}
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if type(a) is not type(b):
            out.append(f"{k}: {type(a).__name__} for {type(b).__name__}")
        elif isinstance(a, HostSample) and isinstance(b, HostSample):
            if a != b or a.gpus != b.gpus or a.host != b.host or a.disks != b.disks:
                out.append(f"{k}: sample {a.seq} differs")
            if a.wire_row != b.wire_row:
                out.append(f"{k}: sample {a.seq}'s row differs")
            ea, eb = a.static_epoch, b.static_epoch
            if type(ea) is not type(eb) or (isinstance(ea, StaticEpoch) and isinstance(
                    eb, StaticEpoch) and (ea.gpus != eb.gpus or ea.listed != eb.listed)):
                out.append(f"{k}: sample {a.seq}'s static epoch differs")
            if epochs.setdefault(id(ea), id(eb)) != id(eb):
                out.append(f"{k}: sample {a.seq} shares another epoch")
        elif a != b:
            out.append(f"{k}: {a!r} for {b!r}")
    return out


@pytest.fixture(scope="module")
def fleet() -> tuple[list[bytes], Batch]:
    streams = [agent_stream(seed, 120, v=1 if seed == 5 else 2) for seed in range(6)]
    return streams, collector_batch(streams, 38)


def test_the_console_gets_through_the_relay_the_samples_it_decoded_itself(
        fleet: tuple[list[bytes], Batch]) -> None:
    streams, batch = fleet
    relayed = sum(isinstance(e, tuple) for _, e in batch)
    raw_ticks = sum(e.count(b"\n[") for _, e in batch if isinstance(e, bytes))
    pcie_rows = sum(msgspec.msgpack.decode(e[1], type=SampleRow).pcie is not None
                    for _, e in batch if isinstance(e, tuple))
    assert relayed > 400 and raw_ticks > 20 and pcie_rows > 20, (relayed, raw_ticks, pcie_rows)
    got = console_fold(batch, len(streams))
    for i, stream in enumerate(streams):
        want = decoded(stream, 1000 + i)
        assert sum(isinstance(m, HostSample) for m in want) > 90
        assert differences(got[i], want) == [], f"host {i}"
    v1 = got[5]
    assert not any(isinstance(e, tuple) for i, e in batch if i == 5)  # v1: bytes only
    assert sum(isinstance(m, HostSample) for m in v1) > 90


def test_the_comparison_sees_a_wrong_number_and_a_lost_static_message(
        fleet: tuple[list[bytes], Batch]) -> None:
    """Negative controls: one relayed tick with one number changed, and a batch missing a
    ``static`` message (a relay that dropped it), each make the comparison fail."""
    streams, batch = fleet
    want = decoded(streams[1], 1001)
    at = next(k for k, (i, e) in enumerate(batch) if i == 1 and isinstance(e, tuple)
              and k > len(batch) // 2)
    entry = batch[at][1]
    assert isinstance(entry, tuple)
    static_id, body = entry
    row = msgspec.msgpack.decode(body, type=SampleRow)
    row.gpus[0].temp_c = (row.gpus[0].temp_c or 0.0) + 1.0  # type: ignore[attr-defined]
    wrong = list(batch)
    wrong[at] = (1, relayed_tick(static_id, row))
    assert any("differs" in d for d in differences(console_fold(wrong, 6)[1], want))
    static = next(k for k, (i, e) in enumerate(batch) if i == 1 and isinstance(e, bytes)
                  and b'"type":"static"' in e and k > len(batch) // 3)
    lost = [e for k, e in enumerate(batch) if k != static]
    assert differences(console_fold(lost, 6)[1], want) != []


def _reader_at_a_tick(fleet: tuple[list[bytes], Batch]) -> tuple[MessageReader, tuple[int, bytes]]:
    """A console reader of host 0 fed its hello and statics, and the host's next relayed
    tick (which it takes)."""
    _, batch = fleet
    reader = MessageReader()
    for i, e in batch:
        if i != 0:
            continue
        if isinstance(e, bytes):
            reader.feed(e)
        elif isinstance(e, RelayedHello):
            reader.relayed_hello(e.hello, e.columns)
        elif isinstance(e, tuple) and reader.compact is not None:
            sample = relayed_sample(reader, e)
            assert sample is not None
            return reader, e
    raise AssertionError("no relayed tick")


def _spoiled(tick: tuple[int, bytes], change: Any) -> tuple[int, bytes]:
    row = msgspec.to_builtins(msgspec.msgpack.decode(tick[1], type=SampleRow))
    change(row)
    return tick[0], msgspec.msgpack.encode(row)


def _set_gpu(at: int, value: object) -> Any:
    def change(row: list[Any]) -> None:
        row[2][0][at] = value
    return change


def _set_pcie(value: object) -> Any:
    def change(row: list[Any]) -> None:
        row[5] = value
    return change


def _set_link(link: dict[str, Any]) -> Any:
    """The tick with one PCIe chain whose one link is ``link`` (the agent's fields beside)."""
    return _set_pcie({"0000:18:00.0": [{"address": "0000:18:00.0", "speed_gts": 32.0,
                                        "width": 16, **link}]})


@pytest.mark.parametrize("attack", [
    "garbage", "negative", "nan", "huge", "escape", "c1", "gpus", "disk twice", "epoch",
    "word", "procs", "pcie shape", "pcie link", "pcie escape", "pcie c1", "pcie newline",
    "pcie nan", "pcie huge", "pcie word", "pcie half lane",
])
def test_a_relayed_tick_is_checked_as_its_text_was(fleet: tuple[list[bytes], Batch],
                                                   attack: str) -> None:
    """The console believes nothing in a relayed tick that the tick's text would have had
    to prove: bounds and types (the same typed row), printable text, the static facts'
    shape; and a tick of another ``static`` message is not built against this one."""
    reader, tick = _reader_at_a_tick(fleet)
    spoil: dict[str, Any] = {
        "garbage": lambda: (tick[0], b"\xc1\x00garbage"),
        "negative": lambda: _spoiled(tick, _set_gpu(3, -5.0)),  # temp_c
        "nan": lambda: _spoiled(tick, _set_gpu(3, float("nan"))),
        "huge": lambda: _spoiled(tick, _set_gpu(0, 1e300)),
        "escape": lambda: _spoiled(tick, lambda r: r[4][0].__setitem__(0, "sd\x1b[2J")),
        "c1": lambda: _spoiled(tick, _set_gpu(10, ["x\x9b31m"])),  # a clock-event reason
        "gpus": lambda: _spoiled(tick, lambda r: r[2].pop()),
        "disk twice": lambda: _spoiled(tick, lambda r: r[4].append(list(r[4][0]))),
        "epoch": lambda: (tick[0] + 1, tick[1]),
        "word": lambda: _spoiled(tick, _set_gpu(1, "x")),
        "procs": lambda: _spoiled(tick, lambda r: r[2][0].__setitem__(11, [1.0] * 40)),
        "pcie shape": lambda: _spoiled(tick, _set_pcie(["0000:01:00.0"])),
        "pcie link": lambda: _spoiled(tick, _set_pcie({"0000:01:00.0": [1]})),
        "pcie escape": lambda: _spoiled(tick, _set_pcie({"0000:01:00.0\x1b[2J": []})),
        "pcie c1": lambda: _spoiled(tick, _set_link({"address": "0000:01:00.0\x9b31m"})),
        "pcie newline": lambda: _spoiled(tick, _set_link({"local_cpulist": "0-7\n0-7"})),
        "pcie nan": lambda: _spoiled(tick, _set_link({"speed_gts": float("nan")})),
        "pcie huge": lambda: _spoiled(tick, _set_link({"max_width": 2**60})),
        "pcie word": lambda: _spoiled(tick, _set_link({"width": "x16"})),
        "pcie half lane": lambda: _spoiled(tick, _set_link({"width": 16.5})),
    }
    before = reader.stats.garbled
    assert relayed_sample(reader, spoil[attack]()) is None
    assert reader.stats.garbled == before + 1
    assert relayed_sample(reader, tick) is not None  # the next good tick is taken


def test_a_relayed_tick_before_any_static_or_on_a_v1_stream_is_refused(
        fleet: tuple[list[bytes], Batch]) -> None:
    _, tick = _reader_at_a_tick(fleet)
    fresh = MessageReader()
    assert relayed_sample(fresh, tick) is None
    fresh.feed(b'{"type":"hello","v":1,"agent":"t","ts":1,"host":{"hostname":"x"},"gpus":[]}\n')
    assert fresh.compact is None and relayed_sample(fresh, tick) is None
    assert fresh.stats.garbled == 2


@pytest.mark.parametrize("entry", [(1,), (1, b"x", 2), ("1", b"x"), (1, "x"), (True, b"x"),
                                   (1, bytearray(b"x")), [1, b"x"]])
def test_a_batch_with_a_tick_that_is_no_pair_of_count_and_bytes_is_refused(
        entry: object) -> None:
    with pytest.raises(ValueError):
        check_batch([(0, entry)], 1)
    assert check_batch([(0, (3, b"x"))], 1) == [(0, (3, b"x"))]


def test_a_blocked_relay_keeps_each_hosts_newest_tick_row_and_counts_the_others() -> None:
    """While the console does not read, a relayed tick is a sample like the tick's line:
    the host's newest wins, the others are counted."""
    lines = agent_stream(1, 8, spoil=False).splitlines(keepends=True)
    ticks = [k for k, line in enumerate(lines) if line.startswith(b"[")]
    specs = (HostSpec(name="h0"),)
    r, w = os.pipe()

    async def run() -> Batch:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        reader = relay.new_reader("h0")
        reader.feed(b"".join(lines[:ticks[0] + 1]))
        _fill(w)
        relay.flush()  # the pipe is full: blocked from here
        assert relay.blocked
        for k in ticks[1:]:
            reader.feed(lines[k])
        batch = relay._take()
        assert relay._unsent is not None
        asyncio.get_running_loop().remove_writer(w)
        return batch

    try:
        batch = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    *statics, tick, report = [e for _, e in batch]
    assert all(isinstance(e, bytes) and e.startswith(b'{"type":"static"') for e in statics)
    assert isinstance(tick, tuple)
    assert msgspec.msgpack.decode(tick[1], type=SampleRow).seq == \
        json.loads(lines[ticks[-1]])[0]
    assert isinstance(report, SourceHealth)
    assert report.dropped_samples == len(ticks) - 2


def test_a_static_message_the_relay_dropped_sends_the_ticks_as_text_until_the_next(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A relay that had to drop a host's ``static`` line (the console did not read, the
    host's other lines past their bound) relays its ticks as text, which the console decodes
    against the facts it has, as before; from the next ``static`` line it queues, rows again,
    and the console builds them (the tick names its ``static`` line, not a count)."""
    lines = agent_stream(1, 40, spoil=False).splitlines(keepends=True)
    statics = [k for k, line in enumerate(lines) if line.startswith(b'{"type":"static"')]
    assert len(statics) >= 3
    s1, s2 = statics[1], statics[2]
    specs = (HostSpec(name="h0"),)
    r, w = os.pipe()

    async def run() -> tuple[list[object], list[object], list[object]]:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        reader = relay.new_reader("h0")
        reader.feed(b"".join(lines[:s1]))
        sent = relay._take()
        filled = _fill(w)
        relay.add(0, b"x" * 4096 + b"\n")  # more than the full pipe takes
        relay.flush()  # the pipe is full: blocked from here
        assert relay.blocked and filled
        monkeypatch.setattr(relay_module, "KEEP_BYTES", 0)
        reader.feed(b"".join(lines[s1:s2]))  # its static line dropped
        assert 0 in relay.lost_static
        monkeypatch.undo()
        during = [e for _, e in relay._take()]
        reader.feed(b"".join(lines[s2:]))  # the next static is queued
        after = relay._take()
        asyncio.get_running_loop().remove_writer(w)
        return [e for _, e in sent], during, [e for _, e in after]

    try:
        sent, during, after = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    assert not any(isinstance(e, tuple) for e in during)  # text while the static is lost
    assert any(isinstance(e, bytes) and e.startswith(b"[") for e in during)
    assert isinstance(during[-1], SourceHealth) and during[-1].dropped_lines == 1
    assert after[0] == lines[s2] and isinstance(after[-1], tuple)  # rows again
    reader = MessageReader()
    for e in sent + during + after:
        if isinstance(e, bytes):
            reader.feed(e)
        elif isinstance(e, RelayedHello):
            reader.relayed_hello(e.hello, e.columns)
        elif isinstance(e, tuple):
            assert relayed_sample(reader, e) is not None  # built: the same static line


def test_a_relayed_tick_with_good_chains_is_built_with_them(
        fleet: tuple[list[bytes], Batch]) -> None:
    """The positive control of the chain attacks above: the agent's link is taken."""
    reader, tick = _reader_at_a_tick(fleet)
    sample = relayed_sample(reader, _spoiled(tick, _set_link({"numa_node": -1})))
    assert sample is not None and sample.pcie is not None
    (link,) = sample.pcie["0000:18:00.0"]
    assert (link.address, link.speed_gts, link.width, link.numa_node) == \
        ("0000:18:00.0", 32.0, 16, -1)


def _text_decoded_before(stream: bytes, seed: int, monkeypatch: pytest.MonkeyPatch
                         ) -> list[SessionItem]:
    """What the console got from the bytes before the PCIe chains were typed: a tick with
    chains refused by the fast path, so v1's checked decoder built it."""
    fast = CompactStream._fast

    def fast_without_chains(self: CompactStream, line: bytes) -> HostSample:
        if _TICK(line).pcie is not None:
            raise ValueError("chains: the checked path, as before")
        return fast(self, line)

    with monkeypatch.context() as m:
        m.setattr(CompactStream, "_fast", fast_without_chains)
        return decoded(stream, seed)


_TICK = msgspec.json.Decoder(SampleRow).decode


def value_differences(a: object, b: object, at: str = "") -> list[str]:
    """Where two decoded values differ: type, and every field of every dataclass (a
    sample's GPUs built), mapping (keys in order: the chains) and sequence, down to the
    numbers' types and signs; a sample's wire row and static epoch are not values."""
    if type(a) is not type(b):
        return [f"{at}: {type(a).__name__} for {type(b).__name__}"]
    if isinstance(a, HostSample) and isinstance(b, HostSample):
        return value_differences({f: getattr(a, f) for f in _SAMPLE_FIELDS},
                                 {f: getattr(b, f) for f in _SAMPLE_FIELDS}, at)
    if dataclasses.is_dataclass(a):  # by field (the fast path's GPUs hold another order)
        return value_differences({f.name: getattr(a, f.name) for f in dataclasses.fields(a)},
                                 {f.name: getattr(b, f.name) for f in dataclasses.fields(b)},
                                 at)
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return [f"{at}: keys {list(a)} for {list(b)}"]
        return [d for k in a for d in value_differences(a[k], b[k], f"{at}.{k}")]
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        if len(a) != len(b):
            return [f"{at}: {len(a)} items for {len(b)}"]
        return [d for k, (x, y) in enumerate(zip(a, b, strict=True))
                for d in value_differences(x, y, f"{at}[{k}]")]
    if isinstance(a, float) and isinstance(b, float):
        same = a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
        return [] if same or (math.isnan(a) and math.isnan(b)) else [f"{at}: {a} for {b}"]
    return [] if a == b else [f"{at}: {a!r} for {b!r}"]


_SAMPLE_FIELDS = ("ts", "seq", "gpus", "host", "disks", "pcie")


def test_the_ticks_with_chains_come_through_the_relay_as_their_text_gave_them_before(
        fleet: tuple[list[bytes], Batch], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every message the console builds through the relay (the ticks with PCIe chains now
    as rows) equals, field by field down to each number's type, what the console got from
    the same bytes before (the chains' ticks through v1's checked decoder); the chains'
    links are the checked decoder's shared objects.  Negative control: one link's width
    changed in one relayed row is seen."""
    streams, batch = fleet
    got = console_fold(batch, len(streams))
    chained = 0
    for i, stream in enumerate(streams):
        before = _text_decoded_before(stream, 1000 + i, monkeypatch)
        assert len(got[i]) == len(before), f"host {i}"
        for k, (a, b) in enumerate(zip(got[i], before, strict=True)):
            assert value_differences(a, b, f"host {i} message {k}") == []
            if isinstance(a, HostSample) and a.pcie:
                assert isinstance(b, HostSample) and b.pcie
                assert all(x is y for bus in a.pcie for x, y in
                           zip(a.pcie[bus], b.pcie[bus], strict=True))  # shared links
                chained += a.static_epoch is not None  # the fast path's (was the checked)
    assert chained > 20
    at = next(k for k, (i, e) in enumerate(batch) if i == 2 and isinstance(e, tuple)
              and msgspec.msgpack.decode(e[1], type=SampleRow).pcie)
    entry = batch[at][1]
    assert isinstance(entry, tuple)
    row = msgspec.msgpack.decode(entry[1], type=SampleRow)
    assert row.pcie is not None
    next(iter(row.pcie.values()))[0].width = 8
    wrong = list(batch)
    wrong[at] = (2, relayed_tick(entry[0], row))
    before = _text_decoded_before(streams[2], 1002, monkeypatch)
    assert any("width" in d for a, b in zip(console_fold(wrong, 6)[2], before, strict=True)
               for d in value_differences(a, b))
