"""The ``nvidia-smi -q`` parser: the samples, a synthesised 2-GPU report (throttling,
remap failure, ECC, lost lanes), old driver key names, grep excerpts of many GPUs, CRLF,
prefixes, cuts, the recogniser, and a fuzz test."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from probes.rules.parsers import smi_q
from probes.rules.parsers.smi_q import looks_like, parse_smi_q
from probes.rules.text import decode, split_lines
from probes.triage import Severity, Step
from tests.conftest import FIXTURES, REPO
from tests.support.explain_expect import expectation, finding_set, fixture_input, subset_mismatches

ALL = sorted(FIXTURES.glob("*/*.txt"))
MINE = [p for p in ALL if expectation(p)["kind"] == smi_q.KIND]
OTHERS = [p for p in ALL if expectation(p)["kind"] != smi_q.KIND]
HEALTHY = sorted((REPO / "tests" / "data" / "healthy").glob("*"))


def _lines(text: str) -> list[str]:
    return split_lines(text)


def _found(lines: list[str]) -> dict[str, Severity]:
    return {f.code: f.severity for f in smi_q.explain(lines).findings}


def _fixture(prefix: str) -> list[str]:
    (path,) = [p for p in MINE if p.name.startswith(prefix)]
    return split_lines(decode(fixture_input(path)))


# --- the samples (tests/fixtures/samples) ---------------------------------------------

@pytest.mark.parametrize("sample", MINE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path) -> None:
    want = expectation(sample)
    lines = split_lines(decode(fixture_input(sample)))
    assert looks_like(lines)
    got = smi_q.explain(lines)
    assert got.kind == want["kind"]
    parsed = json.loads(json.dumps(got.parsed))
    assert subset_mismatches(want["parsed"], parsed) == []
    docs = [f.to_json(sample.name) for f in got.findings]
    assert finding_set(docs) == finding_set(want["findings"])


@pytest.mark.parametrize("sample", OTHERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recogniser_does_not_claim_other_kinds(sample: Path) -> None:
    assert not looks_like(split_lines(decode(fixture_input(sample))))


@pytest.mark.parametrize("log", HEALTHY, ids=lambda p: p.name)
def test_recogniser_does_not_claim_healthy_logs(log: Path) -> None:
    assert not looks_like(split_lines(decode(log.read_bytes())))


def test_the_fixtures_are_there() -> None:
    assert {p.name[:2] for p in MINE} >= {"14", "16", "18", "20", "30"}
    assert len(OTHERS) >= 50 and HEALTHY


def test_fixture_details_beyond_the_expectation() -> None:
    (g,) = parse_smi_q(_fixture("30-")).gpus
    assert (g.pcie_gen_max, g.pcie_gen_host_max, g.pcie_gen_device_max, g.pcie_gen_current) == \
        (4, 5, 4, 4)
    assert (g.pstate, g.util_gpu_pct, g.temp_c, g.temp_slowdown_c, g.temp_shutdown_c,
            g.temp_max_operating_c, g.temp_tlimit_c) == ("P2", 11, 52, 96, 101, 90, None)
    assert (g.power_draw_w, g.power_limit_w, g.power_default_limit_w) == (97.18, 320, 320)
    assert (g.ecc_volatile_uncorrectable, g.remapping_failure, g.retired_pages_pending) == \
        (None, None, None)
    assert g.line == 9 and g.time == "Wed Apr 22 18:36:14 2026"
    r = parse_smi_q(_fixture("18-"))
    (t,) = r.gpus
    assert (t.temp_c, t.temp_shutdown_c, t.temp_slowdown_c, t.temp_max_operating_c,
            t.mem_temp_c) == (49, 102, 97, 57, None)
    assert (r.driver_version, r.cuda_version, r.attached_gpus) == ("465.27", "11.3", 1)
    (p,) = parse_smi_q(_fixture("16-")).gpus
    assert (p.pstate, p.clock_event_reasons_active) == ("P8", ("Idle",))
    # MIG Mode / Driver Model "Pending : N/A" is not a pending page retirement
    (h,) = parse_smi_q(_fixture("20-")).gpus
    assert h.retired_pages_pending is None and h.name == "GeForce GTX 780 Ti"


# --- a synthesised 2-GPU report (driver 535 layout) -----------------------------------------

def _gpu_block(bus: str, *, pstate: str, util: int, reasons: dict[str, str], gen: tuple[int, int],
               width: tuple[int, int], dram_vol: int, remap_fail: str,
               remap_pending: str = "No", draw: str = "612.40 W") -> str:
    def reason(name: str, indent: int = 8) -> str:
        return f"{' ' * indent}{name:<{42 - indent}}: {reasons.get(name, 'Not Active')}\n"

    return (
        f"GPU {bus}\n"
        "    Product Name                          : NVIDIA H100 80GB HBM3\n"
        "    Product Brand                         : NVIDIA\n"
        "    Persistence Mode                      : Enabled\n"
        "    MIG Mode\n"
        "        Current                           : Disabled\n"
        "        Pending                           : Disabled\n"
        "    PCI\n"
        f"        Bus                               : 0x{bus[9:11]}\n"
        f"        Bus Id                            : {bus}\n"
        "        GPU Link Info\n"
        "            PCIe Generation\n"
        f"                Max                       : {gen[1]}\n"
        f"                Current                   : {gen[0]}\n"
        "                Device Current            : 5\n"
        "                Device Max                : 5\n"
        "                Host Max                  : 5\n"
        "            Link Width\n"
        f"                Max                       : {width[1]}x\n"
        f"                Current                   : {width[0]}x\n"
        "        Replays Since Reset               : 0\n"
        "    Fan Speed                             : N/A\n"
        f"    Performance State                     : {pstate}\n"
        "    Clocks Event Reasons\n"
        + reason("Idle") + reason("Applications Clocks Setting") + reason("SW Power Cap")
        + reason("HW Slowdown") + reason("HW Thermal Slowdown", 12)
        + reason("HW Power Brake Slowdown", 12) + reason("Sync Boost")
        + reason("SW Thermal Slowdown") + reason("Display Clock Setting") +
        "    Clocks Event Reasons Counters\n"
        "        SW Power Capping                  : 1830412 us\n"
        "        HW Thermal Slowdown               : 9120 us\n"
        "    FB Memory Usage\n"
        "        Total                             : 81559 MiB\n"
        "        Used                              : 76120 MiB\n"
        "    Utilization\n"
        f"        Gpu                               : {util} %\n"
        "        Memory                            : 41 %\n"
        "    ECC Mode\n"
        "        Current                           : Enabled\n"
        "        Pending                           : Enabled\n"
        "    ECC Errors\n"
        "        Volatile\n"
        "            SRAM Correctable              : 0\n"
        "            SRAM Uncorrectable            : 0\n"
        "            DRAM Correctable              : 14\n"
        f"            DRAM Uncorrectable            : {dram_vol}\n"
        "        Aggregate\n"
        "            SRAM Correctable              : 0\n"
        "            SRAM Uncorrectable            : 0\n"
        "            DRAM Correctable              : 14\n"
        f"            DRAM Uncorrectable            : {dram_vol}\n"
        "    Retired Pages\n"
        "        Single Bit ECC                    : N/A\n"
        "        Double Bit ECC                    : N/A\n"
        "        Pending Page Blacklist            : N/A\n"
        "    Remapped Rows\n"
        "        Correctable Error                 : 0\n"
        f"        Uncorrectable Error               : {dram_vol}\n"
        f"        Pending                           : {remap_pending}\n"
        f"        Remapping Failure Occurred        : {remap_fail}\n"
        "        Bank Remap Availability Histogram\n"
        "            Max                           : 2558 bank(s)\n"
        "            None                          : 0 bank(s)\n"
        "    Temperature\n"
        "        GPU Current Temp                  : 87 C\n"
        "        GPU T.Limit Temp                  : -2 C\n"
        "        GPU Shutdown T.Limit Temp         : -8 C\n"
        "        GPU Slowdown T.Limit Temp         : -2 C\n"
        "        GPU Max Operating T.Limit Temp    : 0 C\n"
        "        GPU Target Temperature            : N/A\n"
        "        Memory Current Temp               : 79 C\n"
        "    GPU Power Readings\n"
        f"        Power Draw                        : {draw}\n"
        "        Current Power Limit               : 700.00 W\n"
        "        Requested Power Limit             : 700.00 W\n"
        "        Default Power Limit               : 700.00 W\n"
        "    Module Power Readings\n"
        "        Power Draw                        : N/A\n"
        "    Processes\n"
        "        GPU instance ID                   : N/A\n"
        "        Compute instance ID               : N/A\n"
        "        Process ID                        : 48211\n"
        "            Type                          : C\n"
        "            Name                          : python3\n"
        "            Used GPU Memory               : 76002 MiB\n"
        "        GPU instance ID                   : N/A\n"
        "        Compute instance ID               : N/A\n"
        "        Process ID                        : 48212\n"
        "            Type                          : C\n"
        "            Name                          : python3\n"
        "            Used GPU Memory               : 90 MiB\n"
        "\n")


HEADER = """\

