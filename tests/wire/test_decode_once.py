"""Decode once (issue 38 item 2): a collector checks each v2 tick but builds no sample.

The collector relays a tick's bytes and the console decodes them; the collector's session
needs only the line's verdict (its garbled-line streak ends a stream).  So its reader
(``RelayReader``, ``builds_ticks = False``) must count every line exactly as a full reader
does, good or garbled, and return every other message unchanged (a fabric report as its
shell since session 11: its time and interval, no ports or links; nothing in the collector
reads more, and the relay forwards the line).  Also here: the console's
fold reads a tick's static half again only when its static facts change.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random

from probes.agent import output
from probes.analysis.allocation import HoldTracker
from probes.transport.relay import RelayReader
from probes.wire import compact
from probes.wire.protocol import MessageReader
from probes.wire.samples import FabricSample, HostSample
from tests.wire.test_wire_v2 import ODD, _agent, _either, _stream, odd


class CheckingReader(MessageReader):
    builds_ticks = False


def _shell(m: object) -> object:
    """A fabric report as a checking reader returns it (``fabric_fast.fabric_shell``)."""
    if isinstance(m, FabricSample):
        return FabricSample(m.ts, m.interval_s, (), None, None)
    return m


def test_the_collectors_reader_builds_no_tick() -> None:
    assert RelayReader.builds_ticks is False
    assert MessageReader.builds_ticks is True


def test_a_checking_reader_counts_and_returns_as_a_full_one() -> None:
    raw = _agent("xid79:6@20,throttle:5", "--wire", "2", count=30)
    lines = raw.splitlines(keepends=True)
    ticks = [i for i, x in enumerate(lines) if x.startswith(b"[")]
    # garbled ticks among the good ones: cut short, a GPU short, a word for a number
    lines[ticks[5]] = lines[ticks[5]][:40] + b"\n"
    row = json.loads(lines[ticks[9]])
    row[2] = row[2][:-1]
    lines[ticks[9]] = json.dumps(row).encode() + b"\n"
    lines[ticks[12]] = lines[ticks[12]].replace(b"[", b'["x",', 1)
    full, checking = MessageReader(), CheckingReader()
    got_full: list[object] = []
    got_checking: list[object] = []
    streaks: list[tuple[int, int]] = []
    for line in lines:
        got_full += full.feed(line)
        got_checking += checking.feed(line)
        streaks.append((full.bad_streak, checking.bad_streak))
    assert all(a == b for a, b in streaks)
    assert full.stats == checking.stats
    assert full.stats.garbled == 3
    assert [_shell(m) for m in got_full if not isinstance(m, HostSample)] == got_checking
    assert any(isinstance(m, FabricSample) and m.ports for m in got_full)
    assert sum(isinstance(m, HostSample) for m in got_full) == 27
    assert not any(isinstance(m, HostSample) for m in got_checking)


def test_a_ticks_verdict_without_the_sample_is_the_samples() -> None:
    stream, ticks = _stream(_agent("leak:3,link-downgrade:2", "--wire", "2"))
    rng = random.Random(38)
    kinds = {True: 0, False: 0}
    for k in range(600):
        row = json.loads(ticks[k % len(ticks)])
        for _ in range(rng.randint(0, 3)):
            where = rng.choice(("gpu", "gpu", "host", "disk", "top", "procs"))
            gpus = row[2] if isinstance(row[2], list) else []
            if where in ("gpu", "procs") and gpus:
                g = gpus[rng.randrange(len(gpus))]
                if isinstance(g, list) and g:
                    g[-1 if where == "procs" else rng.randrange(len(g))] = odd(rng)
            elif where == "host" and isinstance(row[3], list) and row[3]:
                row[3][rng.randrange(len(row[3]))] = odd(rng)
            elif where == "disk" and isinstance(row[4], list) and row[4]:
                d = row[4][rng.randrange(len(row[4]))]
                if isinstance(d, list) and d:
                    d[rng.randrange(len(d))] = odd(rng)
            elif where == "top":
                row[rng.randrange(5)] = odd(rng)
        line = json.dumps(row, separators=(",", ":")).encode()
        good = not isinstance(
            _either(stream.sample, line, lambda line=line: json.loads(line)), str)
        checked = not isinstance(
            _either(stream.readable, line, lambda line=line: json.loads(line)), str)
        assert good == checked, line
        kinds[good] += 1
    assert kinds[True] > 100 and kinds[False] > 30


def _thin_stream(raw: bytes) -> compact.CompactStream:
    """A collector's stream (``builds_ticks`` False) fed up to its first tick."""
    lines = raw.splitlines()
    reader = CheckingReader()
    first = next(i for i, x in enumerate(lines) if x.startswith(b"["))
    reader.feed(b"\n".join(lines[:first]) + b"\n")
    assert reader.compact is not None
    return reader.compact


