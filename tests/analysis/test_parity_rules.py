"""The rules that let a fleet read through Prometheus say what its agents say (issue 37
item 2): a host with fewer GPUs than its peers, a GPU lost with its last bus id and UUID,
an Xid from DCGM as a structured event, the exporter's link maximum and lost GPU's Xid.
(A link narrower than its siblings' is judge.py's:
``tests/analysis/test_judge_limits_verdicts.py``.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.outputs.export import HostExport, prometheus_text
from probes.store.codec import decode, encode
from probes.triage import Severity
from probes.wire.events import XidEvent
from tests.support.builders import gpu, hello, sample


def test_a_host_with_fewer_gpus_than_its_peers_of_the_same_model_is_short() -> None:
    names = ["h1", "h2", "h3", "h4"]
    fleet = FleetState([HostSpec(n) for n in names])  # no expect_gpus: the peers decide
    for n in names:
        fleet.apply(n, hello(7 if n == "h3" else 8), now=1.0)
    for n in names:
        fleet.apply(n, sample(tuple(gpu(i) for i in range(7 if n == "h3" else 8))), now=2.0)
    short = {n: [f for f in fleet.hosts[n].findings() if f.code == "gpu-count-short"]
             for n in names}
    assert [n for n, f in short.items() if f] == ["h3"], short
    f = short["h3"][0]
    assert f.severity is Severity.CRITICAL and f.summary.startswith("7/8 GPUs"), f
    assert "3 hosts of the same model list 8" in (f.evidence or ""), f


def test_a_lost_gpu_is_named_as_last_seen() -> None:
    fleet = FleetState([HostSpec("h", expect_gpus=8)])
    fleet.apply("h", hello(), now=1.0)
    fleet.apply("h", sample(tuple(gpu(i) for i in range(8) if i != 6)), now=2.0)
    lost = [f for f in fleet.hosts["h"].findings() if f.code == "gpu-lost"]
    assert [(f.gpu, dict(f.extra)) for f in lost] == [
        (6, {"bus_id": "0000:06:00.0", "uuid": "GPU-6"})]


def test_an_xid_from_dcgm_is_a_typed_xid_finding_with_its_gpu() -> None:
    fleet = FleetState([HostSpec("h", expect_gpus=8)])
    fleet.apply("h", hello(), now=1.0)
    event = XidEvent(50.0, 6, 79, "0000:06:00.0", "GPU-6")
    assert decode(encode(event)) == event  # a recording keeps it as it came
    fleet.apply("h", event, now=2.0)
    state = fleet.hosts["h"]
    xid = [f for f in state.findings() if f.code == "xid"]
    assert [(f.gpu, f.xid, f.severity, f.source, f.ts) for f in xid] == [
        (6, 79, Severity.CRITICAL, "dcgm", 50.0)]
    assert "GPU has fallen off the bus" in xid[0].summary, xid
    assert xid[0].evidence and xid[0].evidence.startswith("DCGM_FI_DEV_XID_ERRORS = 79")
    assert not state.logs.events, "no kernel line is made up"


def test_the_exporter_publishes_the_link_max_and_a_lost_gpus_last_xid() -> None:
    gpus = tuple(gpu(i, pcie_width=8 if i == 2 else 16) for i in range(8) if i != 6)
    text = prometheus_text([HostExport("h", hello(), sample(gpus))])
    lines = text.splitlines()
    assert any(ln.startswith('DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH{gpu="2"') and ln.endswith(" 16")
               for ln in lines), text
    assert any(ln.startswith('DCGM_FI_DEV_PCIE_LINK_WIDTH{gpu="2"') and ln.endswith(" 8")
               for ln in lines)
    assert any(ln.startswith('DCGM_FI_DEV_PCIE_MAX_LINK_GEN{gpu="0"') for ln in lines)
    lost = [ln for ln in lines if ln.startswith('DCGM_FI_DEV_XID_ERRORS{gpu="6"')]
    assert len(lost) == 1 and 'pci_bus_id="0000:06:00.0"' in lost[0], lost
    assert not [ln for ln in lines if ln.startswith('DCGM_FI_DEV_FB_USED{gpu="6"')]


def test_the_exporter_publishes_each_gpus_slowdown_temperature_from_its_hello() -> None:
    told = hello()
    gpus = tuple(dataclasses.replace(i, temp_slowdown_c=87.0 if i.index == 3 else None)
                 for i in told.facts.gpus)
    told = dataclasses.replace(told, facts=dataclasses.replace(told.facts, gpus=gpus))
    text = prometheus_text([HostExport("h", told, sample(tuple(gpu(i) for i in range(8))))])
    lines = [ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_SLOWDOWN_TEMP{")]
    assert len(lines) == 1 and lines[0].startswith('DCGM_FI_DEV_SLOWDOWN_TEMP{gpu="3"'), text
    assert lines[0].endswith(" 87.0"), lines


def test_a_prometheus_host_the_inventory_names_keeps_its_expected_gpus() -> None:
    from probes.sources.prometheus.backend import prometheus_specs

    specs = prometheus_specs(["gpu-a01", "gpu-b02"], 15.0,
                             inventory={"gpu-b02": HostSpec("gpu-b02", expect_gpus=8)})
    assert [(s.name, s.expect_gpus) for s in specs] == [("gpu-a01", None), ("gpu-b02", 8)]
    fleet = FleetState(specs)
    fleet.apply("gpu-b02", hello(7), now=1.0)
    fleet.apply("gpu-b02", sample(tuple(gpu(i) for i in range(7))), now=2.0)
    short = [f for f in fleet.hosts["gpu-b02"].findings() if f.code == "gpu-count-short"]
    assert [f.summary.split(" · ")[0] for f in short] == ["7/8 GPUs"], short


def test_a_recording_keeps_an_xid_event_and_a_replay_folds_it_alike(tmp_path: Path) -> None:
    from probes.store.recording import Recorder, RecordingReader

    event = XidEvent(50.0, 6, 79, "0000:06:00.0", "GPU-6")
    rec = Recorder(tmp_path / "r.sqlite3", "k", ["h"])
    rec.record("h", 50.0, event)
    rec.close()
    with RecordingReader(tmp_path / "r.sqlite3") as reader:
        items = [(h, item) for h, _, item in reader.items()]
    assert items == [("h", event)]
    fleet = FleetState([HostSpec("h", expect_gpus=8)])
    fleet.apply("h", hello(), now=1.0)
    fleet.apply("h", items[0][1], now=2.0)  # type: ignore[arg-type]
    assert [(f.code, f.gpu, f.xid) for f in fleet.hosts["h"].findings()] == [("xid", 6, 79)]


def test_the_peers_count_follows_each_hosts_newest_hello() -> None:
    from probes.analysis.gpu_peers import PeerCounts

    peers = PeerCounts()
    peers.add("h1", hello(8))
    peers.add("h3", hello(7))
    assert peers.expected("h3") is None  # two hosts of a model say nothing
    peers.add("h2", hello(8))
    assert peers.expected("h3") == (8, 2)
    peers.add("h4", hello(7))
    assert peers.expected("h3") is None  # two and two: no majority
    peers.add("h4", hello(8))  # the same host again, now with 8
    assert peers.expected("h3") == (8, 3)
