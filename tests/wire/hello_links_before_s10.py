"""Reference copy (issue 38, session 10): a hello's PCIe links and NIC ports as
``probes.wire.protocol`` decoded them before they were looked up by their typed values
(``_decode_link``, ``_decode_nic_port``).  ``test_hello_links_known.py`` checks the new
decode returns the very objects this one returns."""

from __future__ import annotations

from typing import Any

from probes.wire.decode_fields import _int, _num, _str
from probes.wire.samples import NicPort, PcieLink
from probes.wire.shared import shared


def decode_link_before(d: dict[str, Any]) -> PcieLink:
    return shared(PcieLink(address=_str(d.get("address")), speed_gts=_num(d.get("speed_gts")),
                           width=_int(d.get("width")),
                           max_speed_gts=_num(d.get("max_speed_gts")),
                           max_width=_int(d.get("max_width")),
                           numa_node=_int(d.get("numa_node")),
                           local_cpulist=_str(d.get("local_cpulist"))))


def decode_nic_port_before(p: dict[str, Any]) -> NicPort:
    return shared(NicPort(port=_int(p.get("port")), state=_str(p.get("state")),
                          rate=_str(p.get("rate")), link_layer=_str(p.get("link_layer")),
                          phys_state=_str(p.get("phys_state"))))