==============NVSMI LOG==============

Timestamp                                 : Tue Oct  8 09:12:44 2024
Driver Version                            : 535.183.01
CUDA Version                              : 12.2

Attached GPUs                             : 2
"""
TWO_GPUS = HEADER + _gpu_block(
    "00000000:18:00.0", pstate="P0", util=98, gen=(5, 5), width=(16, 16), dram_vol=0,
    reasons={"HW Slowdown": "Active", "HW Thermal Slowdown": "Active"}, remap_fail="No",
) + _gpu_block(
    "00000000:2A:00.0", pstate="P0", util=97, gen=(5, 5), width=(8, 16), dram_vol=2,
    reasons={}, remap_fail="Yes")


def _line_of(text: str, needle: str, after: str = "") -> int:
    lines = _lines(text)
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines) if i >= start and needle in line) + 1


def test_two_gpus_parsed() -> None:
    lines = _lines(TWO_GPUS)
    assert looks_like(lines)
    r = parse_smi_q(lines)
    assert (r.driver_version, r.attached_gpus, r.timestamp) == \
        ("535.183.01", 2, "Tue Oct  8 09:12:44 2024")
    g0, g1 = r.gpus
    assert [g0.bus_id, g1.bus_id] == ["0000:18:00.0", "0000:2a:00.0"]
    assert g0.line == _line_of(TWO_GPUS, "GPU 00000000:18:00.0")
    assert g0.clock_event_reasons_active == ("HW Slowdown", "HW Thermal Slowdown")
    assert g1.clock_event_reasons_active == ()
    assert (g0.pstate, g0.util_gpu_pct, g0.util_memory_pct, g0.fb_used_mib) == \
        ("P0", 98, 41, 76120)
    assert (g1.pcie_width_current, g1.pcie_width_max, g1.pcie_gen_current, g1.pcie_gen_max) == \
        (8, 16, 5, 5)
    assert (g1.ecc_mode, g1.ecc_volatile_uncorrectable, g1.ecc_aggregate_uncorrectable) == \
        ("Enabled", 2, 2)
    assert (g0.ecc_volatile_uncorrectable, g0.ecc_aggregate_uncorrectable) == (0, 0)
    assert (g1.remapped_rows_uncorrectable, g1.remapped_rows_pending, g1.remapping_failure) == \
        (2, False, True)
    assert g0.remapping_failure is False and g0.retired_pages_pending is None
    assert (g0.temp_c, g0.temp_tlimit_c, g0.mem_temp_c, g0.power_draw_w, g0.power_limit_w) == \
        (87, -2, 79, 612.4, 700)
    doc = json.loads(json.dumps(smi_q.explain(lines).parsed))
    assert doc["gpus"][0]["clock_event_reasons_active"] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert doc["gpus"][1]["pcie_width_current"] == 8


def test_two_gpus_findings() -> None:
    res = smi_q.explain(_lines(TWO_GPUS))
    by = {f.code: f for f in res.findings}
    assert set(by) == {"clocks-throttled", "pcie-link-downgraded", "ecc-uncorrectable",
                       "row-remap-failure"}
    assert all(f.step is Step.GPU for f in res.findings)
    t = by["clocks-throttled"]
    assert (t.severity, t.gpu) == (Severity.WARNING, "0000:18:00.0")
    assert t.line == _line_of(TWO_GPUS, "HW Slowdown  ") and t.evidence.startswith("HW Slowdown")
    assert "HW Thermal Slowdown" in t.summary and "87 C" in t.summary
    w = by["pcie-link-downgraded"]
    assert (w.severity, w.gpu, w.evidence) == (Severity.WARNING, "0000:2a:00.0",
                                               "Current                   : 8x")
    assert w.line == _line_of(TWO_GPUS, ": 8x")
    assert "x8 of x16" in w.summary
    e = by["ecc-uncorrectable"]
    assert (e.severity, e.gpu) == (Severity.CRITICAL, "0000:2a:00.0")
    assert e.line == _line_of(TWO_GPUS, "DRAM Uncorrectable            : 2")
    assert "2 volatile" in e.summary and e.extra["count_ecc"] == 2
    f = by["row-remap-failure"]
    assert (f.severity, f.evidence) == (Severity.CRITICAL,
                                        "Remapping Failure Occurred        : Yes")
    assert f.line == _line_of(TWO_GPUS, "Remapping Failure Occurred        : Yes")
    for x in res.findings:
        assert x.action and x.time == "Tue Oct  8 09:12:44 2024"
        assert x.to_json("q.txt")["line"] == x.line


def test_counters_alone_and_idle_reasons_are_not_throttling() -> None:
    text = TWO_GPUS.replace(": Active", ": Not Active").replace("Remapping Failure Occurred "
                                                               "       : Yes", "Remapping "
                                                               "Failure Occurred        : No")
    text = text.replace("DRAM Uncorrectable            : 2", "DRAM Uncorrectable            : 0")
    text = text.replace(": 8x", ": 16x")
    assert smi_q.explain(_lines(text)).findings == ()
    for benign in ("Idle", "Applications Clocks Setting", "Display Clock Setting"):
        one = text.replace(f"{benign:<34}: Not Active", f"{benign:<34}: Active", 1)
        assert one != text
        assert parse_smi_q(_lines(one)).gpus[0].clock_event_reasons_active == (benign,)
        assert smi_q.explain(_lines(one)).findings == ()


def test_sw_power_cap_counts_only_under_load() -> None:
    def report(pstate: str, util: int, limit: str = "700.00 W") -> list[str]:
        block = _gpu_block("00000000:18:00.0", pstate=pstate, util=util, gen=(5, 5),
                           width=(16, 16), dram_vol=0, reasons={"SW Power Cap": "Active"},
                           remap_fail="No")
        return _lines(HEADER + block.replace("Current Power Limit               : 700.00 W",
                                             f"Current Power Limit               : {limit}"))

    assert _found(report("P0", 100)) == {"clocks-throttled": Severity.INFO}
    assert _found(report("P8", 0)) == {}
    assert _found(report("P0", 0)) == {}
    assert _found(report("P0", 95, "450.00 W")) == {"clocks-throttled": Severity.WARNING}
    (f,) = smi_q.explain(report("P0", 95, "450.00 W")).findings
    assert "450 W" in f.summary and "default 700 W" in f.summary


def test_gen_below_max_is_info_under_load_and_nothing_when_idle() -> None:
    def report(pstate: str, util: int) -> list[str]:
        return _lines(HEADER + _gpu_block(
            "00000000:18:00.0", pstate=pstate, util=util, gen=(1, 5), width=(16, 16),
            dram_vol=0, reasons={}, remap_fail="No"))

    assert _found(report("P0", 80)) == {"pcie-link-downgraded": Severity.INFO}
    assert _found(report("P8", 0)) == {}
    assert _found(report("P0", 0)) == {}
    assert _found(report("P12", 3)) == {}
    (f,) = smi_q.explain(report("P2", 40)).findings
    assert f.evidence == "Current                   : 1" and "Gen1 of Gen5" in f.summary


def test_host_max_above_max_is_not_a_downgrade_and_max_missing_falls_back() -> None:
    text = TWO_GPUS.replace("Host Max                  : 5", "Host Max                  : 6")
    assert parse_smi_q(_lines(text)).gpus[0].pcie_gen_max == 5
    assert "pcie-link-downgraded" not in {
        f.code for f in smi_q.explain(_lines(text)).findings if f.gpu == "0000:18:00.0"}
    no_max = """\
