"""``--ibnetdiscover FILE`` (the console, ``snapshot``) and ``rigwatch fabric``: which leaf
switch each host's HCAs plug into, from ``ibnetdiscover`` output saved on one host.

``ibnetdiscover`` needs the fabric's management datagrams (``/dev/infiniband/umad*``, root on
most hosts), which the read-only agent does not ask for: run it once on any host of the
fabric (``ssh gpu001 sudo ibnetdiscover > fabric.txt``) and hand the file to rigwatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field

from probes.analysis.fabric_map import fabric_map
from probes.config.fleet import HostSpec
from probes.errors import ConfigError
from probes.rules.parsers.ibnetdiscover import IbTopology, parse_ibnetdiscover

MAX_BYTES = 64 * 2**20
"""A fabric of tens of thousands of ports prints a few MiB; more is not ibnetdiscover's."""


def load_topology(path: str | None) -> IbTopology | None:
    """The topology in ``path`` (None: none given).

    Raises:
        ConfigError: the file cannot be read or holds no ibnetdiscover records.
    """
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"rigwatch: cannot read --ibnetdiscover {path}: "
                          f"{exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"rigwatch: --ibnetdiscover {path}: larger than "
                          f"{MAX_BYTES // 2**20} MiB, not ibnetdiscover output")
    topo = parse_ibnetdiscover(raw.decode("utf-8", "replace").splitlines())
    if not topo.links:
        raise ConfigError(f"rigwatch: --ibnetdiscover {path}: no HCA-to-switch link found "
                          "(expected ibnetdiscover's 'Switch' and 'Ca' records)")
    return topo


def add_ibnetdiscover_arg(parser: argparse.ArgumentParser, sub: bool = False) -> None:
    parser.add_argument("--ibnetdiscover", metavar="FILE",
                        default=argparse.SUPPRESS if sub else None,
                        help="ibnetdiscover output saved on one host: each HCA's leaf switch, "
                             "so hosts failing behind one switch are one switch-suspect")


def add_fabric_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("fabric", help="which leaf switch each host's HCAs plug into "
                         "(from --ibnetdiscover FILE and the inventory's switch:/rack: tags)")
    cmd.add_argument("--json", action="store_true", help="print JSON")
    cmd.add_argument("--inventory", metavar="FILE", default=argparse.SUPPRESS,
                     help="hosts (YAML): names the discovery's node descriptions are matched to")
    add_ibnetdiscover_arg(cmd, sub=True)


@dataclass(frozen=True)
class FabricReport:
    """What ``rigwatch fabric`` prints."""

    switches: dict[str, list[str]] = field(default_factory=dict)
    """Switch -> ``host/hca`` (or ``host`` from a tag) on it."""
    racks: dict[str, list[str]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    """HCAs of the discovery that no host of the inventory claims."""


def fabric_report(specs: list[HostSpec], topo: IbTopology | None) -> FabricReport:
    """Switches with the hosts (and HCAs) on each; racks; HCAs of the discovery no host
    claims (their node description names no host of the inventory)."""
    where = fabric_map(specs, topo)
    switches: dict[str, list[str]] = {}
    for (host, hca), switch in where.switches.items():
        switches.setdefault(switch, []).append(f"{host}/{hca}" if hca else host)
    racks: dict[str, list[str]] = {}
    for host, rack in where.racks.items():
        racks.setdefault(rack, []).append(host)
    claimed = set(where.switches)
    loose = [f"{link.ca_desc or hex(link.ca_guid or 0)} -> {link.switch}[{link.switch_port}]"
             for link in (topo.links if topo else []) if (link.host, link.hca) not in claimed]
    return FabricReport({k: sorted(v) for k, v in sorted(switches.items())},
                        {k: sorted(v) for k, v in sorted(racks.items())}, loose)


def run_fabric(args: argparse.Namespace, specs: list[HostSpec]) -> int:
    """``rigwatch fabric``: print the map; exit 1 when nothing maps a host to a switch.
    Without an inventory the hosts are those the node descriptions name."""
    topo = load_topology(getattr(args, "ibnetdiscover", None))
    if not specs and topo is not None:
        specs = [HostSpec(name=h) for h in dict.fromkeys(
            link.host for link in topo.links if link.host)]
    report = fabric_report(specs, topo)
    if args.json:
        json.dump(asdict(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for switch, members in report.switches.items():
            print(f"switch {switch}: {', '.join(members)}")
        for rack, members in report.racks.items():
            print(f"rack {rack}: {', '.join(members)}")
        for line in report.unmatched:
            print(f"not in the inventory: {line}")
    return 0 if report.switches else 1


def inventory_or_none(args: argparse.Namespace) -> list[HostSpec]:
    """The inventory's hosts, or none when there is no inventory (names from the file)."""
    from probes.config.inventory import choose_inventory_path, load_inventory

    path = choose_inventory_path(getattr(args, "inventory", None))
    return list(load_inventory(path).hosts) if path is not None else []
