"""Every v2 stream of a fleet holds one ``columns`` declaration, not its own (issue 38, memory).

``protocol._columns`` hands equal declarations (the same keys, names and JSON types, in
order: ``repr``) out as one parsed object, so the column names a ``CompactStream`` keeps
are the same strings for every host: ~4 KB a host, in the console and in a collector.  Held
to streams built from a freshly parsed declaration: the same columns, the same ``known``,
the same samples; a declaration that differs in a name, an order or a type is not taken for
another.  Negative control: a key that only counts characters is caught.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from probes.wire import protocol
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.bench.bench_ingest import template


def _lines() -> tuple[dict[str, Any], list[bytes]]:
    (_, _), (first, ticks) = template(3, 4)
    lines = [ln for chunk in (first, *ticks) for ln in chunk.splitlines() if ln]
    return json.loads(lines[0]), lines[1:]


def _read(hello: dict[str, Any], rest: list[bytes]) -> tuple[MessageReader, list[HostSample]]:
    reader = MessageReader()
    out = reader.feed(json.dumps(hello).encode() + b"\n")
    for ln in rest:
        out += reader.feed(ln + b"\n")
    return reader, [m for m in out if isinstance(m, HostSample)]


def _variants(hello: dict[str, Any]) -> list[dict[str, Any]]:
    """The declaration, and ones that differ in a name, an order, a type or a key."""
    cols = hello["columns"]
    out = []
    for change in ("name", "order", "type", "key"):
        c = json.loads(json.dumps(cols))
        if change == "name":
            c["gpu"][0] = c["gpu"][0] + "x"
        elif change == "order":
            c["gpu"][0], c["gpu"][1] = c["gpu"][1], c["gpu"][0]
        elif change == "type":  # a number where a name was: the stream drops it
            c["disk"][-1] = 1
        else:
            c["extra"] = []
        out.append({**hello, "columns": c})
    return out


def _differences() -> int:
    hello, rest = _lines()
    differ = 0
    for h in [hello, *_variants(hello)]:
        mine = json.loads(json.dumps(h))
        a, samples_a = _read(h, rest)
        kept, protocol._columns_seen = protocol._columns_seen, {}
        try:  # the declaration parsed afresh, as before
            b, samples_b = _read(mine, rest)
        finally:
            protocol._columns_seen = kept
        assert a.compact is not None and b.compact is not None
        differ += a.compact.cols != b.compact.cols or a.compact.known != b.compact.known
        differ += repr(samples_a) != repr(samples_b)
    return differ


def test_streams_read_as_with_their_own_declaration() -> None:
    assert _differences() == 0


def test_hosts_of_one_declaration_hold_the_same_names() -> None:
    hello, rest = _lines()
    one, _ = _read(hello, rest)
    two, _ = _read(json.loads(json.dumps(hello)), rest)
    assert one.compact is not None and two.compact is not None
    assert one.compact.known and one.compact.cols == two.compact.cols
    for key, names in one.compact.cols.items():
        assert all(x is y for x, y in zip(names, two.compact.cols[key], strict=True)), key
    for other in _variants(hello):
        three, _ = _read(other, rest)
        assert three.compact is not None and three.compact.cols != one.compact.cols


def test_the_table_stays_bounded() -> None:
    hello, _ = _lines()
    for n in range(protocol.COLUMNS_SHARED_MAX * 2 + 3):
        _read({**hello, "columns": {**hello["columns"], "extra": [str(n)]}}, [])
        assert len(protocol._columns_seen) <= protocol.COLUMNS_SHARED_MAX


def test_negative_control_a_key_that_counts_characters_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two names swapped make as many characters: such a key takes one for the other."""
    monkeypatch.setattr(protocol, "repr", lambda v: str(len(str(v))), raising=False)
    protocol._columns_seen.clear()
    assert _differences() > 0