GPU 00000000:41:00.0
    PCI
        GPU Link Info
            PCIe Generation
                Current                   : 3
                Device Current            : 3
                Device Max                : 4
                Host Max                  : 3
    Performance State                     : P0
"""
    (g,) = parse_smi_q(_lines(no_max)).gpus
    assert (g.pcie_gen_current, g.pcie_gen_max) == (3, 3)


def test_remap_pending_and_old_retired_pages_pending() -> None:
    text = HEADER + _gpu_block("00000000:18:00.0", pstate="P0", util=50, gen=(5, 5),
                               width=(16, 16), dram_vol=0, reasons={}, remap_fail="No",
                               remap_pending="Yes")
    result = smi_q.explain(_lines(text))
    (f,) = result.findings
    assert (f.code, f.severity, f.evidence) == ("row-remap-pending", Severity.WARNING,
                                                "Pending                           : Yes")
    (gpu,) = result.parsed["gpus"]  # type: ignore[attr-defined]
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": True,
                                    "failure": False}


OLD_V100 = """\
==============NVSMI LOG==============

Timestamp                           : Mon Jun  3 11:20:05 2019
Driver Version                      : 418.67
CUDA Version                        : 10.1

Attached GPUs                       : 1
GPU 00000000:86:00.0
    Product Name                    : Tesla V100-SXM2-32GB
    Performance State               : P0
    Clocks Throttle Reasons
        Idle                        : Not Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : Not Active
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : Not Active
            HW Power Brake Slowdown : Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
        Display Clock Setting       : Not Active
    Utilization
        Gpu                         : 100 %
        Memory                      : 62 %
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 3
                Register File       : 0
                Total               : 3
            Double Bit
                Device Memory       : 0
                Register File       : 0
                Total               : 0
        Aggregate
            Single Bit
                Device Memory       : 11
                Total               : 11
            Double Bit
                Device Memory       : 1
                Register File       : 0
                Total               : 1
    Retired Pages
        Single Bit ECC              : 0
        Double Bit ECC              : 1
        Pending                     : Yes
    Temperature
        GPU Current Temp            : 61 C
        GPU Shutdown Temp           : 90 C
        GPU Slowdown Temp           : 87 C
        GPU Max Operating Temp      : 83 C
        Memory Current Temp         : 58 C
        Memory Max Operating Temp   : 85 C
    Power Readings
        Power Management            : Supported
        Power Draw                  : 298.51 W
        Power Limit                 : 300.00 W
        Default Power Limit         : 300.00 W
        Enforced Power Limit        : 300.00 W
