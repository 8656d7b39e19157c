"""A hello's PCIe chains, NICs and GPUs decoded once per text (issue 38, start-up, s14).

``_decode_chains``, ``_decode_nic`` and ``_decode_gpu_info`` now keep what they decoded
under the value's orjson text (a NIC's without its ``node_guid``, a GPU's without its
``uuid`` and ``serial``: each host's own) while ``shared``'s
table lasts, and hand the next equal text a copy.  Checked against the reference copy
(``decode_fields_before_s14``) over the agent simulator's hellos with their chains, NICs
and GPUs spoiled at random (every type a host could send: ints, floats, both zeros, NaN, ±Inf,
huge ints, bools, lone surrogates, missing keys, other key orders), each decoded the new
way twice (the second from the cache) and the old way once, in one process (one table):
every field equal with its type and sign, every shared part the same object; and again
with a table small enough to start again every few hellos.  Negative controls: a text key
that forgets the strings' quotes, and a cache that ignores a new table, both fail.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from probes.wire import decode_fields
from probes.wire import shared as shared_module
from probes.wire.samples import Hello
from tests.wire import decode_fields_before_s14 as before
from tests.wire.test_clean_tree import _spoil
from tests.wire.test_shared_facts import _typed

VALUES: tuple[Any, ...] = (None, 0, 1, 16, -1, 0.0, -0.0, 2.5, 16.0, True, False, "16", "",
                           "0000:17:00.0", 10**20, 2**70, 1e300, float("nan"), float("inf"),
                           "\ud800", [], {}, ["a", 1], {"x": 1})


def _bases() -> list[dict[str, Any]]:
    from tests.bench.bench_ingest import template

    return [orjson.loads(template(k, 1)[1][0]) for k in range(6)]


def _spoil_parts(obj: dict[str, Any], rng: random.Random, host: int,
                 changes: bool = True) -> dict[str, Any]:
    """``obj`` with its own GUIDs, and (often) a chain or a NIC changed somewhere."""
    obj = dict(obj)
    nics = [dict(n) if isinstance(n, dict) else n for n in obj.get("nics") or []]
    for n in nics:
        if isinstance(n, dict) and rng.random() < 0.8:
            n["node_guid"] = rng.choice((f"a088:c203:{host:04x}:eab8", None, 7, "x"))
    gpus = [dict(g) if isinstance(g, dict) else g for g in obj.get("gpus") or []]
    for g in gpus:
        if isinstance(g, dict) and rng.random() < 0.8:
            g["uuid"] = rng.choice((f"GPU-{host:08x}-{g.get('index')}", None, 5, ""))
            g["serial"] = rng.choice((f"{host:013d}", None, 1.5))
    pcie = obj.get("pcie")
    pcie = {b: [dict(d) if isinstance(d, dict) else d for d in c] if isinstance(c, list) else c
            for b, c in pcie.items()} if isinstance(pcie, dict) else pcie
    for _ in range(rng.choice((0, 0, 1, 3)) if changes else 0):
        what = rng.random()
        if what < 0.4 and isinstance(pcie, dict) and pcie:
            chain = pcie[rng.choice(list(pcie))]
            if isinstance(chain, list) and chain and isinstance(chain[0], dict):
                link = chain[rng.randrange(len(chain))]
                link[rng.choice([*link, "other"])] = rng.choice(VALUES)
            else:
                pcie[rng.choice(list(pcie))] = rng.choice(VALUES)
        elif what < 0.6 and nics:
            n = nics[rng.randrange(len(nics))]
            if isinstance(n, dict):
                keys = [*n, "ports", "bridges", "extra"]
                n[rng.choice(keys)] = rng.choice((*VALUES, [{"port": 1.0}], ["b", 3]))
                if rng.random() < 0.2:  # the same fields in another order
                    items = list(n.items())
                    rng.shuffle(items)
                    n.clear()
                    n.update(items)
        elif what < 0.8 and gpus:
            g = gpus[rng.randrange(len(gpus))]
            if isinstance(g, dict):
                g[rng.choice([*g, "index", "extra"])] = rng.choice(VALUES)
                if rng.random() < 0.2:
                    items = list(g.items())
                    rng.shuffle(items)
                    g.clear()
                    g.update(items)
            else:
                gpus[gpus.index(g)] = rng.choice(VALUES)
        elif what < 0.9:
            pcie = rng.choice(VALUES)
        else:
            rng.choice((nics, gpus)).append(rng.choice(VALUES))
    obj["nics"], obj["pcie"], obj["gpus"] = nics, pcie, gpus
    return obj


def _decode(f: Any, obj: dict[str, Any]) -> Hello | None:
    try:
        return f(obj)
    except (ValueError, TypeError, KeyError):
        return None


def _check_same(new: Hello | None, old: Hello | None, objects: bool = True) -> None:
    assert (new is None) == (old is None)
    if new is None or old is None:
        return
    assert _typed(new) == _typed(old)
    if not objects:
        return
    for bus, chain in new.pcie.items():
        assert all(a is b for a, b in zip(chain, old.pcie[bus], strict=True))
    assert new.pcie is not old.pcie
    for a, b in zip(new.nics, old.nics, strict=True):
        assert a is not b
        for name in ("name", "kind", "address", "state", "ports", "hca_type", "bridges"):
            assert getattr(a, name) is getattr(b, name), name
    for x, y in zip(new.facts.gpus, old.facts.gpus, strict=True):
        assert x is not y and x.name is y.name and x.vbios is y.vbios


def test_hellos_decode_as_before_and_share_the_same_objects() -> None:
    rng = random.Random(14)
    bases = _bases()
    decoded = hit = 0
    for i in range(1500):
        obj = bases[i % len(bases)]
        if i % 7 == 3:
            obj = _spoil(obj, rng)
        obj = _spoil_parts(obj, rng, i)
        first = _decode(decode_fields._decode_hello, obj)
        again = _decode(decode_fields._decode_hello, obj)
        old = _decode(before._decode_hello, obj)
        _check_same(first, old)
        _check_same(again, old)
        decoded += old is not None
        hit += again is not None and first is not None and bool(again.nics) and \
            again.nics[0] is not first.nics[0]
    assert decoded > 1000 and hit > 1000


def test_the_cache_is_taken_for_a_model_met_before(monkeypatch: pytest.MonkeyPatch) -> None:
    bases = _bases()[:2]
    calls: list[str] = []
    chains, nic = decode_fields._decode_chains_now, decode_fields._decode_nic_now

    def counted_chains(v: Any) -> Any:
        calls.append("pcie")
        return chains(v)

    def counted_nic(n: Any) -> Any:
        calls.append("nic")
        return nic(n)

    def counted_gpu(g: Any, idx: int) -> Any:
        calls.append("gpu")
        return gpu(g, idx)

    gpu = decode_fields._decode_gpu_info_now
    monkeypatch.setattr(decode_fields, "_decode_chains_now", counted_chains)
    monkeypatch.setattr(decode_fields, "_decode_nic_now", counted_nic)
    monkeypatch.setattr(decode_fields, "_decode_gpu_info_now", counted_gpu)
    rng = random.Random(1)
    hellos = [decode_fields._decode_hello(_spoil_parts(bases[i % 2], rng, i, changes=False))
              for i in range(64)]
    assert all(h.nics for h in hellos)
    assert len({h.nics[0].node_guid for h in hellos}) > 3  # each host its own GUID...
    assert len({h.facts.gpus[0].uuid for h in hellos}) > 3
    assert calls.count("pcie") <= 2  # ...and each model decoded once
    assert calls.count("nic") <= 2 * len(hellos[0].nics)
    assert calls.count("gpu") <= 2 * len(hellos[0].facts.gpus)


def test_a_new_table_is_not_answered_from_the_old_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a table of a few dozen objects ``shared`` starts again every few hellos; a
    hello whose two decodes ran in one table holds that table's objects."""
    monkeypatch.setattr(shared_module, "SHARED_MAX", 40)
    rng = random.Random(3)
    bases = _bases()
    compared, first_epoch = 0, shared_module.epoch()
    for i in range(400):
        obj = _spoil_parts(bases[i % len(bases)], rng, i)
        start = shared_module.epoch()
        new = _decode(decode_fields._decode_hello, obj)
        old = _decode(before._decode_hello, obj)
        same_table = shared_module.epoch() == start
        _check_same(new, old, objects=same_table)
        compared += same_table and new is not None
    assert compared > 30
    assert shared_module.epoch() - first_epoch > 20


