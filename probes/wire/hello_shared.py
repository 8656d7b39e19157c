"""A hello decoded in another process, its facts made this process's shared objects.

A collector decodes each host's hello and sends it to the console pickled (issue 38,
start-up: the console no longer decodes it again).  Unpickled, every part is its own
object, while the console's own decode (``decode_fields._decode_hello``) makes the facts many
hosts send alike one object each (``shared``: ~20 KB of a hello's 24 KB per host at 1024
hosts).  ``reshared`` shares the same parts the decode shares, so a relayed hello holds
what a decoded one holds (``tests/transport/test_relay_hello.py`` checks part by part).

The objects are this process's own (just unpickled, not yet seen by anyone), so their
fields are set in place rather than rebuilt: the dataclasses are frozen only to readers.
"""

from __future__ import annotations

from probes.wire.samples import Hello, Nic, NicPort, PcieLink
from probes.wire.shared import known, remember, shared


def _set(obj: object, name: str, value: object) -> None:
    obj.__dict__[name] = value


def _link(link: PcieLink) -> PcieLink:
    """``shared(link)``, looked up by its values first (``shared.known``): the decode
    (``_decode_link``) fixes each field's type (floats float, counts int), so equal values
    are the same values, but for a float zero (``-0.0 == 0.0``): such a link goes to
    ``shared`` alone."""
    if link.speed_gts == 0.0 or link.max_speed_gts == 0.0:
        return shared(link)
    key = (PcieLink, *link.__dict__.values())
    got = known(key)
    return got if type(got) is PcieLink else remember(key, link)


def _port(port: NicPort) -> NicPort:
    """``shared(port)`` by its values first (an int and texts: no float, no sign)."""
    key = (NicPort, *port.__dict__.values())
    got = known(key)
    return got if type(got) is NicPort else remember(key, port)


def _nic(n: Nic) -> Nic:
    d = n.__dict__
    d["ports"] = shared(tuple(_port(p) for p in n.ports))
    for name in ("name", "kind", "address", "state", "hca_type", "bridges"):
        d[name] = shared(d[name])
    return n


def reshared(hello: Hello) -> Hello:
    """``hello`` (unpickled here) with the parts ``_decode_hello`` shares shared."""
    facts = hello.facts
    for g in facts.gpus:
        _set(g, "name", shared(g.name))
        _set(g, "vbios", shared(g.vbios))
    _set(facts, "probes", tuple(shared(p) for p in facts.probes))
    _set(facts, "software", shared(facts.software))
    _set(facts, "block_devices", tuple(shared(d) for d in facts.block_devices))
    _set(hello, "pcie", {bus: tuple(_link(link) for link in chain)
                         for bus, chain in hello.pcie.items()})
    _set(hello, "nics", tuple(_nic(n) for n in hello.nics))
    if hello.topo_text is not None:
        _set(hello, "topo_text", shared(hello.topo_text))
    return hello
