"""Hosts behind one leaf switch failing together: one ``switch-suspect``, from a real
discovery of a simulated fabric.

Debian's ibsim simulates two leaf switches, four hosts on ``leaf-1`` and two on ``leaf-2``;
``ibnetdiscover`` maps them (two of the four by their node description ``<host> mlx5_0``, two
only by GUID, as the hosts' hellos give it); opensm assigns LIDs.  Symbol errors are set on
the four leaf-1 ports in the simulator and one of their links is taken down; ``perfquery``
reads the counters back, and each host's sysfs tree is written from them, where the agent's
own reader and the console's wire decoder take over.  The console must say one thing:
switch leaf-1, four hosts.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from probes.agent.fabric import FabricReader
from probes.agent.pci import read_nics
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.rules.parsers.ibnetdiscover import parse_ibnetdiscover
from probes.triage import Code, Severity
from probes.wire.protocol import decode_line
from tests.support.ib_sysfs import IbTree
from tests.support.ibsim import ibsim_fabric
from tui.cli import main

LEAF1 = ["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"]
LEAF2 = ["gpu-b01", "gpu-b02"]
ANONYMOUS = {"gpu-a03", "gpu-a04"}
"""Hosts whose HCA reports no host in its node description (no rdma-ndd): found by GUID."""


def _desc(host: str) -> str:
    return f"{host} mlx5_0" if host not in ANONYMOUS else f"MT4129 ConnectX-7 {host[-2:]}"


def net_file() -> str:
    """ibsim's net file (ibnetdiscover's format): two leaves, six single-port HCAs."""
    out = []
    for leaf, hosts in (("leaf-1", LEAF1), ("leaf-2", LEAF2)):
        other = "leaf-2" if leaf == "leaf-1" else "leaf-1"
        out.append(f'Switch\t36 "{leaf}"')
        out += [f'[{i}]\t"{_desc(h)}"[1]' for i, h in enumerate(hosts, 1)]
        out += [f'[33]\t"{other}"[33]', ""]
    for leaf, hosts in (("leaf-1", LEAF1), ("leaf-2", LEAF2)):
        for i, h in enumerate(hosts, 1):
            out += [f'Hca\t1 "{_desc(h)}"', f'[1]\t"{leaf}"[{i}]', ""]
    return "\n".join(out) + "\n"


def _sysfs_guid(guid: int) -> str:
    text = f"{guid:016x}"
    return ":".join(text[i:i + 4] for i in range(0, 16, 4))


def test_four_hosts_on_one_simulated_leaf_are_one_switch_suspect(tmp_path: Path) -> None:
    with ibsim_fabric(tmp_path / "ibsim", net_file()) as fabric:
        text = fabric.run("ibnetdiscover")
        topo = parse_ibnetdiscover(text.splitlines())
        by_desc = {link.ca_desc: link for link in topo.links}
        assert {by_desc[_desc(h)].switch for h in LEAF1} == {"leaf-1"}
        assert {by_desc[_desc(h)].switch for h in LEAF2} == {"leaf-2"}
        lids = {desc: int(m.group(1)) for desc in by_desc if (m := re.search(
            rf'"{re.escape(desc)}"\s+lid (\d+)', text))}
        assert len(lids) == 6 and all(lids.values()), text  # opensm gave every port a LID

        # each host: a sysfs tree whose HCA has the simulated node's GUID
        trees = {}
        for h in LEAF1 + LEAF2:
            tree = IbTree(tmp_path / h, n=1)
            (tree.root / "class" / "infiniband" / "mlx5_0" / "node_guid").write_text(
                _sysfs_guid(by_desc[_desc(h)].ca_guid or 0) + "\n")
            trees[h] = tree
        fleet = FleetState([HostSpec(name=h) for h in LEAF1 + LEAF2])
        fleet.topology = topo
        readers = {h: FabricReader(str(t.root)) for h, t in trees.items()}

        def read_back(ts: float) -> None:
            """perfquery's counters (and a lost link's state) into each host's sysfs, then
            the agent's reader, the wire and the console's fold."""
            for h, tree in trees.items():
                counts = fabric.counters(lids[_desc(h)])
                if counts is None:
                    tree.set_state("mlx5_0", "DOWN", "Polling", 40)
                else:
                    for name, value in counts.items():
                        tree.set_counter("mlx5_0", name, value)
                msg = readers[h].tick(ts)
                if msg is not None:
                    item = decode_line(json.dumps({"type": "fabric", "v": 1, "ts": ts, **msg}))
                    fleet.apply(h, item, time.time())

        for h, tree in trees.items():
            hello = {"type": "hello", "v": 1, "agent": "t", "ts": 1.0,
                     "host": {"hostname": h}, "gpus": [], "nics": read_nics(str(tree.root))}
            fleet.apply(h, decode_line(json.dumps(hello)), time.time())
        read_back(1000.0)
        assert fleet.all_findings() == []

        for h in LEAF1:
            fabric.console(f'PerformanceSet "{_desc(h)}"[1] PortCounters.SymbolErrorCounter=40')
        fabric.console('Unlink "leaf-1"[2]')  # gpu-a02's cable
        for t in range(1, 6):
            read_back(1000.0 + t)

        on_hosts = {h: sorted(str(f.code) for f in fleet.hosts[h].findings()) for h in LEAF1}
        assert on_hosts == {"gpu-a01": ["ib-errors-rising"], "gpu-a02": ["ib-port-down"],
                            "gpu-a03": ["ib-errors-rising"], "gpu-a04": ["ib-errors-rising"]}
        (suspect,) = fleet.all_findings()
        assert suspect.code == Code.SWITCH_SUSPECT and suspect.severity is Severity.CRITICAL
        assert suspect.extra["switch"] == "leaf-1"
        assert sorted(suspect.extra["hosts"]) == LEAF1  # type: ignore[call-overload]
        lead = fleet.diagnosis().first
        assert lead is not None and lead.finding.code == Code.SWITCH_SUSPECT
        assert lead.domain is not None and lead.domain.label == "switch leaf-1"


def test_rigwatch_fabric_prints_the_discovered_map(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``rigwatch fabric --ibnetdiscover FILE``, the file saved from the simulated fabric."""
    with ibsim_fabric(tmp_path / "ibsim", net_file()) as fabric:
        saved = tmp_path / "fabric.txt"
        saved.write_text(fabric.run("ibnetdiscover"))
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("hosts:\n" + "".join(
        f"  - {{name: {h}, address: 127.0.0.1}}\n" for h in LEAF1 + LEAF2)
        + "  - {name: gpu-c01, address: 127.0.0.1, tags: ['switch:leaf-9', 'rack:r7']}\n")
    assert main(["fabric", "--inventory", str(inventory), "--ibnetdiscover", str(saved)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "switch leaf-1: gpu-a01/mlx5_0, gpu-a02/mlx5_0"
    assert out[1] == "switch leaf-2: gpu-b01/mlx5_0, gpu-b02/mlx5_0"
    assert out[2] == "switch leaf-9: gpu-c01" and out[3] == "rack r7: gpu-c01"
    assert sorted(out[4:]) == ["not in the inventory: MT4129 ConnectX-7 03 -> leaf-1[3]",
                               "not in the inventory: MT4129 ConnectX-7 04 -> leaf-1[4]"]


def test_an_unusable_file_is_one_line(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.txt").write_text("not a fabric\n")
    assert main(["fabric", "--ibnetdiscover", str(tmp_path / "junk.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "junk.txt: no HCA-to-switch link found" in err
    assert main(["fabric", "--ibnetdiscover", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read --ibnetdiscover" in capsys.readouterr().err