def test_the_cache_holds_no_more_than_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts whose chains all differ: the cache starts again at its bound, and decodes as
    before across each new start."""
    monkeypatch.setattr(decode_fields, "PARTS_MAX_BYTES", 20_000)
    rng = random.Random(5)
    bases = _bases()
    most = 0
    for i in range(300):
        obj = _spoil_parts(bases[i % len(bases)], rng, i, changes=False)
        if isinstance(obj.get("pcie"), dict) and obj["pcie"]:
            bus = next(iter(obj["pcie"]))
            obj["pcie"] = {**obj["pcie"], bus: [{"address": f"0000:{i:04x}", "width": 16}]}
        _check_same(_decode(decode_fields._decode_hello, obj),
                    _decode(before._decode_hello, obj))
        held = sum(map(len, decode_fields._parts))
        assert held == decode_fields._parts_bytes[0] <= 20_000
        most = max(most, held)
    assert most > 15_000


def test_negative_control_a_key_without_quotes_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = decode_fields._text_of

    def lossy(value: Any) -> bytes | None:
        text = real(value)
        return None if text is None else text.replace(b'"', b"")

    monkeypatch.setattr(decode_fields, "_text_of", lossy)
    with pytest.raises(AssertionError):
        test_hellos_decode_as_before_and_share_the_same_objects()


def test_negative_control_a_cache_blind_to_a_new_table_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_fields, "epoch", lambda: 0)
    with pytest.raises(AssertionError):
        test_a_new_table_is_not_answered_from_the_old_one(monkeypatch)
