"""``ibnetdiscover`` output (infiniband-diags): which switch port each HCA port is cabled to.

A record opens with ``switchguid=0x…`` or ``caguid=0x…`` and a header, ``Switch 36
"S-0000000000200001"  # "leaf-2" …`` or ``Ca 1 "H-0c42a10300a1b2c4"  # "gpu-a01 mlx5_0"``;
its port lines name the peer: on a switch ``[1] "H-…"[1](portguid)  # "gpu-a01 mlx5_0" lid 7
4xNDR``, on a CA ``[1](portguid) "S-…"[4]  # lid 2 lmc 0 "leaf-1" lid 1 4xNDR``.  Either side
alone places the CA, so a truncated dump still maps what it shows.  The node description of
an HCA is ``<host> <hca>`` where rdma-ndd sets it (its default ``%h %d``); the node GUID is
what sysfs calls ``node_guid``.  Checked against Debian's ibsim + ibnetdiscover 1.6 output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.wire.sanitize import clean_log_line

_RECORD_GUID = re.compile(r"^\s*(?P<kind>switchguid|caguid|rtguid)=0x(?P<guid>[0-9a-fA-F]+)")
_HEADER = re.compile(r'^\s*(?P<type>Switch|Ca|Rt)\s+\d+\s+"(?P<id>[^"]+)"'
                     r'(?:\s*#\s*"(?P<desc>[^"]*)")?')
_SWITCH_PORT = re.compile(r'^\s*\[(?P<port>\d+)\]\s+"(?P<peer>[^"]+)"\[(?P<pport>\d+)\]'
                          r'(?:\((?P<pguid>[0-9a-fA-F]+)\))?\s*(?:#\s*"(?P<desc>[^"]*)"'
                          r'(?P<tail>.*))?$')
_CA_PORT = re.compile(r'^\s*\[(?P<port>\d+)\](?:\((?P<guid>[0-9a-fA-F]+)\))?\s+"(?P<peer>[^"]+)"'
                      r'\[(?P<pport>\d+)\](?:\s*#(?P<tail>.*))?$')
_SPEED = re.compile(r"\b(?P<width>\d+)x(?P<speed>[A-Z]{3}\d*|\d+(?:\.\d+)?G)\b")
_QUOTED = re.compile(r'"([^"]*)"')


@dataclass(frozen=True)
class CaLink:
    """One HCA port and the switch port it is cabled to."""

    ca_guid: int | None
    ca_desc: str | None
    ca_port: int
    switch: str
    """The switch's node description (``leaf-1``), else its id (``S-…``)."""
    switch_port: int
    speed: str | None = None
    """``4xNDR`` as printed."""

    @property
    def host(self) -> str | None:
        """The host in an rdma-ndd description (``gpu-a01 mlx5_0`` -> ``gpu-a01``)."""
        return self.ca_desc.split()[0] if self.ca_desc and self.ca_desc.split() else None

    @property
    def hca(self) -> str | None:
        """The HCA in such a description (``mlx5_0``), when it names one."""
        words = (self.ca_desc or "").split()
        return words[1] if len(words) > 1 else None


@dataclass
class IbTopology:
    """Switches and where every HCA port plugs in."""

    switches: dict[str, str] = field(default_factory=dict)
    """Switch id (``S-…``) -> its description."""
    links: list[CaLink] = field(default_factory=list)

    def by_guid(self) -> dict[int, list[CaLink]]:
        out: dict[int, list[CaLink]] = {}
        for link in self.links:
            if link.ca_guid is not None:
                out.setdefault(link.ca_guid, []).append(link)
        return out


def _guid_of(node_id: str) -> int | None:
    """``H-0c42a10300a1b2c4`` -> the node GUID."""
    m = re.match(r"^[HSR]-([0-9a-fA-F]{1,16})$", node_id)
    return int(m.group(1), 16) if m else None


def parse_ibnetdiscover(lines: list[str]) -> IbTopology:
    """The topology in ``ibnetdiscover`` text (a file, or what it printed on one host)."""
    topo = IbTopology()
    seen: set[tuple[int | None, str | None, int]] = set()
    pending: list[tuple[str, str | None, int, str, int, str | None]] = []
    kind = node = desc = None
    for raw in lines:
        line = clean_log_line(raw)  # node descriptions are set on the hosts: host text
        if _RECORD_GUID.match(line):
            kind = node = desc = None
            continue
        m = _HEADER.match(line)
        if m:
            kind, node, desc = m.group("type"), m.group("id"), m.group("desc")
            if kind == "Switch":
                topo.switches[node] = desc or node
            continue
        if kind == "Switch" and node is not None:
            p = _SWITCH_PORT.match(line)
            if p and p.group("peer").startswith("H-"):
                rate = _SPEED.search(p.group("tail") or "")
                pending.append((p.group("peer"), p.group("desc"), int(p.group("pport")),
                                node, int(p.group("port")), rate.group() if rate else None))
        elif kind == "Ca" and node is not None:
            p = _CA_PORT.match(line)
            if p and p.group("peer").startswith("S-"):
                tail = p.group("tail") or ""
                rate = _SPEED.search(tail)
                quoted = _QUOTED.findall(tail)
                pending.append((node, desc, int(p.group("port")), p.group("peer"),
                                int(p.group("pport")), rate.group() if rate else None))
                if quoted:
                    topo.switches.setdefault(p.group("peer"), quoted[-1])
    for ca, ca_desc, ca_port, sw, sw_port, speed in pending:
        key = (_guid_of(ca), ca_desc, ca_port)
        if key in seen:
            continue
        seen.add(key)
        topo.links.append(CaLink(_guid_of(ca), ca_desc, ca_port, topo.switches.get(sw, sw),
                                 sw_port, speed))
    return topo
