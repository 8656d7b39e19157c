"""Live findings from the agent's deeper fields: memory health, NVLink, PCIe chains, topology,
swapping; judged by the same rules as ``rigwatch explain``."""

from __future__ import annotations

import dataclasses

from probes.agent import sim_topo_text
from probes.analysis.findings import (
    host_findings,
    link_chain_findings,
    normal_topology,
    sample_findings,
    topology_findings,
)
from probes.config.fleet import HostSpec
from probes.fleet_state import HostState
from probes.triage import Severity
from probes.wire.samples import HostSample, HostStats, PcieLink
from tests.support.builders import gpu, hello, sample


def _by_code(findings: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in findings:
        out.setdefault(f.code, []).append(f)
    return out


def test_memory_health_codes_and_severities() -> None:
    gpus = (gpu(0, ecc_uncorrected_volatile=2), gpu(1, ecc_uncorrected_aggregate=5),
            gpu(2, remap_failure=True), gpu(3, remap_pending=True),
            gpu(4, retired_pages_pending=True), gpu(5, retired_pages_pending=None))
    found = _by_code(sample_findings("h", None, sample(gpus)))
    ecc = {f.gpu: f.severity for f in found["ecc-uncorrectable"]}
    assert ecc == {0: Severity.CRITICAL, 1: Severity.INFO}
    assert [(f.gpu, f.severity) for f in found["row-remap-failure"]] == [(2, Severity.CRITICAL)]
    assert [f.gpu for f in found["row-remap-pending"]] == [3]
    assert [f.gpu for f in found["retired-pages-pending"]] == [4]


def test_nvlink_down_is_a_warning_and_no_nvlink_is_nothing() -> None:
    gpus = (gpu(0, nvlink_up=17, nvlink_links=18), gpu(1, nvlink_up=None, nvlink_links=None))
    found = _by_code(sample_findings("h", None, sample(gpus)))
    assert [f.gpu for f in found["nvlink-down"]] == [0]


def test_idle_gen_drop_is_not_a_finding_but_under_load_it_is_info() -> None:
    idle = gpu(0, util_pct=0.0, pcie_gen=1)
    busy = gpu(1, util_pct=97.0, pcie_gen=4)
    found = sample_findings("h", None, sample((idle, busy)))
    assert [(f.gpu, f.severity) for f in found if f.code == "pcie-link-downgraded"] == [
        (1, Severity.INFO)]


def _chain(width: int, bridge_width: int = 16) -> tuple[PcieLink, ...]:
    return (PcieLink("0000:00:00.0", 32.0, width, 32.0, 16),
            PcieLink("0000:17:00.0", 32.0, bridge_width, 32.0, 16))


def test_bridge_trained_narrow_is_found_with_its_gpu() -> None:
    h = hello()
    found = link_chain_findings("h", h, {"0000:00:00.0": _chain(16, 8),
                                         "0000:01:00.0": _chain(16)})
    assert len(found) == 1
    assert found[0].gpu == 0 and "bridge 0000:17:00.0" in found[0].summary
    assert found[0].severity is Severity.WARNING


def test_topology_sys_to_far_nics_is_no_finding_when_each_gpu_has_a_near_one() -> None:
    # the normal HGX layout: 32 SYS GPU–NIC cells, yet each GPU has its own PIX NIC
    text = sim_topo_text()
    assert text.count("SYS") >= 32 and "PIX" in text
    h = dataclasses.replace(hello(), topo_text=text)
    assert topology_findings("h", h) == []
    assert normal_topology(text) is True


def test_topology_gpu_without_a_near_nic_is_a_warning() -> None:
    lines = sim_topo_text().splitlines()
    row = lines[1].split("\t")
    row[9:17] = ["SYS"] * 8  # every NIC is across the socket link from GPU0
    lines[1] = "\t".join(row)
    h = dataclasses.replace(hello(), topo_text="\n".join(lines))
    found = topology_findings("h", h)
    assert [f.severity for f in found] == [Severity.WARNING]
    assert normal_topology(h.topo_text) is False


def test_gpus_meeting_only_across_sockets_without_nvlink_stay_a_warning() -> None:
    lines = sim_topo_text().splitlines()
    cells = [ln.split("\t") for ln in lines]
    for row in cells[1:9]:
        for col in range(1, 9):
            if row[col].startswith("NV"):
                row[col] = "SYS"  # a PCIe-only box: GPU–GPU traffic crosses the socket link
    text = "\n".join("\t".join(r) for r in cells)
    assert "NV" not in "".join("".join(r[1:9]) for r in cells[1:9])
    assert normal_topology(text) is False
    found = topology_findings("h", dataclasses.replace(hello(), topo_text=text))
    assert [(f.code, f.severity) for f in found] == [("topology-cross-numa", Severity.WARNING)]


def test_swapping_host() -> None:
    s = HostSample(ts=1.0, seq=1, host=HostStats(swap_in_pages_s=900.0))
    assert [f.code for f in host_findings("h", s)] == ["host-swapping"]
    calm = HostSample(ts=1.0, seq=1, host=HostStats(swap_in_pages_s=3.0))
    assert host_findings("h", calm) == []


def test_host_state_keeps_layout_findings_and_refreshes_chains() -> None:
    state = HostState(HostSpec(name="h"))
    h = dataclasses.replace(hello(), pcie={"0000:00:00.0": _chain(8)})
    state.apply(h, 0.0)
    state.apply(sample(tuple(gpu(i) for i in range(8))), 1.0)
    assert [f.code for f in state.findings()] == ["pcie-link-downgraded"]
    fixed = dataclasses.replace(sample(tuple(gpu(i) for i in range(8))),
                                pcie={"0000:00:00.0": _chain(16)})
    state.apply(fixed, 2.0)
    assert state.findings() == []