"""


def test_old_driver_keys() -> None:
    lines = _lines(OLD_V100)
    (g,) = parse_smi_q(lines).gpus
    assert g.clock_event_reasons_active == ("HW Power Brake Slowdown",)
    assert (g.ecc_volatile_uncorrectable, g.ecc_aggregate_uncorrectable) == (0, 1)
    assert (g.retired_pages_single_bit, g.retired_pages_double_bit, g.retired_pages_pending) == \
        (0, 1, True)
    assert (g.temp_c, g.temp_slowdown_c, g.temp_shutdown_c, g.temp_max_operating_c) == \
        (61, 87, 90, 83)
    assert (g.power_draw_w, g.power_limit_w, g.util_gpu_pct) == (298.51, 300, 100)
    by = {f.code: f for f in smi_q.explain(lines).findings}
    assert {c: f.severity for c, f in by.items()} == {
        "clocks-throttled": Severity.WARNING, "ecc-uncorrectable": Severity.CRITICAL,
        "retired-pages-pending": Severity.WARNING}
    agg_total = [i for i, line in enumerate(lines, 1) if line.strip() == "Total               : 1"]
    assert by["ecc-uncorrectable"].line == agg_total[-1]
    assert by["ecc-uncorrectable"].evidence == "Total               : 1"
    assert "0 volatile" in by["ecc-uncorrectable"].summary
    assert by["clocks-throttled"].evidence == "HW Power Brake Slowdown : Active"
    # a Double Bit block cut before its Total: the parts are summed
    cut = OLD_V100.replace("                Total               : 1\n", "")
    assert parse_smi_q(_lines(cut)).gpus[0].ecc_aggregate_uncorrectable == 1


def test_unavailable_markers_read_as_null() -> None:
    text = """\
