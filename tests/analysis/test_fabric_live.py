"""The fabric in the console: the agent's ``fabric`` messages folded as a live session folds
them, judged into port, error and NVLink findings, and hosts of one switch or rack grouped.

The host is the real agent on a sysfs fixture tree (``tests/support/ib_sysfs.py``) with the
NVML stand-in, read through the console's own wire reader (protocol v2, as it ships).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from probes.agent.fabric import FabricReader
from probes.analysis.fabric import FabricTracker, beside, fabric_findings
from probes.analysis.fabric_groups import grouped
from probes.analysis.fabric_map import fabric_map
from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.transport.bootstrap import agent_source
from probes.triage import Code, Severity, Step
from probes.wire.protocol import MessageReader, decode_line
from probes.wire.samples import FabricSample, Hello, HostSample, IbPortSample, Nic, NvLinkSample
from tests.conftest import REPO
from tests.support.ib_sysfs import IbTree

FAKE_GPUS = [f"0000:{0x18 + i:02x}:00.0" for i in range(4)]
"""The NVML stand-in's four GPUs."""


def _agent_env(flags: str = "nvlinkok") -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "tests" / "data" / "fake_pynvml"),
            "FAKE_NVML": flags}


def _live(tree: IbTree, change: dict[int, object], count: int = 10) -> list[tuple[int, str]]:
    """Run the agent (wire v2) and fold its stream into a fleet of one; ``change[seq]`` is
    called after that sample is read.  Returns (seq, the row's headline) per sample."""
    fleet = FleetState([HostSpec(name="ib-host")])
    proc = subprocess.Popen([sys.executable, "-", "--sys-root", str(tree.root), "--wire", "2",
                             "--interval", "0.15", "--count", str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=_agent_env())
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(agent_source(simulate=False))
    proc.stdin.close()
    reader = MessageReader()
    rows = []
    for raw in proc.stdout:
        for msg in reader.feed(raw):
            fleet.apply("ib-host", msg, time.time())
            if isinstance(msg, HostSample):
                rows.append((msg.seq, fleet.rows(time.time())[0].headline or ""))
                act = change.get(msg.seq)
                if callable(act):
                    act()
    assert proc.wait(timeout=30) == 0
    _live.fleet = fleet  # type: ignore[attr-defined]
    return rows


class TestLive:
    def test_a_port_going_down_mid_run_leads_row_host_and_triage_within_two_samples(
            self, tmp_path: Path) -> None:
        tree = IbTree(tmp_path, n=4, gpus=FAKE_GPUS)
        rows = _live(tree, {3: lambda: tree.set_state("mlx5_2", "DOWN", "Polling", 40)})
        assert all(not h.startswith("IB PORT DOWN") for seq, h in rows if seq <= 3)
        first = next(seq for seq, h in rows if h.startswith("IB PORT DOWN"))
        assert first <= 3 + 2
        fleet = _live.fleet  # type: ignore[attr-defined]
        headline = dict(rows)[first]
        assert headline == ("IB PORT DOWN · mlx5_2/1 DOWN/Polling (beside GPU 2); 3 of 4 ports "
                            "Active")
        host = fleet.hosts["ib-host"]
        down = next(f for f in host.findings() if f.code == Code.IB_PORT_DOWN)
        assert down.severity is Severity.CRITICAL and down.evidence == "mlx5_2/1"
        assert down.extra["gpus"] == [2]
        lead = fleet.diagnosis().first
        assert lead is not None and lead.finding.code == Code.IB_PORT_DOWN
        assert lead.do_now == "drain ib-host, reseat the cable of mlx5_2/1; check its switch port"

    def test_nvlink_from_nvml_judged_per_gpu(self, tmp_path: Path) -> None:
        proc = subprocess.run([sys.executable, "-", "--once"], input=agent_source(False),
                              capture_output=True, env=_agent_env("nvlinkerr2"), check=True)
        fleet = FleetState([HostSpec(name="h")])
        for line in proc.stdout.splitlines():
            fleet.apply("h", decode_line(line), time.time())
        found = {(f.code, f.gpu): f for f in fleet.hosts["h"].findings()}
        down = found[(Code.NVLINK_DOWN, 2)]
        assert down.severity is Severity.CRITICAL and "NVLink 5 inactive" in down.summary
        errs = found[(Code.NVLINK_ERRORS, 2)]
        assert errs.severity is Severity.WARNING
        assert "12 replay, 1 recovery, 3 crc (links 7)" in errs.summary
        assert (Code.NVLINK_DOWN, 0) not in found


def _fabric(ts: float, **port: object) -> FabricSample:
    line = json.dumps({"type": "fabric", "v": 1, "ts": ts, "interval_s": 30.0,
                       "ports": [{"hca": "mlx5_0", "port": 1, "state": "ACTIVE",
                                  "phys_state": "LinkUp", "rate_gbs": 400, **port}]})
    msg = decode_line(line)
    assert isinstance(msg, FabricSample)
    return msg


class TestErrorsAndRates:
    def test_errors_in_the_window_rise_and_a_flap_counts_at_once(self) -> None:
        t = FabricTracker()
        t.add(_fabric(1000.0, errors={"symbol_error": 4}))
        assert fabric_findings("h", t, None) == []  # 4 < ib_errors_min
        t.add(_fabric(1030.0, errors={"symbol_error": 7}))
        rising = fabric_findings("h", t, None)[0]
        assert rising.code == Code.IB_ERRORS_RISING and rising.severity is Severity.WARNING
        assert rising.summary == "mlx5_0/1 +11 symbol_error in 10 min"
        t.add(_fabric(1700.0))  # the window moved past them
        assert fabric_findings("h", t, None) == []
        t.add(_fabric(1701.0, errors={"link_downed": 1}))
        flap = fabric_findings("h", t, None)[0]
        assert flap.summary == "mlx5_0/1 +1 link_downed in 10 min (1 flap)"

    def test_saturated_and_reset_counters_make_no_rate_and_no_error(self, tmp_path: Path) -> None:
        """From the sysfs tree through the agent's reader and the wire to the judgement."""
        tree = IbTree(tmp_path, n=2)
        tree.set_counter("mlx5_0", "symbol_error", 65000)
        tree.set_counter("mlx5_1", "port_rcv_data", 4294967000)
        r = FabricReader(str(tmp_path))
        t = FabricTracker()
        msgs = [r.tick(0.0)]
        tree.set_counter("mlx5_0", "symbol_error", 3)  # cleared (perfquery -R)
        tree.set_counter("mlx5_1", "port_rcv_data", 4294967295)  # saturated
        msgs += [r.tick(float(i)) for i in range(1, 31)]
        for m in filter(None, msgs):
            decoded = decode_line(json.dumps({"type": "fabric", "v": 1, "ts": 5000.0, **m}))
            assert isinstance(decoded, FabricSample)
            t.add(decoded)
        ports = {p.hca: p for p in t.ports}
        assert ports["mlx5_1"].rx_bytes_s is None and ports["mlx5_1"].unknown == ("port_rcv_data",)
        assert ports["mlx5_0"].errors == {} and ports["mlx5_0"].unknown == ("symbol_error",)
        assert ports["mlx5_0"].rx_bytes_s == 0.0
        assert fabric_findings("h", t, None) == []

    def test_a_port_trained_low_is_degraded_beside_its_siblings(self) -> None:
        t = FabricTracker()
        t.add(FabricSample(1.0, ports=tuple(
            IbPortSample(f"mlx5_{i}", 1, "ACTIVE", "LinkUp", 200.0 if i == 3 else 400.0,
                         "InfiniBand") for i in range(4))))
        (slow,) = fabric_findings("h", t, None)
        assert slow.code == Code.IB_LINK_DEGRADED and slow.severity is Severity.WARNING
        assert slow.summary == "mlx5_3/1 at 200 Gb/s, below its siblings' 400 Gb/s"

    def test_nvidia_smi_text_is_read_with_explains_parser(self) -> None:
        text = "\n".join(["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)",
                          *[f"\t Link {n}: 26.562 GB/s" for n in range(17)],
                          "\t Link 17: <inactive>",
                          "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)",
                          *[f"\t Link {n}: 26.562 GB/s" for n in range(18)]])
        t = FabricTracker()
        t.add(FabricSample(1.0, nvlink_text=text))
        (down,) = fabric_findings("h", t, None)
        assert (down.code, down.gpu, down.severity) == (Code.NVLINK_DOWN, 0, Severity.CRITICAL)
        t.add(FabricSample(2.0, nvlinks=(NvLinkSample(0, 0, True, 26.562),)))
        assert fabric_findings("h", t, None) == []  # NVML's answer replaces the text's


def test_each_hca_is_beside_the_gpu_under_its_switch(tmp_path: Path) -> None:
    tree = IbTree(tmp_path, n=4, gpus=FAKE_GPUS)
    proc = subprocess.run([sys.executable, "-", "--once", "--sys-root", str(tree.root)],
                          input=agent_source(False), capture_output=True,
                          env=_agent_env(), check=True)
    hello = decode_line(proc.stdout.splitlines()[0])
    assert isinstance(hello, Hello)
    assert beside(hello) == {f"mlx5_{i}": ((i,), "pcie") for i in range(4)}
    far = Hello(hello.ts, 1, "x", hello.facts, pcie=hello.pcie, nics=tuple(
        Nic(n.name, n.kind, n.address, n.numa_node, ports=n.ports) for n in hello.nics))
    assert beside(far) == {f"mlx5_{i}": ((0, 1, 2, 3), "numa") for i in range(4)}


def _port_down(host: str, ts: float, hca: str = "mlx5_0") -> Finding:
    return Finding(Step.GPU, Code.IB_PORT_DOWN, Severity.CRITICAL, f"{hca}/1 DOWN", host,
                   evidence=f"{hca}/1", ts=ts, extra={"ports": [f"{hca}/1"]})


class TestGroups:
    def _fleet(self, n: int, tag: str) -> FleetState:
        return FleetState([HostSpec(name=f"gpu-a0{i}", tags=(tag,)) for i in range(1, n + 1)])

    def test_four_hosts_of_one_tagged_switch_are_one_switch_suspect(self) -> None:
        fleet = self._fleet(4, "switch:leaf-1")
        found = [_port_down(f"gpu-a0{i}", 1000.0 + i) for i in range(1, 5)]
        out = grouped(found, fleet.fabric_map())
        (suspect,) = out
        assert suspect.code == Code.SWITCH_SUSPECT and suspect.severity is Severity.CRITICAL
        assert suspect.extra["switch"] == "leaf-1"
        assert suspect.extra["hosts"] == ["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"]
        assert suspect.summary.startswith("switch leaf-1: 4 hosts lost IB ports")
        assert suspect.ts == 1001.0

    def test_too_few_hosts_or_too_far_apart_stay_host_findings(self) -> None:
        fleet = self._fleet(4, "switch:leaf-1")
        two = [_port_down("gpu-a01", 1.0), _port_down("gpu-a02", 2.0)]
        assert grouped(two, fleet.fabric_map()) == two
        apart = [_port_down(f"gpu-a0{i}", i * 3600.0) for i in range(1, 5)]
        assert grouped(apart, fleet.fabric_map()) == apart

    def test_triage_leads_with_the_switch(self) -> None:
        fleet = self._fleet(4, "switch:leaf-1")
        for i in range(1, 5):
            fleet.hosts[f"gpu-a0{i}"].findings_kept.set_fabric([_port_down(f"gpu-a0{i}",
                                                                            100.0 + i)])
        codes = [f.code for f in fleet.all_findings()]
        assert codes == [Code.SWITCH_SUSPECT]
        lead = fleet.diagnosis().first
        assert lead is not None and lead.finding.code == Code.SWITCH_SUSPECT
        assert lead.domain is not None and lead.domain.label == "switch leaf-1"
        assert lead.do_now.startswith("check switch leaf-1 first")
        assert [f.code for f in fleet.hosts["gpu-a01"].findings()] == [Code.IB_PORT_DOWN]

    def test_a_rack_throttling_together_is_one_rack_suspect(self) -> None:
        specs = [HostSpec(name=f"h{i}", tags=("rack:r12",)) for i in range(3)]
        hot = [Finding(Step.GPU, Code.CLOCKS_THROTTLED, Severity.WARNING, "GPU 1 throttled",
                       f"h{i}", gpu=1, ts=50.0 + i) for i in range(3)]
        (rack,) = grouped(hot, fabric_map(specs))
        assert rack.code == Code.RACK_SUSPECT and rack.extra["rack"] == "r12"
        assert rack.severity is Severity.WARNING


def test_a_hostile_fabric_message_is_bounded() -> None:
    """Thousands of counter names, a port name of a kilobyte and escapes: cut and cleaned
    at the boundary; the error window keeps a bounded number of messages."""
    errors = {f"c{i}": 1 for i in range(5000)}
    line = json.dumps({"type": "fabric", "v": 1, "ts": 1.0, "ports": [
        {"hca": "\x1b]52;c;aGk=\x07" + "m" * 1000, "port": 1, "state": "ACTIVE",
         "errors": errors}]})
    msg = decode_line(line)
    assert isinstance(msg, FabricSample)
    (port,) = msg.ports
    assert len(port.errors) == 32 and len(port.hca) <= 64 and "\x1b" not in port.hca
    t = FabricTracker()
    for i in range(5000):
        t.add(FabricSample(float(i), ports=msg.ports))
    assert len(t.errors) == 1024


def test_node_descriptions_are_host_text() -> None:
    from probes.rules.parsers.ibnetdiscover import parse_ibnetdiscover

    topo = parse_ibnetdiscover([
        "caguid=0x100000",
        'Ca\t1 "H-0000000000100000"\t\t# "gpu-a01\x1b]52;c;aGk=\x07 mlx5_0"',
        '[1](100001) \t"S-0000000000200000"[1]\t\t# lid 2 lmc 0 "leaf-1\x1b[2J" lid 1 4xNDR'])
    (link,) = topo.links
    assert "\x1b" not in (link.ca_desc or "") and "\x1b" not in link.switch
    assert link.switch_port == 1 and link.speed == "4xNDR" and link.ca_guid == 0x100000


def test_sequence_errors_of_adaptive_routing_are_shown_not_judged() -> None:
    t = FabricTracker()
    t.add(_fabric(1.0, errors={"out_of_sequence": 90000, "packet_seq_err": 40}))
    assert fabric_findings("h", t, None) == []
    t.add(_fabric(2.0, errors={"local_ack_timeout_err": 12}))
    (f,) = fabric_findings("h", t, None)
    assert f.summary == "mlx5_0/1 +12 local_ack_timeout_err in 10 min"


def test_every_member_of_the_window_joins_the_group_and_evidence_is_one_per_host() -> None:
    """A host's later flap joins its port-down in the switch's group (live: gpu-l04's
    ib-errors-rising came a second after the fourth host made the count)."""
    specs = [HostSpec(name=f"h{i}", tags=("switch:leaf-1",)) for i in range(4)]
    found = [_port_down(f"h{i}", 100.0 + i) for i in range(4)]
    found.append(Finding(Step.GPU, Code.IB_ERRORS_RISING, Severity.WARNING, "mlx5_0/1 +1 "
                         "link_downed", "h3", ts=104.0, extra={"ports": ["mlx5_0/1"]}))
    (suspect,) = grouped(found, fabric_map(specs))
    assert suspect.extra["codes"] == [
        "ib-errors-rising", "ib-port-down"]
    assert suspect.evidence == "; ".join(f"h{i}: mlx5_0/1 DOWN" for i in range(4))
