"""Where each host sits: its leaf switch (per HCA) and its rack.

From the inventory's tags (``switch:leaf-3``, ``rack:r12``: every port of the host) and from
``ibnetdiscover`` (``probes.rules.parsers.ibnetdiscover``: each HCA port's own switch, so a
rail-optimised host with eight leaves is mapped rail by rail).  An HCA of the discovery is
matched to a host by its node GUID (the hello's ``node_guid``), else by its node description
``<host> <hca>`` (rdma-ndd's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from probes.config.fleet import HostSpec
from probes.rules.parsers.ibnetdiscover import IbTopology
from probes.wire.samples import Hello

SWITCH_TAG = "switch:"
RACK_TAG = "rack:"


def _tag(spec: HostSpec, prefix: str) -> str | None:
    return next((t[len(prefix):] for t in spec.tags if t.startswith(prefix)
                 and len(t) > len(prefix)), None)


def guid_int(text: str | None) -> int | None:
    """sysfs ``a088:c203:00ad:eab8`` or ``0xa088c20300adeab8`` -> the GUID as a number."""
    if not text:
        return None
    try:
        return int(text.replace(":", "").removeprefix("0x"), 16)
    except ValueError:
        return None


@dataclass(frozen=True)
class FabricMap:
    """Host (and HCA) -> leaf switch; host -> rack."""

    switches: Mapping[tuple[str, str | None], str] = field(default_factory=dict)
    """(host, HCA) -> switch; (host, None) -> the host's switch from its tag."""
    racks: Mapping[str, str] = field(default_factory=dict)

    def switch_of(self, host: str, hca: str | None = None) -> str | None:
        """The switch that ``hca`` of ``host`` plugs into (else the host's tagged one)."""
        return self.switches.get((host, hca)) or self.switches.get((host, None))

    def rack_of(self, host: str) -> str | None:
        return self.racks.get(host)

    def hosts_on(self, switch: str) -> list[str]:
        """Every host with a port on ``switch``, in map order."""
        return list(dict.fromkeys(h for (h, _), s in self.switches.items() if s == switch))


def fabric_map(specs: Iterable[HostSpec], topology: IbTopology | None = None,
               hellos: Mapping[str, Hello | None] | None = None) -> FabricMap:
    """The map from the inventory's tags, the discovered topology and the hosts' hellos."""
    switches: dict[tuple[str, str | None], str] = {}
    racks: dict[str, str] = {}
    names: dict[str, str] = {}
    for spec in specs:
        names[spec.name] = spec.name
        hello = (hellos or {}).get(spec.name)
        if hello is not None:
            names.setdefault(hello.facts.hostname, spec.name)
        if (sw := _tag(spec, SWITCH_TAG)) is not None:
            switches[(spec.name, None)] = sw
        if (rack := _tag(spec, RACK_TAG)) is not None:
            racks[spec.name] = rack
    if topology is None:
        return FabricMap(switches, racks)
    by_guid = topology.by_guid()
    for host, hello in (hellos or {}).items():
        for nic in hello.nics if hello is not None else ():
            for link in by_guid.get(guid_int(nic.node_guid) or -1, ()):
                switches.setdefault((host, nic.name), link.switch)
    for link in topology.links:
        owner = names.get(link.host or "")
        if owner is not None and link.hca is not None:
            switches.setdefault((owner, link.hca), link.switch)
    return FabricMap(switches, racks)