GPU 00000000:01:00.0
    Product Name                          : [Not Supported]
    Performance State                     : Unknown Error
    Utilization
        Gpu                               : Requested functionality has been deprecated
    ECC Errors
        Volatile
            DRAM Uncorrectable            : [N/A]
    Remapped Rows                         : N/A
    Temperature
        GPU Current Temp                  : Not Supported
"""
    (g,) = parse_smi_q(_lines(text)).gpus
    assert (g.name, g.pstate, g.util_gpu_pct, g.ecc_volatile_uncorrectable, g.temp_c,
            g.remapping_failure) == (None,) * 6
    assert smi_q.explain(_lines(text)).findings == ()


# --- excerpts, many GPUs, lost GPUs -----------------------------------------------------------

def test_grep_excerpt_of_many_gpus_splits_into_anonymous_gpus() -> None:
    excerpt = "$ nvidia-smi -q | grep -A 4 'Clocks Event Reasons$'\n" + "--\n".join(
        "    Clocks Event Reasons\n"
        "        Idle                              : Not Active\n"
        "        Applications Clocks Setting       : Not Active\n"
        f"        SW Power Cap                      : {state}\n"
        "        HW Slowdown                       : Not Active\n"
        for state in ("Not Active", "Active", "Not Active"))
    lines = _lines(excerpt)
    assert looks_like(lines)
    r = parse_smi_q(lines)
    assert [g.bus_id for g in r.gpus] == [None, None, None]
    assert [g.clock_event_reasons_active for g in r.gpus] == [(), ("SW Power Cap",), ()]
    assert [g.line for g in r.gpus] == [2, 8, 14]
    (f,) = smi_q.explain(lines).findings
    assert (f.code, f.severity, f.gpu, f.line) == ("clocks-throttled", Severity.INFO, "GPU1", 11)


def test_grep_of_reason_lines_without_their_section_header() -> None:
    excerpt = """\
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
            HW Power Brake Slowdown       : Not Active
        SW Thermal Slowdown               : Not Active
        GPU Slowdown Temp                 : 87 C
