"""Wire protocol v2: the same agent tick decodes to the same sample as v1, in a tenth the bytes.

The agent is run twice per scenario from its shipped source, once with ``--wire 2``; the
two streams must decode to equal messages (timestamps apart: each run reads the clock).
The v2 reader's one-pass path is held to its checked path on the agent's ticks and on
mutated ones, and its state (the ``static`` facts) must follow a GPU that drops out.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import subprocess
import sys
from typing import Any

import pytest

from probes.agent import output
from probes.errors import ProtocolError
from probes.wire import compact, decode_fields
from probes.wire.protocol import MessageReader
from probes.wire.samples import DiskStats, GpuSample, GpuState, Hello, HostSample, HostStats
from tests.conftest import AGENT_SOURCE

SCENARIOS = ("xid79:6@60,throttle:5", "leak:3,link-downgrade:2", "healthy")


def _agent(scenario: str, *extra: str, count: int = 40) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--simulate", scenario, "--interval", "30", "--fast",
         "--count", str(count), "--seed", "4", *extra],
        input=AGENT_SOURCE, capture_output=True, check=True, timeout=60)
    return proc.stdout


def _timeless(m: object) -> object:
    if isinstance(m, Hello):
        return dataclasses.replace(m, ts=0.0, protocol=0)
    return dataclasses.replace(m, ts=0.0) if dataclasses.is_dataclass(m) else m  # type: ignore


@pytest.fixture(scope="module")
def streams() -> dict[str, tuple[bytes, bytes]]:
    return {s: (_agent(s), _agent(s, "--wire", "2")) for s in SCENARIOS}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_v2_decodes_to_the_v1_sample_of_the_same_tick(
        streams: dict[str, tuple[bytes, bytes]], scenario: str) -> None:
    v1_raw, v2_raw = streams[scenario]
    r1, r2 = MessageReader(), MessageReader()
    v1, v2 = r1.feed(v1_raw), r2.feed(v2_raw)
    assert r2.stats.garbled == r2.stats.unknown_type == 0
    assert r2.compact is not None and r2.compact.known
    assert [type(m) for m in v1] == [type(m) for m in v2]
    samples = [(a, b) for a, b in zip(v1, v2, strict=True) if isinstance(a, HostSample)]
    assert len(samples) == 40
    for a, b in zip(v1, v2, strict=True):
        assert _timeless(a) == _timeless(b)
    for a, b in samples:  # same types too: an int on the wire still reads as a float
        assert isinstance(b, HostSample)
        for ga, gb in zip(a.gpus, b.gpus, strict=True):
            assert {k: type(v) for k, v in vars(ga).items()} == \
                {k: type(v) for k, v in vars(gb).items()}
    # the 30th tick's PCIe chains travel too
    assert any(isinstance(b, HostSample) and b.pcie for _, b in samples)


def test_a_lost_gpu_resends_the_static_facts(streams: dict[str, tuple[bytes, bytes]]) -> None:
    lines = streams["xid79:6@60,throttle:5"][1].splitlines()
    statics = [json.loads(x) for x in lines if x.startswith(b'{"type":"static"')]
    assert len(statics) == 2  # before the first tick, and when GPU 6 falls off the bus
    assert [g[0] for g in statics[0]["gpus"]] == list(range(8))
    assert [g[0] for g in statics[1]["gpus"]] == [0, 1, 2, 3, 4, 5, 7]
    samples = [m for m in MessageReader().feed(b"\n".join(lines) + b"\n")
               if isinstance(m, HostSample)]
    assert len(samples[0].gpus) == 8 and [g.index for g in samples[-1].gpus][5:] == [5, 7]
    assert all(g.state is GpuState.OK for g in samples[-1].gpus)


def test_v2_ticks_are_a_tenth_of_v1(streams: dict[str, tuple[bytes, bytes]]) -> None:
    v1_raw, v2_raw = streams["leak:3,link-downgrade:2"]
    v1 = [x for x in v1_raw.splitlines() if x.startswith(b'{"type":"sample"')]
    v2 = [x for x in v2_raw.splitlines() if x.startswith(b"[")]
    assert len(v1) == len(v2) == 40
    v1_bytes = sum(map(len, v1)) / len(v1)
    v2_bytes = sum(map(len, v2)) / len(v2)
    assert v2_bytes < 900 and v1_bytes / v2_bytes > 8, (v1_bytes, v2_bytes)


def test_agent_and_console_declare_the_same_columns() -> None:
    cols = output.compact_columns()
    assert {k: tuple(v) for k, v in cols.items()} == compact.COLUMNS
    gpu = set(compact.GPU_STATIC) | set(compact.GPU_MOVING[:-1])
    assert gpu == {f.name for f in dataclasses.fields(GpuSample)}
    assert set(compact.HOST_STATIC) | set(compact.HOST_MOVING) == \
        {f.name for f in dataclasses.fields(HostStats)}
    assert tuple(f.name for f in dataclasses.fields(DiskStats)) == compact.DISK_COLUMNS
    assert compact.GpuRow.__struct_fields__ == (*compact.GPU_MOVING[:-1], "processes")
    assert compact.HostRow.__struct_fields__ == compact.HOST_MOVING


def _stream(raw: bytes) -> tuple[compact.CompactStream, list[bytes]]:
    """A v2 reader fed up to its first tick, and the tick lines."""
    lines = raw.splitlines()
    reader = MessageReader()
    first = next(i for i, x in enumerate(lines) if x.startswith(b"["))
    reader.feed(b"\n".join(lines[:first]) + b"\n")
    assert reader.compact is not None
    return reader.compact, [x for x in lines[first:] if x.startswith(b"[")]


def _either(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return "garbled"


ODD: list[object] = [None, True, 0, -1, 7, 2**53, 2**53 + 1, 2**64, 1.5, -0.0, 1e300, "x",
                     [], {}, [1, "a"], ["a", "b"], [None], [5.5, 1], [-3]]


def odd(rng: random.Random, *more: object) -> object:
    """One of ``ODD`` (or ``more``), as a copy: a row that takes it is mutated further, and
    the very object in ``ODD`` must not change for the tests after (its ``[None]`` once
    became ``[[5.5, 1]]``, and a later module's streams, built from ``ODD``, lost rows)."""
    return copy.deepcopy(rng.choice((*ODD, *more)) if more else rng.choice(ODD))


def test_one_pass_ticks_equal_the_checked_rebuild(streams: dict[str, tuple[bytes, bytes]]
                                                  ) -> None:
    stream, ticks = _stream(streams["leak:3,link-downgrade:2"][1])
    fast_taken = 0
    for line in ticks:
        slow = stream._slow(json.loads(line))
        if b"pcie" in line or json.loads(line)[5:]:
            continue
        assert stream._fast(line) == slow
        fast_taken += 1
    assert fast_taken >= 38
    rng = random.Random(22)
    base = json.loads(ticks[3])
    agreed = 0
    for _ in range(500):
        row = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 3)):
            where = rng.choice(("gpu", "gpu", "host", "disk", "top"))
            if where == "gpu" and isinstance(row[2], list) and row[2]:
                g = row[2][rng.randrange(len(row[2]))]
                if isinstance(g, list) and g:
                    g[rng.randrange(len(g))] = odd(rng)
            elif where == "host" and isinstance(row[3], list) and row[3]:
                row[3][rng.randrange(len(row[3]))] = odd(rng)
            elif where == "disk" and isinstance(row[4], list) and row[4]:
                d = row[4][rng.randrange(len(row[4]))]
                if isinstance(d, list) and d:
                    d[rng.randrange(len(d))] = odd(rng)
            elif where == "top":
                row[rng.randrange(5)] = odd(rng)
        line = json.dumps(row, separators=(",", ":")).encode()
        fast = _either(stream.sample, line, lambda line=line: json.loads(line))
        checked = _either(stream._slow, json.loads(line))
        assert fast == checked, line
        agreed += isinstance(fast, HostSample)
    assert agreed > 100


