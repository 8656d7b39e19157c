"""A hello's PCIe links and NIC ports looked up by their typed values (issue 38, start-up).

``_decode_link`` and ``_decode_nic_port`` used to build each object and hand it to
``shared`` (a key walk over its fields); they now look it up first by a key of the typed
values (``shared.known``), as ``hello_shared`` does for a relayed hello.  The lookup must
return the very object ``shared`` returns: checked against the reference copy
(``hello_links_before_s10``) over random links and ports (values of every type a host could
send: ints, floats, both zeros, bools, strings, None, huge numbers), each decoded both ways
in turn in one process (so both meet the same table); and over the agent simulator's
hellos spoiled at random, decoded whole both ways: every field equal with its type and
sign, every shared part the same object.  Negative control: a lookup that forgets the float
zero's sign hands a ``-0.0`` link the ``0.0`` one.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from probes.wire import decode_fields
from probes.wire import shared as shared_module
from probes.wire.protocol import decode_line
from probes.wire.samples import Hello, PcieLink
from tests.wire.hello_links_before_s10 import decode_link_before, decode_nic_port_before
from tests.wire.test_clean_tree import _spoil
from tests.wire.test_shared_facts import _typed

VALUES: tuple[Any, ...] = (None, 0, 1, 16, -1, 0.0, -0.0, 2.5, 16.0, 8.0, True, False,
                           "16", "", "0000:17:00.0", 10**20, -(10**20), 1e300, [], {})


def _link(rng: random.Random) -> dict[str, Any]:
    keys = ("address", "speed_gts", "width", "max_speed_gts", "max_width", "numa_node",
            "local_cpulist")
    pool = (*VALUES[:8], "0000:17:00.0", "0-15")  # few values: many equal links
    return {k: rng.choice(pool if rng.random() < 0.8 else VALUES) for k in keys
            if rng.random() < 0.95}


def _port(rng: random.Random) -> dict[str, Any]:
    keys = ("port", "state", "rate", "link_layer", "phys_state")
    pool = (1, 2, 1.0, "4: ACTIVE", "400 Gb/sec", "InfiniBand", None, True)
    return {k: rng.choice(pool if rng.random() < 0.8 else VALUES) for k in keys
            if rng.random() < 0.95}


def _same(new: Any, old: Any) -> bool:
    return new is old and _typed(new) == _typed(old)


def test_links_and_ports_are_the_objects_shared_returns() -> None:
    rng = random.Random(38)
    zero_pairs = 0
    for _ in range(6000):
        d = _link(rng)
        old = decode_link_before(d)
        assert _same(decode_fields._decode_link(d), old), d
        zero_pairs += old.speed_gts == 0.0 or old.max_speed_gts == 0.0
        p = _port(rng)
        assert _same(decode_fields._decode_nic_port(p), decode_nic_port_before(p)), p
    assert zero_pairs > 500  # the float zeros' path was taken, both signs


def test_the_lookup_skips_the_walk_for_a_link_met_before() -> None:
    d = {"address": "0000:99:00.0", "speed_gts": 32.0, "width": 16, "max_speed_gts": 32.0,
         "max_width": 16, "numa_node": 1, "local_cpulist": "0-31"}
    first = decode_fields._decode_link(d)
    calls = []
    real = shared_module.shared

    def counted(obj: Any) -> Any:
        calls.append(obj)
        return real(obj)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(decode_fields, "shared", counted)
        mp.setattr(shared_module, "shared", counted)
        assert decode_fields._decode_link(dict(d)) is first
    assert calls == []


def _hello(line: bytes) -> Hello | None:
    try:
        msg = decode_line(line)
    except Exception:
        return None
    return msg if isinstance(msg, Hello) else None


def test_spoiled_hellos_decode_to_the_same_objects() -> None:
    import json

    from tests.bench.bench_ingest import template

    rng = random.Random(10)
    bases = [json.loads(template(k, 2)[1][0]) for k in range(6)]
    decoded = 0
    for i in range(300):
        obj = bases[i % len(bases)]
        if i % 3:
            obj = _spoil(obj, rng)
        line = json.dumps(obj, ensure_ascii=rng.random() < 0.7).encode(
            "utf-8", "surrogatepass")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(decode_fields, "_decode_link", decode_link_before)
            mp.setattr(decode_fields, "_decode_nic_port", decode_nic_port_before)
            mp.setattr(decode_fields, "_text_of", lambda value: None)  # s14's cache: off
            old = _hello(line)
        new = _hello(line)
        assert (old is None) == (new is None)
        if new is None or old is None:
            continue
        decoded += 1
        assert _typed(new) == _typed(old)
        for bus, chain in new.pcie.items():
            assert all(a is b for a, b in zip(chain, old.pcie[bus], strict=True))
        for a, b in zip(new.nics, old.nics, strict=True):
            assert a.ports is b.ports
    assert decoded > 200


def test_negative_control_a_key_without_the_zeros_sign_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def signless(d: dict[str, Any]) -> PcieLink:
        df = decode_fields
        link = PcieLink(df._str(d.get("address")), df._num(d.get("speed_gts")),
                        df._int(d.get("width")), df._num(d.get("max_speed_gts")),
                        df._int(d.get("max_width")), df._int(d.get("numa_node")),
                        df._str(d.get("local_cpulist")))
        key = (PcieLink, *link.__dict__.values())
        got = shared_module.known(key)
        return got if type(got) is PcieLink else shared_module.remember(key, link)

    monkeypatch.setattr(decode_fields, "_decode_link", signless)
    with pytest.raises(AssertionError):
        test_links_and_ports_are_the_objects_shared_returns()



def test_negative_control_unshared_links_fail_the_hello_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = decode_fields._decode_link
    monkeypatch.setattr(decode_fields, "_decode_link",
                        lambda d: PcieLink(*real(d).__dict__.values()))
    # the chains decoded once per text (session 14) would answer from links shared before
    monkeypatch.setattr(decode_fields, "_text_of", lambda value: None)
    with pytest.raises(AssertionError):
        test_spoiled_hellos_decode_to_the_same_objects()