"""
    assert looks_like(_lines(excerpt))
    (g,) = parse_smi_q(_lines(excerpt)).gpus
    assert g.clock_event_reasons_active == ("HW Slowdown", "HW Thermal Slowdown")
    assert _found(_lines(excerpt)) == {"clocks-throttled": Severity.WARNING}


def test_excerpt_without_gpu_line_keeps_bus_id_null() -> None:
    excerpt = """\
    Product Name                          : NVIDIA A100-SXM4-80GB
    PCI
        Bus Id                            : 00000000:07:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 4
                Current                   : 4
            Link Width
                Max                       : 16x
                Current                   : 4x
"""
    (g,) = parse_smi_q(_lines(excerpt)).gpus
    assert (g.bus_id, g.pci_bus_id, g.name, g.pcie_width_current) == \
        (None, "0000:07:00.0", "NVIDIA A100-SXM4-80GB", 4)
    assert g.clock_event_reasons_active is None
    (f,) = smi_q.explain(_lines(excerpt)).findings
    assert (f.code, f.gpu, f.line) == ("pcie-link-downgraded", "0000:07:00.0", 10)


def test_lost_gpu_lines() -> None:
    text = HEADER.replace(": 2", ": 3") + _gpu_block(
        "00000000:18:00.0", pstate="P0", util=10, gen=(5, 5), width=(16, 16), dram_vol=0,
        reasons={}, remap_fail="No") + (
        "Unable to determine the device handle for GPU 0000:DB:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU\n"
        "GPU 00000000:9A:00.0\n"
        "    Product Name                          : NVIDIA H100 80GB HBM3\n"
        "    Temperature\n"
        "        GPU Current Temp                  : GPU is lost\n")
    lines = _lines(text)
    r = parse_smi_q(lines)
    assert [g.bus_id for g in r.gpus] == ["0000:18:00.0", "0000:9a:00.0"]
    assert r.gpus[1].temp_c is None and len(r.errors) == 1
    res = smi_q.explain(lines)
    (f,) = res.findings
    assert (f.code, f.severity, f.count) == ("gpu-lost", Severity.CRITICAL, 2)
    assert f.gpu == "0000:db:00.0" and f.evidence.startswith("Unable to determine")
    assert f.extra["gpus"] == ["0000:db:00.0", "0000:9a:00.0"]


def test_two_section_reports_of_one_gpu_are_merged() -> None:
    perf = _fixture("16-")
    pcie = """\