def test_a_thin_streams_verdict_is_the_full_streams_sample() -> None:
    """A collector's stream keeps only the check's summary of its static facts (issue 38,
    memory) and builds the checked halves when a tick needs the checked path: its verdicts
    are a full stream's, and it builds them only for such a tick."""
    raw = _agent("leak:3,link-downgrade:2", "--wire", "2")
    full, ticks = _stream(raw)
    thin = _thin_stream(raw)
    for line in ticks[:20]:
        assert thin.readable(line, lambda line=line: json.loads(line)) is not None  # its row
    assert thin._static_gpus == [] and thin._gpu_base == []  # nothing built for good ticks
    rng = random.Random(3838)
    kinds = {True: 0, False: 0}
    for k in range(400):
        row = json.loads(ticks[k % len(ticks)])
        gpus = row[2] if isinstance(row[2], list) else []
        where = rng.choice(("none", "gpu", "procs", "top"))
        if where in ("gpu", "procs") and gpus:
            g = gpus[rng.randrange(len(gpus))]
            if isinstance(g, list) and g:
                g[-1 if where == "procs" else rng.randrange(len(g))] = odd(rng)
        elif where == "top":
            row[rng.randrange(5)] = odd(rng)
        line = json.dumps(row, separators=(",", ":")).encode()
        good = not isinstance(_either(full.sample, line, lambda line=line: json.loads(line)), str)
        checked = not isinstance(
            _either(thin.readable, line, lambda line=line: json.loads(line)), str)
        assert good == checked, line
        kinds[good] += 1
    assert kinds[True] > 100 and kinds[False] > 20


def _v2_line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_a_hold_is_read_again_when_the_static_facts_change() -> None:
    """The hold tracker skips a v2 tick whose static facts it has read (issue 38): a new
    ``static`` message (another job on the GPU) is followed at once, and every step agrees
    with a tracker fed the same samples without their hidden static-facts marker."""
    cols = output.compact_columns()
    hello = {"type": "hello", "v": 2, "ts": 5.0, "host": {"hostname": "h"}, "gpus": [],
             "columns": cols}

    def static(job: str) -> dict[str, object]:
        gpu = [0, "GPU-0", "ok"] + [None] * (len(compact.GPU_STATIC) - 4) \
            + [[[7, "python", "u", job]]]
        return {"type": "static", "v": 2, "ts": 5.0, "gpus": [gpu], "host": [100, 0]}

    def tick(ts: float, mib: float) -> list[object]:
        return [int(ts), ts, [[1.0] * 10 + [[], [mib]]], [5.0, 1, 1, 1, 50, 0, 0, 0], []]

    lines = [hello, static("100"), tick(6.0, 10.0), tick(7.0, 11.0), static("200"),
             tick(8.0, 12.0), tick(9.0, 13.0), static("200"), tick(10.0, 14.0)]
    reader = MessageReader()
    fast, plain = HoldTracker(), HoldTracker()
    held = []
    for obj in lines:
        for m in reader.feed(_v2_line(obj)):
            if isinstance(m, HostSample):
                assert m.static_epoch is not None
                fast.update(m)
                plain.update(dataclasses.replace(m))
                assert dict(fast.held) == dict(plain.held)
                held.append(dict(fast.held))
    assert held == [{0: ("100", 6.0)}, {0: ("100", 6.0)}, {0: ("200", 8.0)},
                    {0: ("200", 8.0)}, {0: ("200", 8.0)}]



_ODD_AT_COLLECTION = copy.deepcopy(ODD)
"""``ODD`` as collected, before any test ran."""


def test_the_odd_values_are_left_as_they_were() -> None:
    """The mutations above take copies of ``ODD``: the streams later modules build from it
    (``test_row_fold``, ``test_stage_pack``) must not depend on which tests ran first in
    their worker (CI once found 498 rows where 500 were built)."""
    test_a_ticks_verdict_without_the_sample_is_the_samples()
    assert _ODD_AT_COLLECTION == ODD