def test_a_tick_before_any_static_facts_is_garbled() -> None:
    reader = MessageReader()
    hello = {"type": "hello", "v": 2, "ts": 5.0, "host": {"hostname": "h"}, "gpus": [],
             "columns": output.compact_columns()}
    out = reader.feed(json.dumps(hello).encode() + b"\n[0,6.0,[],[],[]]\n")
    assert [type(m) for m in out] == [Hello]
    assert reader.stats.garbled == 1
    with pytest.raises(ProtocolError):
        compact.CompactStream(output.compact_columns(), decode_fields._decode_sample).sample(
            b"[0,6.0,[],[],[]]", lambda: [0, 6.0, [], [], []])


def test_static_strings_are_sanitised_and_columns_an_agent_adds_are_tolerated() -> None:
    cols = output.compact_columns()
    cols["gpu"] = [*cols["gpu"], "fan_pct"]  # a newer agent's column: the checked path reads on
    hello = {"type": "hello", "v": 2, "ts": 5.0, "host": {"hostname": "h"}, "gpus": [],
             "columns": cols}
    static_gpu = [0, "GPU-\x1b]0;pwned\x07", "ok"] + [None] * (len(compact.GPU_STATIC) - 4) \
        + [[[7, "py\u202ethon", "root"]]]
    static = {"type": "static", "v": 2, "ts": 5.0, "gpus": [static_gpu], "host": [100, 0]}
    gpu_row = [1.0] * 10 + [["sw_power_cap"], [12.5], 33]
    tick = [1, 6.0, [gpu_row], [5.0, 1, 1, 1, 50, 0, 0, 0], [["sda", 1, 2, 3, 4, 5, 6, 7, 8]]]
    lines = [json.dumps(x).encode() for x in (hello, static, tick)]
    reader = MessageReader()
    out = reader.feed(b"\n".join(lines) + b"\n")
    assert reader.compact is not None and not reader.compact.known
    s = out[-1]
    assert isinstance(s, HostSample)
    g = s.gpus[0]
    assert g.uuid == "GPU-\\x1b]0;pwned\\x07"
    assert g.processes is not None and g.processes[0].name == "py<U+202E>thon"
    assert g.processes[0].used_mib == 12.5 and g.clock_reasons == ("sw_power_cap",)
    assert s.host.mem_total_bytes == 100 and s.host.mem_used_bytes == 50
    assert s.disks[0].name == "sda" and s.disks[0].util == 8.0


