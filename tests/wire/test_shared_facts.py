"""Facts many hosts send alike are one object (issue 38, memory): ``probes.wire.shared``.

Hellos from the agent's own simulator (``tests.bench.bench_ingest.template``: hosts of one
model, as a fleet is), decoded with the sharing and without it, must read the same, value
and type, field by field; equal facts of two hosts are then one object, and a value of
another type or sign is never taken for an equal one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

import msgspec
import pytest

from probes.wire import decode_fields, shared, structs
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello
from tests.bench.bench_ingest import template


def _hello(line: bytes) -> Hello:
    (hello,) = [m for m in MessageReader().feed(line) if isinstance(m, Hello)]
    return hello


def _typed(v: Any) -> Any:
    """A value with every leaf's type beside it: ``==`` on dataclasses takes 16 for 16.0."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, [(f.name, _typed(getattr(v, f.name)))
                                   for f in dataclasses.fields(v)])
    if isinstance(v, dict):
        return ("dict", [(k, _typed(x)) for k, x in v.items()])
    if isinstance(v, list | tuple):
        return (type(v).__name__, [_typed(x) for x in v])
    if isinstance(v, float):
        return ("float", v.hex())
    return (type(v).__name__, v)


@pytest.fixture(scope="module")
def hellos() -> list[bytes]:
    return [template(k, 2)[1][0] for k in range(4)]


def test_hellos_read_the_same_with_sharing_and_share_their_facts(
        hellos: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    with_sharing = [_hello(h) for h in hellos]
    monkeypatch.setattr(decode_fields, "shared", lambda obj: obj)
    # links and ports are looked up by their values first (session 10): no sharing there too
    monkeypatch.setattr(decode_fields, "known", lambda key: None)
    monkeypatch.setattr(decode_fields, "remember", lambda key, obj: obj)
    # nor the parts decoded once per text (session 14), which hold shared objects
    monkeypatch.setattr(decode_fields, "_text_of", lambda value: None)
    without = [_hello(h) for h in hellos]
    for a, b in zip(with_sharing, without, strict=True):
        assert _typed(a) == _typed(b)
    first, second = with_sharing[0], with_sharing[1]
    assert first.facts.hostname != second.facts.hostname  # two hosts
    links_a = [link for chain in first.pcie.values() for link in chain]
    links_b = [link for chain in second.pcie.values() for link in chain]
    assert links_a and len(links_a) == len(links_b)
    assert all(x is y for x, y in zip(links_a, links_b, strict=True))
    assert first.topo_text is not None and first.topo_text is second.topo_text
    assert first.facts.software is second.facts.software
    assert first.nics and len(first.nics) == len(second.nics)
    for na, nb in zip(first.nics, second.nics, strict=True):  # a NIC's model facts, not its GUID
        assert na.name is nb.name and na.address is nb.address and na.bridges is nb.bridges
        assert na.ports is nb.ports and na.hca_type is nb.hca_type
    unshared = [link for chain in without[1].pcie.values() for link in chain]
    assert not any(x is y for x, y in zip(links_a, unshared, strict=True))


def _with_speed(line: bytes, speed: object) -> bytes:
    obj = json.loads(line)
    for chain in obj["pcie"].values():
        for link in chain:
            link["speed_gts"] = speed
    return json.dumps(obj).encode() + b"\n"


def test_a_value_of_another_sign_or_type_is_not_shared(hellos: list[bytes]) -> None:
    """The decoder makes every speed a float, so the sign is what could be lost here;
    the type is held by the key too (``shared`` is not only for floats)."""
    a = _hello(_with_speed(hellos[0], 0.0))
    b = _hello(_with_speed(hellos[0], -0.0))
    for la, lb in zip([x for c in a.pcie.values() for x in c],
                      [x for c in b.pcie.values() for x in c], strict=True):
        assert la is not lb
        assert _typed(la.speed_gts) == _typed(0.0) and _typed(lb.speed_gts) == _typed(-0.0)
    assert shared.shared((1, "x")) is not shared.shared((1.0, "x"))
    assert type(shared.shared((True,))[0]) is bool and shared.shared((1,))[0] == 1


def test_negative_control_a_key_without_sign_would_share_0_with_minus_0(
        hellos: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "_table", {})
    monkeypatch.setattr(shared, "_part", lambda v: v)
    # a table swapped in place is no new start the parts' cache (session 14) sees: off
    monkeypatch.setattr(decode_fields, "_text_of", lambda value: None)
    _hello(_with_speed(hellos[0], 0.0))
    b = _hello(_with_speed(hellos[0], -0.0))
    lb = next(x for c in b.pcie.values() for x in c)
    assert _typed(lb.speed_gts) == _typed(0.0)  # the -0.0 host got the other's link: wrong


def test_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "SHARED_MAX", 100)
    for i in range(1000):
        assert shared.shared(f"text {i}") == f"text {i}"
        assert len(shared._table) <= 100
    assert shared.shared({"a": 1}) == {"a": 1}  # unhashable: itself


