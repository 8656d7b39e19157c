"""Parsers for ``nvidia-smi topo -m``, ``lspci -vv`` and ``iostat``: fixtures, formats the
fixtures lack, the shared PCIe judgement, and a fuzz test that they never raise."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import ModuleType

import pytest

from probes.analysis.findings import Severity
from probes.rules.parsers import iostat, lspci, pcie, topo
from probes.rules.text import decode, split_lines
from probes.wire.samples import DiskStats
from tests.conftest import FIXTURES
from tests.support.explain_expect import expectation, finding_set, fixture_input, subset_mismatches

MODULES: dict[str, ModuleType] = {"topo": topo, "lspci": lspci, "iostat": iostat}
MINE = sorted(p for kind in MODULES for p in (FIXTURES / kind).glob("*.txt"))
OTHERS = sorted(p for p in FIXTURES.glob("*/*.txt") if p.parent.name not in MODULES)


def _lines(text: str) -> list[str]:
    return split_lines(text)


def _keys(result: object) -> set[tuple[str, str, int | None]]:
    return {f.key for f in result.findings}  # type: ignore[attr-defined]


# --- the samples (tests/fixtures/samples) ---------------------------------------------

@pytest.mark.parametrize("sample", MINE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path) -> None:
    want = expectation(sample)
    mod = MODULES[sample.parent.name]
    lines = split_lines(decode(fixture_input(sample)))
    assert mod.looks_like(lines)
    got = mod.explain(lines)
    assert got.kind == want["kind"]
    parsed = json.loads(json.dumps(got.parsed))
    assert subset_mismatches(want["parsed"], parsed) == []
    docs = [f.to_json(sample.name) for f in got.findings]
    assert finding_set(docs) == finding_set(want["findings"])


@pytest.mark.parametrize("sample", OTHERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recognisers_do_not_claim_other_kinds(sample: Path) -> None:
    lines = split_lines(decode(fixture_input(sample)))
    assert [k for k, m in MODULES.items() if m.looks_like(lines)] == []


def test_there_are_fixtures() -> None:
    assert len(MINE) >= 13


def test_topo_fixture_severities_follow_the_contract() -> None:
    for name in ("04-8xgpu-mlx4-old-format-no-numa", "06-dgx2-16gpu-nv6-old-format",
                 "10-2gpu-slurm-nv12-10nic"):
        lines = split_lines(decode(fixture_input(FIXTURES / "topo" / f"{name}.txt")))
        (f,) = topo.explain(lines).findings
        assert f.severity is Severity.WARNING
        assert lines[f.line - 1].strip() == f.evidence
        assert "SYS" in f.evidence


# --- pcie: the one judgement ----------------------------------------------------------------

@pytest.mark.parametrize(("cap_gts", "cap_w", "cur_gts", "cur_w", "want"), [
    (16.0, 16, 16.0, 8, Severity.WARNING),
    (16.0, 16, 2.5, 16, Severity.INFO),
    (16.0, 16, 2.5, 8, Severity.WARNING),
    (32.0, 16, 32.0, 16, None),
    (None, 16, 2.5, None, None),
    (8.0, 8, 16.0, 16, None),
    (16.0, 16, 16.0, 0, None),
])
def test_link_shortfall(cap_gts: float | None, cap_w: int | None, cur_gts: float | None,
                        cur_w: int | None, want: Severity | None) -> None:
    assert pcie.link_shortfall(cap_gts, cap_w, cur_gts, cur_w) is want


def test_generation_helpers_and_kernel_line_numbers() -> None:
    assert [pcie.gen_to_gts(g) for g in range(1, 7)] == [2.5, 5.0, 8.0, 16.0, 32.0, 64.0]
    line = ("252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at "
            "0000:00:01.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)")
    limited, capable = line.split("capable of")
    assert pcie.parse_speed_gts(limited.split("limited by")[1]) == 16.0
    assert pcie.parse_speed_gts(capable.split("with")[1]) == 32.0
    assert pcie.parse_width(limited.split("limited by")[1]) == 16
    assert pcie.gen_shortfall(4, 16, 1, 16) is Severity.INFO
    assert pcie.gen_shortfall(4, 16, 4, 8) is Severity.WARNING


# --- topo -------------------------------------------------------------------------------------

P2P = (" \tGPU0\tGPU1\tGPU2\tGPU3\t\n GPU0\tX\tOK\tOK\tCNS\t\n GPU1\tOK\tX\tOK\tCNS\t\n"
       " GPU2\tOK\tOK\tX\tNS\t\n GPU3\tCNS\tCNS\tNS\tX\t\n\nLegend:\n\n  X    = Self\n"
       "  OK   = Status Ok\n  CNS  = Chipset not supported\n  NS   = Not supported\n")
NIC_LEGEND = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV8\tPIX\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU1\tNV8\t X \tSYS\tPIX\t32-63,96-127\t1\t\tN/A\n"
    "NIC0\tPIX\tSYS\t X \tSYS\nNIC1\tSYS\tPIX\tSYS\t X \n\nLegend:\n\n  X    = Self\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n"
    "  NIC0: mlx5_0\n  NIC1: mlx5_1\n\n")
MP = ("$ nvidia-smi topo -mp\n        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      PIX     SYS     SYS     0-11            0\n"
      "GPU1    PIX      X      SYS     SYS     0-11            0\n"
      "GPU2    SYS     SYS      X      PIX     12-23           1\n"
      "GPU3    SYS     SYS     PIX      X      12-23           1\n")


def test_topo_p2p_matrix() -> None:
    got = topo.explain(_lines(P2P))
    assert got.parsed["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert got.parsed["links"]["GPU0"] == {  # type: ignore[index]
        "GPU0": "X", "GPU1": "OK", "GPU2": "OK", "GPU3": "CNS"}
    assert got.parsed["links"]["GPU2"]["GPU3"] == "NS"  # type: ignore[index]
    assert "cpu_affinity" not in got.parsed and "numa_affinity" not in got.parsed
    assert got.findings == ()
    assert topo.looks_like(_lines(P2P))


def test_topo_nic_legend_double_tab_and_gpu_nic_sys_is_warning() -> None:
    lines = _lines(NIC_LEGEND)
    got = topo.explain(lines)
    p = got.parsed
    assert p["nics"] == ["NIC0", "NIC1"]
    assert p["nic_legend"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert p["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}
    assert p["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"}
    assert p["links"]["NIC1"]["NIC1"] == "X"  # type: ignore[index]
    assert set(p["cpu_affinity"]) == {"GPU0", "GPU1"}  # type: ignore[arg-type]
    (f,) = got.findings
    assert f.key == ("gpu", "topology-cross-numa", None)
    assert f.severity is Severity.WARNING
    assert f.line == 2 and f.evidence.startswith("GPU0")


def test_topo_gpu_gpu_sys_with_nvlink_elsewhere_is_info() -> None:
    text = ("        GPU0    GPU1    GPU2    GPU3    CPU Affinity\n"
            "GPU0     X      NV4     SYS     SYS     0-7\nGPU1    NV4      X      SYS     SYS     0-7\n"
            "GPU2    SYS     SYS      X      NV4     8-15\nGPU3    SYS     SYS     NV4      X      8-15\n")
    (f,) = topo.explain(_lines(text)).findings
    assert f.severity is Severity.INFO
    assert f.line == 2


def test_topo_mp_without_nvlink_gpu_gpu_sys_is_warning_and_evidence_skips_prompt() -> None:
    lines = _lines(MP)
    got = topo.explain(lines)
    assert got.parsed["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert got.parsed["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    (f,) = got.findings
    assert f.severity is Severity.WARNING
    assert f.line == 3 and lines[f.line - 1].startswith("GPU0")


def test_topo_nic_nic_sys_alone_is_no_finding() -> None:
    text = ("\tGPU0\tNIC0\tNIC1\tCPU Affinity\n"
            "GPU0\t X \tPIX\tNODE\t0-7\nNIC0\tPIX\t X \tSYS\nNIC1\tNODE\tSYS\t X \n")
    got = topo.explain(_lines(text))
    assert got.parsed["links"]["NIC0"]["NIC1"] == "SYS"  # type: ignore[index]
    assert got.findings == ()


def test_topo_crlf_fence_and_launcher_prefix() -> None:
    text = ("```\r\nnode7: \tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\r\n"
            "node7: GPU0\t X \tNV4\t0-15\t0\r\nnode7: GPU1\tNV4\t X \t0-15\t0\r\n```\r\n")
    got = topo.explain(_lines(text))
    assert got.parsed["links"] == {"GPU0": {"GPU0": "X", "GPU1": "NV4"},
                                   "GPU1": {"GPU0": "NV4", "GPU1": "X"}}
    assert got.parsed["cpu_affinity"] == {"GPU0": "0-15", "GPU1": "0-15"}
    assert topo.looks_like(_lines(text))


def test_topo_header_only_and_row_cut_mid_way() -> None:
    header = "        GPU0    GPU1    GPU2    GPU3    mlx5_0  CPU Affinity\n"
    got = topo.explain(_lines(header))
    assert got.parsed["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert got.parsed["nics"] == ["mlx5_0"]
    assert got.parsed["links"] == {} and got.parsed["cpu_affinity"] == {}
    cut = header + "GPU0     X      PIX     SOC     SO"
    got = topo.explain(_lines(cut))
    assert got.parsed["links"] == {"GPU0": {"GPU0": "X", "GPU1": "PIX", "GPU2": "SOC",
                                            "GPU3": "SO"}}
    assert got.parsed["cpu_affinity"] == {}
    assert {f.key for f in got.findings} == {("gpu", "topology-cross-numa", None)}


def test_topo_single_gpu_and_header_less_paste() -> None:
    one = ("        GPU0    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
           "GPU0     X      0-23    0               N/A\n")
    got = topo.explain(_lines(one))
    assert got.parsed["links"] == {"GPU0": {"GPU0": "X"}}
    assert got.parsed["numa_affinity"] == {"GPU0": "0"}
    bare = "GPU0     X      SYS\nGPU1    SYS      X\n"
    got = topo.explain(_lines(bare))
    assert got.parsed["gpus"] == ["GPU0", "GPU1"]
    assert got.parsed["links"]["GPU1"] == {"GPU0": "SYS", "GPU1": "X"}  # type: ignore[index]
    assert topo.looks_like(_lines(bare))


def test_topo_two_digit_gpus_keep_header_order() -> None:
    names = [f"GPU{i}" for i in range(12)]
    head = "\t" + "\t".join(names) + "\tCPU Affinity\n"
    row = "GPU11\t" + "\t".join("NV12" if n != "GPU11" else " X " for n in names) + "\t0-7\n"
    m = topo.parse_topo(_lines(head + row))
    assert m.gpus == tuple(names)
    assert m.links["GPU11"]["GPU11"] == "X" and m.links["GPU11"]["GPU10"] == "NV12"
    assert m.cpu_affinity == {"GPU11": "0-7"}


def test_topo_recogniser_ignores_look_alikes() -> None:
    assert not topo.looks_like(_lines("NCCL INFO GPU0 (1) -> GPU1 via NVLink\n"))
    assert not topo.looks_like(_lines("|   0  NVIDIA H100 80GB HBM3   On | 00000000:18:00.0 Off |"))
    assert not topo.looks_like(_lines("Device  r/s  w/s  %util\nsda  1.0  2.0  3.0\n"))


# --- lspci ------------------------------------------------------------------------------------

LSPCI_FULL = (
    "00:01.0 PCI bridge: Intel Corporation Device 09ab (rev 04) (prog-if 00 [Normal decode])\n"
    "\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00\n"
    "\t\tLnkCap:\tPort #1, Speed 16GT/s, Width x16, ASPM not supported\n"
    "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x0 (downgraded)\n"
    "\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink- Retimer+ 2Retimers+ DRS-\n"
    "\t\tLnkSta2: Current De-emphasis Level: -3.5dB, EqualizationComplete-\n\n"
    "3b:00.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] (rev a1)\n"
    "\tNUMA node: 0\n"
    "\tCapabilities: [68] Express (v2) Endpoint, MSI 00\n"
    "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
    "\t\tLnkSta:\tSpeed 32GT/s (ok), Width x8 (downgraded)\n"
    "\t\tLnkCap2: Supported Link Speeds: 2.5-32GT/s, Crosslink- Retimer+ 2Retimers+ DRS-\n"
    "\t\tLnkSta2: Current De-emphasis Level: -6dB, EqualizationComplete+\n\n"
    "5e:00.0 Ethernet controller: Mellanox Technologies MT28908 Family [ConnectX-6]\n"
    "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
    "\t\tLnkSta:\tSpeed 16GT/s (ok), Width x16 (ok)\n")


def test_lspci_tab_indented_full_output_width_downgrade_is_warning() -> None:
    got = lspci.explain(_lines(LSPCI_FULL))
    devs = got.parsed["devices"]
    assert [d["address"] for d in devs] == [  # type: ignore[index, union-attr]
        "0000:00:01.0", "0000:3b:00.0", "0000:5e:00.0"]
    gpu = devs[1]  # type: ignore[index]
    assert (gpu["cap_speed_gts"], gpu["cap_width"], gpu["sta_speed_gts"], gpu["sta_width"]) == (
        32, 16, 32, 8)
    assert gpu["downgraded"] is True and gpu["numa_node"] == 0
    assert devs[2]["downgraded"] is False  # type: ignore[index]
    (f,) = got.findings
    assert f.severity is Severity.WARNING and f.gpu == "0000:3b:00.0"
    assert f.line == 12 and "Width x8" in f.evidence


def test_lspci_untrained_root_port_is_downgraded_but_no_finding() -> None:
    head = LSPCI_FULL.split("\n\n")[0]
    got = lspci.explain(_lines(head))
    (dev,) = got.parsed["devices"]  # type: ignore[misc]
    assert dev["sta_width"] == 0 and dev["downgraded"] is True
    assert got.findings == ()


def test_lspci_speed_only_shortfall_is_info_with_its_line() -> None:
    text = ("  LnkCap: Port #0, Speed 8GT/s, Width x16, ASPM L0s L1\n"
            "  LnkSta: Speed 2.5GT/s, Width x16, TrErr- Train- SlotClk+ DLActive- BWMgmt-\n")
    got = lspci.explain(_lines(text))
    (f,) = got.findings
    assert f.severity is Severity.INFO and f.line == 2
    assert got.parsed["devices"][0]["downgraded"] is True  # type: ignore[index]


def test_lspci_speed_unknown_crlf_and_quote_marks() -> None:
    text = ("> \t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM L0s L1\r\n"
            "> \t\tLnkSta:\tSpeed unknown, Width x16\r\n")
    got = lspci.explain(_lines(text))
    assert got.parsed["devices"] == [{"cap_speed_gts": 8, "cap_width": 16, "sta_speed_gts": None,
                                      "sta_width": 16, "downgraded": False}]
    assert got.findings == ()


def test_lspci_lnkcap2_lnksta2_alone_give_null_link_fields() -> None:
    text = ("3b:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
            "\t\tLnkCap2: Supported Link Speeds: 2.5-32GT/s, Crosslink- Retimer+\n"
            "\t\tLnkSta2: Current De-emphasis Level: -6dB, EqualizationComplete+\n")
    (dev,) = lspci.parse_lspci(_lines(text))
    assert (dev.cap_speed_gts, dev.cap_width, dev.sta_speed_gts, dev.sta_width) == (
        None, None, None, None)
    assert dev.downgraded is False


def test_lspci_launcher_prefix_full_domain_and_two_anonymous_excerpts() -> None:
    text = ("host3: 0000:AF:00.0 VGA compatible controller: NVIDIA Corporation GA102 (rev a1)\n"
            "host3: \t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16\n"
            "host3: \t\tLnkSta:\tSpeed 8GT/s, Width x4\n")
    (dev,) = lspci.parse_lspci(_lines(text))
    assert dev.address == "0000:af:00.0" and dev.shortfall is Severity.WARNING
    two = ("    LnkCap: Port #0, Speed 8GT/s, Width x16\n    LnkSta: Speed 8GT/s, Width x16\n"
           "    LnkCap: Port #0, Speed 8GT/s, Width x16\n    LnkSta: Speed 8GT/s, Width x8\n")
    devs = lspci.parse_lspci(_lines(two))
    assert [d.downgraded for d in devs] == [False, True]


def test_lspci_recogniser_ignores_kernel_lines_and_times() -> None:
    assert not lspci.looks_like(_lines("[    1.2] pci 0000:3b:00.0: [10de:2330] type 00\n"))
    assert not lspci.looks_like(_lines("00:01.5 loss: 3.21 lr: 0.0001\n"))
    assert lspci.looks_like(_lines("```\n3b:00.0 3D controller: NVIDIA Corporation GH100\n```"))


# --- iostat -----------------------------------------------------------------------------------

SYSSTAT10 = (
    "Linux 3.10.0-1160.el7.x86_64 (db01) \t03/14/2022 \t_x86_64_\t(8 CPU)\n\n"
    "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
    "           1.27    0.00    0.66    0.09    0.00   97.98\n\n"
    "Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz avgqu-sz   await"
    " r_await w_await  svctm  %util\n"
    "sda               0.00     0.41    0.32    1.45    12.03    21.80    38.16     0.00    1.62"
    "    0.71    1.82   0.42   0.07\n"
    "sdb               0.00     0.00  210.00  300.00 26880.00 38400.00   256.00    45.12   88.47"
    "   70.10  101.32   1.96  99.80\n\n")
HEADER11 = ("Device            r/s     w/s     rkB/s     wkB/s   rrqm/s   wrqm/s  %rrqm  %wrqm "
            "r_await w_await aqu-sz rareq-sz wareq-sz  svctm  %util\n")


def _row11(name: str, r_s: float, util: float) -> str:
    return (f"{name:<12} {r_s:8.2f}    2.00      4.00      8.00     0.00     0.00   0.00   0.00"
            f"    1.00    1.00   0.01     4.00     4.00   0.10 {util:6.2f}\n")


TWO_REPORTS = (HEADER11 + _row11("sda", 1, 1) + _row11("sdb", 1, 2) + "\n"
               + "03/14/22 10:00:01\n" + HEADER11 + _row11("sda", 500, 97) + _row11("sdb", 3, 3)
               + "\n")


def test_iostat_sysstat10_avgqu_sz_colon_header_and_saturation() -> None:
    lines = _lines(SYSSTAT10)
    got = iostat.explain(lines)
    sdb = got.parsed["devices"]["sdb"]  # type: ignore[index]
    assert sdb["aqu_sz"] == 45.12 and sdb["util"] == 99.8 and sdb["r_await"] == 70.1
    (f,) = got.findings
    assert f.key == ("gpu", "disk-saturated", None) and f.severity is Severity.WARNING
    assert lines[f.line - 1].startswith("sdb")


def test_iostat_sysstat9_sectors_halved_and_single_await_gives_null_r_w_await() -> None:
    text = ("Device:         rrqm/s   wrqm/s     r/s     w/s   rsec/s   wsec/s avgrq-sz avgqu-sz"
            "   await  svctm  %util\n"
            "sda               0.05     5.34    0.60    2.71    20.96    64.41    25.80     0.02"
            "    6.51   2.10   0.69\n")
    (d,) = iostat.parse_iostat(_lines(text)).devices
    assert d.rkb_s == pytest.approx(10.48) and d.wkb_s == pytest.approx(32.205)
    assert d.r_await is None and d.w_await is None and d.aqu_sz == 0.02


def test_iostat_comma_decimals_de_locale_sysstat12() -> None:
    text = ("Linux 5.15.0-91-generic (gpu07) \t14.03.2024 \t_x86_64_\t(64 CPU)\n\n"
            "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s"
            "   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz"
            "     f/s f_await  aqu-sz  %util\n"
            "nvme0n1         12,50    800,00     0,00   0,00    0,21    64,00   40,25   5120,50"
            "     1,00   2,42    1,10   127,22    0,00      0,00     0,00   0,00    0,00     0,00"
            "    2,00    0,50    0,05  93,40\n")
    got = iostat.explain(_lines(text))
    d = got.parsed["devices"]["nvme0n1"]  # type: ignore[index]
    assert d == {"r_s": 12.5, "w_s": 40.25, "rkb_s": 800.0, "wkb_s": 5120.5, "r_await": 0.21,
                 "w_await": 1.1, "aqu_sz": 0.05, "util": 93.4}
    assert _keys(got) == {("gpu", "disk-saturated", None)}


def test_iostat_two_reports_picks_the_last() -> None:
    lines = _lines(TWO_REPORTS)
    got = iostat.explain(lines)
    assert got.parsed["devices"]["sda"]["r_s"] == 500.0  # type: ignore[index]
    (f,) = got.findings
    assert f.line == 7 and lines[f.line - 1].startswith("sda") and "97" in lines[f.line - 1]


def test_iostat_last_report_cut_off_uses_the_one_before() -> None:
    cut = TWO_REPORTS.rstrip("\n")[:-30]
    rep = iostat.parse_iostat(_lines(cut))
    assert {d.name: d.r_s for d in rep.devices} == {"sda": 1.0, "sdb": 1.0}
    fewer = TWO_REPORTS.rstrip("\n").rsplit("\n", 1)[0]
    rep = iostat.parse_iostat(_lines(fewer))
    assert {d.name: d.r_s for d in rep.devices} == {"sda": 1.0, "sdb": 1.0}
    assert iostat.explain(_lines(fewer)).findings == ()


def test_iostat_lone_report_cut_mid_row_keeps_complete_rows() -> None:
    text = HEADER11 + _row11("sda", 1, 95) + _row11("sdb", 1, 2)[:40]
    rep = iostat.parse_iostat(_lines(text))
    assert [d.name for d in rep.devices] == ["sda"] and not rep.complete
    assert _keys(iostat.explain(_lines(text))) == {("gpu", "disk-saturated", None)}


def test_iostat_megabytes_converted_and_device_last_without_util() -> None:
    text = ("     r/s     rMB/s   r_await  aqu-sz Device\n"
            "   31.08      1.50      0.18   40.00 Z1Z8A1QK_3TB_hpraid_PACCR0XK2MNB_1I:0:1_sdd\n")
    got = iostat.explain(_lines(text))
    d = got.parsed["devices"]["Z1Z8A1QK_3TB_hpraid_PACCR0XK2MNB_1I:0:1_sdd"]  # type: ignore[index]
    assert d["rkb_s"] == 1536.0 and d["util"] is None and d["w_s"] is None
    assert _keys(got) == {("gpu", "disk-saturated", None)}


def test_iostat_long_queue_does_not_trigger_when_util_is_known() -> None:
    text = HEADER11 + ("nvme0n1   900.00    2.00  4000.00      8.00     0.00     0.00   0.00   "
                       "0.00    1.00    1.00  64.00     4.00     4.00   0.10  40.00\n")
    assert iostat.explain(_lines(text)).findings == ()


def test_iostat_human_readable_name_on_its_own_line() -> None:
    text = (HEADER11 + "nvme0n1\n                12.00   96.00     48.0k     18.0M     0.00     5.00"
            "   0.0%   5.0%    1.92   11.40   1.12     4.0k   192.0k   0.61   6.6%\n")
    (d,) = iostat.parse_iostat(_lines(text)).devices
    assert d.name == "nvme0n1" and d.wkb_s == 18432.0 and d.rkb_s == 48.0 and d.util == 6.6


def test_iostat_basic_report_and_launcher_prefix() -> None:
    text = ("gpu3: Device             tps    kB_read/s    kB_wrtn/s    kB_read    kB_wrtn\n"
            "gpu3: sda               9.50         0.00        46.00          0         92\n")
    (d,) = iostat.parse_iostat(_lines(text)).devices
    assert d == DiskStats("sda", rkb_s=0.0, wkb_s=46.0)


def test_iostat_json_sysstat12_megabytes_last_statistics_entry() -> None:
    def stat(r: float, util: float) -> str:
        return ('{"disk": [\n{"disk_device": "nvme0n1", "r/s": %s, "w/s": 2.00, "rMB/s": 0.50, '
                '"wMB/s": 1.00, "r_await": 0.10, "w_await": 0.20, "aqu-sz": 0.00, "util": %s}\n'
                "]}" % (r, util))
    text = ('{"sysstat": {"hosts": [{"nodename": "gpu01", "statistics": [\n'
            + stat(1, 5) + ",\n" + stat(900, 99) + "\n]}]}}\n")
    got = iostat.explain(_lines(text))
    assert got.parsed["devices"] == {"nvme0n1": {
        "r_s": 900.0, "w_s": 2.0, "rkb_s": 512.0, "wkb_s": 1024.0, "r_await": 0.1,
        "w_await": 0.2, "aqu_sz": 0.0, "util": 99.0}}
    assert _keys(got) == {("gpu", "disk-saturated", None)}
    closed_disk_array = text[:text.rindex("]}")]
    assert iostat.parse_iostat(_lines(closed_disk_array)).devices[0].r_s == 900.0
    cut_inside_last_row = text[:text.rindex('"util"')]
    rep = iostat.parse_iostat(_lines(cut_inside_last_row))
    assert rep.devices[0].r_s == 1.0


def test_iostat_json_old_keys_and_comma_decimals() -> None:
    text = ('{"sysstat": {"hosts": [{"statistics": [{"disk": [\n'
            '{"disk_device": "sda", "rrqm": 0,00, "wrqm": 1,50, "r": 3,25, "w": 4,00, '
            '"rkB": 12,00, "wkB": 16,00, "avgqu-sz": 0,10, "await": 1,00, "r_await": 0,50, '
            '"w_await": 1,20, "util": 91,00},\n'
            '{"disk_device": "sdb", "tps": 1.00, "kB_read_per_sec": 2.00, "kB_wrtn_per_sec": 3.00}\n'
            "]}]}]}}\n")
    rep = iostat.parse_iostat(_lines(text))
    sda, sdb = rep.devices
    assert (sda.r_s, sda.w_s, sda.rkb_s, sda.aqu_sz, sda.util) == (3.25, 4.0, 12.0, 0.1, 91.0)
    assert (sdb.rkb_s, sdb.wkb_s, sdb.r_s) == (2.0, 3.0, None)
    assert iostat.explain(_lines(text)).findings[0].line == 2


def test_iostat_recogniser() -> None:
    assert iostat.looks_like(_lines("```\n" + HEADER11 + "```\n"))
    assert iostat.looks_like(_lines("avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"))
    assert not iostat.looks_like(_lines("epoch 1 r w util 0.5\nloss 3.2 await result\n"))
    assert not iostat.looks_like(_lines("GPU0     X      NV4     0-7\n"))


# --- never raise -------------------------------------------------------------------------------

def _corpus() -> list[str]:
    own = [P2P, NIC_LEGEND, MP, LSPCI_FULL, SYSSTAT10, TWO_REPORTS]
    return own + [fixture_input(p).decode("utf-8", errors="replace") for p in MINE]


def _mutations(rng: random.Random, text: str) -> list[str]:
    raw = text.encode("utf-8", errors="replace")
    out = [raw[:rng.randrange(len(raw) + 1)] for _ in range(6)]
    flipped = bytearray(raw)
    for _ in range(max(1, len(raw) // 50)):
        flipped[rng.randrange(len(flipped) or 1) if flipped else 0:][:1] = bytes(
            [rng.randrange(256)])
    out.append(bytes(flipped))
    out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(2000))))
    mid = rng.randrange(len(raw) + 1)
    out.append(raw[:mid] + b"\r\n\t ,{[]}\"" + raw[mid:])
    return [b.decode("utf-8", errors="replace") for b in out]


def test_fuzz_parsers_never_raise() -> None:
    rng = random.Random(20240519)
    for text in _corpus():
        for variant in _mutations(rng, text):
            lines = split_lines(variant)
            for mod in MODULES.values():
                mod.looks_like(lines)
                result = mod.explain(lines)
                json.dumps(result.parsed)
                for f in result.findings:
                    json.dumps(f.to_json("fuzz"))
                    assert 1 <= f.line <= max(1, len(lines))