def test_a_v1_agent_still_streams_to_this_console(streams: dict[str, tuple[bytes, bytes]]
                                                  ) -> None:
    reader = MessageReader()
    out = reader.feed(streams["healthy"][0])
    assert reader.compact is None and reader.stats.garbled == 0
    assert sum(isinstance(m, HostSample) for m in out) == 40


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_recorder_reads_a_tick_from_its_row_as_from_the_sample(
        streams: dict[str, tuple[bytes, bytes]], scenario: str) -> None:
    # The recorder's split takes a fast-path tick's numbers from its decoded row
    # (HostSample.wire_row): the same frame as from the sample's own fields, tick after tick.
    from probes.store import columns

    reader = MessageReader()
    samples = [m for m in reader.feed(streams[scenario][1]) if isinstance(m, HostSample)]
    assert sum(s.wire_row is not None for s in samples) > 30
    assert columns._ROWS_FIT  # the wire's rows and the frame's numbers agree on the order
    seen: dict[int, Any] = {}
    plain_seen: dict[int, Any] = {}
    for s in samples:
        got = columns.split(s, seen)
        s.gpus, s.host  # noqa: B018 (a row sample builds its GPUs, host and disks when read:
        # the copy needs them)
        plain = object.__new__(HostSample)
        object.__setattr__(plain, "__dict__", {k: v for k, v in vars(s).items()
                                               if k != "wire_row"})
        want = columns.split(plain, plain_seen)
        assert got is not None and want is not None
        assert got.signature == want.signature
        assert got[1:] == want[1:]
        assert [type(x) for x in got.numbers] == [type(x) for x in want.numbers]


def test_a_tick_whose_disks_changed_is_split_from_its_fields(
        streams: dict[str, tuple[bytes, bytes]]) -> None:
    # The row path reuses the remembered signature only while the disks stay the same.
    import orjson

    from probes.store import columns

    lines = streams["healthy"][1].splitlines()
    ticks = [i for i, ln in enumerate(lines) if ln.startswith(b"[")]
    tick = orjson.loads(lines[ticks[3]])
    tick[4].append(["nvme9n1", *tick[4][0][1:]])
    lines[ticks[3]] = orjson.dumps(tick)
    samples = [m for m in MessageReader().feed(b"\n".join(lines) + b"\n")
               if isinstance(m, HostSample)]
    seen: dict[int, Any] = {}
    frames = [columns.split(s, seen) for s in samples[:6]]
    assert samples[3].wire_row is not None and len(samples[3].disks) == len(samples[2].disks) + 1
    assert all(f is not None for f in frames)
    assert frames[3].signature != frames[2].signature  # type: ignore[union-attr]
    assert frames[3].numbers == columns.split(samples[3]).numbers  # type: ignore[union-attr]
    assert frames[4].signature == frames[2].signature  # type: ignore[union-attr]