def _random_chains(rng: random.Random) -> dict[str, Any]:
    """Chains of links drawn from few values (so links repeat), zeros of both signs."""
    def link() -> dict[str, Any]:
        return {"address": rng.choice(("0000:17:00.0", "0000:18:00.0", None)),
                "speed_gts": rng.choice((32.0, 16.0, 2.5, 0.0, -0.0, 8, None)),
                "width": rng.choice((16, 8, 0, None)),
                "max_speed_gts": rng.choice((32.0, 0.0, -0.0, 16, None)),
                "max_width": rng.choice((16, None)), "numa_node": rng.choice((0, 1, -1, None)),
                "local_cpulist": rng.choice(("0-55,112-167", "", None))}
    return {f"0000:{b:02x}:00.0": [link() for _ in range(rng.randint(0, 4))]
            for b in rng.sample(range(256), rng.randint(0, 8))}


def _chain_mismatches(seed: int) -> int:
    """Ticks of random chains whose typed links differ from v1's checked decoder's, by
    value, type or sign, or are not its shared objects."""
    decode = msgspec.json.Decoder(structs.Chains).decode
    rng = random.Random(seed)
    bad = 0
    for _ in range(300):
        raw = json.dumps(_random_chains(rng)).encode()
        typed = structs.chains(decode(raw))
        checked = decode_fields._decode_chains(json.loads(raw))
        bad += _typed(typed) != _typed(checked) or not all(
            x is y for bus in typed for x, y in zip(typed[bus], checked[bus], strict=True))
    return bad


def test_typed_chains_are_the_checked_decoders_links_and_share_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick's chains typed (``structs.chains``, its memo by value) read as v1's checked
    decoder reads them, value, type and sign, the links its shared objects.  Negative
    controls: a memo keyed too loosely (the address alone), and a link of -0.0 after one
    of 0.0 (the memo's one blind spot, which goes to ``shared``)."""
    assert _chain_mismatches(38) == 0
    decode = msgspec.json.Decoder(structs.Chains).decode
    monkeypatch.setattr(shared, "_known", {})
    monkeypatch.setattr(shared, "_table", {})
    structs.chains(decode(b'{"a":[{"address":"x","speed_gts":0.0}]}'))
    got = structs.chains(decode(b'{"a":[{"address":"x","speed_gts":-0.0}]}'))["a"][0]
    assert got.speed_gts is not None and math.copysign(1.0, got.speed_gts) == -1.0
    monkeypatch.setattr(structs, "astuple", lambda d: (d.address,))
    monkeypatch.setattr(shared, "_known", {})
    assert _chain_mismatches(39) > 50


def test_what_is_remembered_is_bounded_and_goes_with_the_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "SHARED_MAX", 10)
    monkeypatch.setattr(shared, "_known", {})
    monkeypatch.setattr(shared, "_table", {})
    decode = msgspec.json.Decoder(structs.Chains).decode
    for k in range(25):
        structs.chains(decode(b'{"a":[{"address":"%d","speed_gts":1.0}]}' % k))
        assert len(shared._known) <= 10
    for k in range(25):
        shared.shared(f"text {k}")  # the table fills and starts again: so does the memo
    assert shared._known == {}
