"""Issue 38, the collector's memory: a collector's (thin) v2 stream keeps its last ``static``
message as the line's bytes, parsed again only for a tick its quick check refuses, and such a
tick (PCIe chains, text to sanitise, a garbled value) no longer turns the stream into one that
holds every checked half for good (~90 KB a link-downgrade host).

The collector's output must not move: the same simulated, spoiled streams go through the real
``RelayReader``/``Relay`` with main's stream (``MainsThin``: the parsed message kept, a refused
tick building the halves for good) and with this one.  Compared: every relayed entry (text runs
and ticks' rows with their static line's id), each reader's counters and garbage streak, the
messages it returned to its session, and every sample the thin stream built for a refused tick
(field by field; the collector only keeps its verdict).  A negative control (a stream that
re-reads the first ``static`` line it kept, not the last) shows the comparison can fail.
"""

from __future__ import annotations

import asyncio
import os
import random
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from probes.config.fleet import HostSpec
from probes.transport.collector_wire import CollectorJob
from probes.transport.relay import Relay
from probes.wire import compact, protocol
from probes.wire.samples import HostSample
from tests.transport.test_relay_rows import _chunks, agent_stream


class MainsThin(compact.CompactStream):
    """main's collector stream (before this change): it keeps the ``static`` message parsed,
    and a tick its quick check refuses builds the checked halves, which it keeps."""

    def static(self, obj: dict[str, Any], static_id: int = 0, line: bytes | None = None,
               finite: bool = False) -> None:
        super().static(obj, static_id, None, finite)  # no line: the parsed message is kept

    def sample(self, line: bytes | None, parsed: Callable[[], Any]) -> HostSample:
        if self._thin and self._static_gpus is not None:  # main's ``_built``
            self._builds = True
            try:
                self._take(self._kept())
            finally:
                self._builds = False
        return super().sample(line, parsed)


class FirstStatic(compact.CompactStream):
    """Wrong on purpose (the negative control): re-reads the first ``static`` line kept."""

    def static(self, obj: dict[str, Any], static_id: int = 0, line: bytes | None = None,
               finite: bool = False) -> None:
        first = self._message if isinstance(self._message, bytes) else line
        super().static(obj, static_id, line, finite)
        if isinstance(self._message, bytes) and first is not None:
            self._message = first


def _collect(streams: list[bytes], seed: int, cls: type[compact.CompactStream],
             monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """What a collector produces for these streams (chunks interleaved across hosts):
    the relayed entries, and per host its counters, returned messages and built samples."""
    built: list[list[Any]] = [[] for _ in streams]
    streams_made: list[compact.CompactStream] = []

    class Recording(cls):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            streams_made.append(self)

        def sample(self, line: bytes | None, parsed: Callable[[], Any]) -> HostSample:
            try:
                s = super().sample(line, parsed)
            except Exception as exc:
                built[self.host].append(("refused", type(exc).__name__))
                raise
            built[self.host].append((s, s.gpus, s.host, s.disks, s.pcie))
            return s

    monkeypatch.setattr(protocol, "CompactStream", Recording)
    rng = random.Random(seed)
    specs = tuple(HostSpec(name=f"h{i}") for i in range(len(streams)))
    r, w = os.pipe()
    per_host: list[Any] = []

    async def run() -> list[Any]:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        readers = [relay.new_reader(s.name) for s in specs]
        items: list[list[Any]] = [[] for _ in specs]
        pending = [_chunks(s, rng) for s in streams]
        entries: list[Any] = []
        while any(pending):
            for i, chunks in enumerate(pending):
                if chunks:
                    before = len(streams_made)
                    items[i] += readers[i].feed(chunks.pop(0))
                    for made in streams_made[before:]:
                        made.host = i  # type: ignore[attr-defined]
            entries += relay._take()  # as the flush would, often
        for i, reader in enumerate(readers):
            items[i] += reader.close()
        entries += relay._take()
        assert relay._flush is not None
        relay._flush.cancel()
        for i, reader in enumerate(readers):
            st = reader.stats
            per_host.append((st.lines, st.garbled, st.overlong, st.unknown_type,
                             reader.bad_streak, items[i], built[i]))
        return entries

    try:
        entries = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    monkeypatch.undo()
    return entries, per_host


def _streams() -> list[bytes]:
    return [agent_stream(100 + seed, 150) for seed in range(8)]


def _differences(a: tuple[list[Any], list[Any]], b: tuple[list[Any], list[Any]]) -> list[str]:
    out = []
    if a[0] != b[0]:
        out.append("relayed entries differ")
    for i, (x, y) in enumerate(zip(a[1], b[1], strict=True)):
        if x[:5] != y[:5]:
            out.append(f"host {i}: counters {x[:5]} != {y[:5]}")
        if x[5] != y[5]:
            out.append(f"host {i}: messages differ")
        if x[6] != y[6]:
            out.append(f"host {i}: built samples differ")
    return out


def test_the_collector_relays_and_counts_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    streams = _streams()
    mains = _collect(streams, 38, MainsThin, monkeypatch)
    now = _collect(streams, 38, compact.CompactStream, monkeypatch)
    assert _differences(now, mains) == []
    built = sum(1 for h in mains[1] for s in h[6] if s[0] != "refused")
    refused = sum(1 for h in mains[1] for s in h[6] if s[0] == "refused")
    garbled = sum(h[1] for h in mains[1])
    ticks = sum(isinstance(e, tuple) for _, e in mains[0])
    assert built > 60 and refused > 10 and garbled > 30 and ticks > 900, \
        (built, refused, garbled, ticks)
    assert any(s[4] is not None for h in mains[1] for s in h[6] if s[0] != "refused")  # PCIe


def test_the_comparison_sees_a_stale_static_message(monkeypatch: pytest.MonkeyPatch) -> None:
    streams = _streams()
    mains = _collect(streams, 38, MainsThin, monkeypatch)
    wrong = _collect(streams, 38, FirstStatic, monkeypatch)
    assert any("built samples differ" in d for d in _differences(wrong, mains))


def _after_pcie() -> tuple[compact.CompactStream, bytes]:
    """A collector's stream fed its hello, ``static`` line and one tick with PCIe chains its
    quick check refuses (a width of 16.0, which v1's checked decoder reads as 16)."""
    reader = protocol.MessageReader()
    reader.builds_ticks = False
    lines = agent_stream(7, 60, spoil=False).splitlines(keepends=True)
    reader.feed(b"".join(lines[:3]))
    assert reader.compact is not None
    pcie = lines[2].rstrip(b"\n")[:-1] + b',{"0000:01:00.0":[{"address":"0000:00:01.0",' \
        b'"speed_gts":16.0,"width":16.0}]}]\n'
    assert b'"static"' not in pcie and pcie.startswith(b"[")
    reader.feed(pcie)
    assert reader.stats.garbled == 0 and reader.tick_row is None  # checked, not relayed
    return reader.compact, lines[1]


def test_a_thin_stream_keeps_the_line_and_stays_thin(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a tick with PCIe chains the stream still holds only its check's summary and the
    ``static`` line's bytes (main's held the parsed message, then every checked half)."""
    thin, static = _after_pcie()
    assert thin._gpu_base == [] and thin._static_gpus == [] and thin._thin
    assert isinstance(thin._message, bytes)  # the line, compressed
    assert zlib.decompress(thin._message) == static.rstrip(b"\n")
    monkeypatch.setattr(protocol, "CompactStream", MainsThin)
    mains, _ = _after_pcie()
    assert mains._gpu_base != [] and not mains._thin  # what main kept