$ nvidia-smi -q -d PCIE

==============NVSMI LOG==============

Timestamp                                 : Sun Dec  5 09:14:30 2021
Driver Version                            : 495.44
CUDA Version                              : 11.5

Attached GPUs                             : 1
GPU 00000000:0B:00.0
    PCI
        GPU Link Info
            PCIe Generation
                Max                       : 3
                Current                   : 1
            Link Width
                Max                       : 16x
                Current                   : 16x
"""
    lines = perf + _lines(pcie)
    r = parse_smi_q(lines)
    (g,) = r.gpus
    assert len(r.blocks) == 2
    assert (g.clock_event_reasons_active, g.pstate, g.pcie_gen_current, g.pcie_gen_max) == \
        (("Idle",), "P8", 1, 3)
    assert smi_q.explain(lines).findings == ()  # Gen1 at P8 is power saving


# --- messy input --------------------------------------------------------------------------------

def test_crlf_and_cr_left_in_lines() -> None:
    want = parse_smi_q(_lines(TWO_GPUS)).gpus
    crlf = TWO_GPUS.replace("\n", "\r\n")
    assert parse_smi_q(split_lines(decode(crlf.encode()))).gpus == want
    assert parse_smi_q(crlf.split("\n")).gpus == want
    assert looks_like(crlf.split("\n"))
    assert {f.code for f in smi_q.explain(crlf.split("\n")).findings} == {
        f.code for f in smi_q.explain(_lines(TWO_GPUS)).findings}


def test_trailing_spaces_fences_quotes_and_host_prefixes() -> None:
    base = parse_smi_q(_lines(TWO_GPUS))
    variants = [
        [line + "   " for line in _lines(TWO_GPUS)],
        ["```", *_lines(TWO_GPUS), "```"],
        ["> " + line if line else ">" for line in _lines(TWO_GPUS)],
        [f"gpu07: {line}" for line in _lines(TWO_GPUS)],
        [f"[rank3]: {line}" for line in _lines(TWO_GPUS)],
        [line.replace("        ", "\t") for line in _lines(TWO_GPUS)],
    ]
    for v in variants:
        assert looks_like(v)
        r = parse_smi_q(v)
        assert [(g.bus_id, g.clock_event_reasons_active, g.pcie_width_current,
                 g.ecc_volatile_uncorrectable, g.remapping_failure, g.temp_c) for g in r.gpus] \
            == [(g.bus_id, g.clock_event_reasons_active, g.pcie_width_current,
                 g.ecc_volatile_uncorrectable, g.remapping_failure, g.temp_c) for g in base.gpus]
        assert len(smi_q.explain(v).findings) == 4


def test_truncation_at_every_line_and_mid_line() -> None:
    lines = _lines(TWO_GPUS)
    full = {"0000:18:00.0", "0000:2a:00.0"}
    for n in range(len(lines) + 1):
        r = parse_smi_q(lines[:n])
        assert {g.bus_id for g in r.gpus} <= full
        smi_q.explain(lines[:n])
    # a value cut before its unit is not a smaller number, a cut reason is not Active
    temp = _line_of(TWO_GPUS, "GPU Current Temp")
    cut = [*lines[:temp - 1], lines[temp - 1].rstrip(" C")[:-1]]
    assert cut[-1].endswith(": 8")
    assert parse_smi_q(cut).gpus[0].temp_c is None
    hw = _line_of(TWO_GPUS, "HW Slowdown  ")
    cut = [*lines[:hw - 1], lines[hw - 1][:-2]]
    assert cut[-1].endswith(": Acti")
    assert parse_smi_q(cut).gpus[0].clock_event_reasons_active == ()
    # cut inside the GPU line: the block's fields go to an anonymous GPU, not the wrong bus
    gpu2 = _line_of(TWO_GPUS, "GPU 00000000:2A")
    chopped = [*lines[:gpu2 - 1], lines[gpu2 - 1][:10], *lines[gpu2:]]
    r = parse_smi_q(chopped)
    assert r.gpus[0].bus_id == "0000:18:00.0" and r.gpus[0].pcie_width_current == 16


def test_fuzz_never_raises() -> None:
    rng = random.Random(20240607)
    sources = [TWO_GPUS, OLD_V100, HEADER]
    sources += [decode(fixture_input(p)) for p in MINE]
    junk = [" : ", "GPU ", "00000000:3B:00.0", "\t", "    ", "\ufffd", "Active", "--", "\r",
            "Clocks Event Reasons", "Double Bit", "x", ":", "==============NVSMI LOG"]
    for _ in range(400):
        text = rng.choice(sources)
        text = text[:rng.randrange(len(text) + 1)]
        chars = list(text)
        for _ in range(rng.randrange(12)):
            pos = rng.randrange(len(chars) + 1)
            piece = rng.choice(junk) if rng.random() < 0.6 else chr(rng.randrange(1, 0x2FFF))
            chars[pos:pos] = piece
        raw = "".join(chars).encode("utf-8", "replace")
        if rng.random() < 0.3:
            raw = bytes(b ^ 0xFF if rng.random() < 0.02 else b for b in raw)
        lines = split_lines(decode(raw))
        looks_like(lines)
        res = smi_q.explain(lines)
        json.dumps(res.parsed)
        for f in res.findings:
            assert f.line >= 1 and f.step is Step.GPU
            json.dumps(f.to_json("x"))


# --- the recogniser ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "+-----------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |\n"
    "|-------------------------------+----------------------+----------------------+\n",
    "name, pci.bus_id, temperature.gpu, clocks_throttle_reasons.active\n"
    "NVIDIA H100 80GB HBM3, 00000000:18:00.0, 33, 0x0000000000000001\n",
    "# gpu    pwr  gtemp  mtemp     sm    mem\n# Idx      W      C      C      %      %\n"
    "    0     71     33     40      0      0\n",
    "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-23\nGPU1\tNV12\t X \t0-23\n",
    "3b:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)\n"
    "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16\n\t\tLnkSta:\tSpeed 16GT/s, Width x16\n",
    "[ 12.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01\n"
    "host1:412:412 [0] NCCL INFO IB NIC distance :  PIX\n"
    "    Temperature : unknown\n"
    "    value : 3\n",
    "",
])
def test_recogniser_rejects(text: str) -> None:
    assert not looks_like(_lines(text))


def test_recogniser_accepts_two_known_fields() -> None:
    assert looks_like(["    Product Name       : Tesla T4", "    Performance State  : P0"])
    assert looks_like(["GPU 00000000:3B:00.0", "    Temperature"])
    assert not looks_like(["    Product Name       : Tesla T4"])
