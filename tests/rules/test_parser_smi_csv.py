"""The shared cell rule (``smi_cells``) and the ``nvidia-smi --query-*`` CSV parser: shared
fixtures, formats they lack (multi-GPU, pdsh prefixes, quoting, CRLF, cuts, noheader with an
echoed command, old field names), every finding that should and should not fire, the
recogniser, and a fuzz test."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from probes.analysis import judge
from probes.rules.parsers import smi_csv
from probes.rules.parsers.smi_cells import UNIT_NAMES, cell_value, is_unavailable, to_number
from probes.rules.parsers.smi_csv import looks_like, normalize_field, parse_smi_csv, split_cells
from probes.rules.text import decode, split_lines
from probes.triage import Severity, Step
from tests.conftest import FIXTURES, REPO
from tests.support.explain_expect import (
    expectation,
    finding_set,
    fixture_input,
    garble,
    subset_mismatches,
)

ALL = sorted(FIXTURES.glob("*/*.txt"))
MINE = [p for p in ALL if expectation(p)["kind"] == smi_csv.KIND]
OTHERS = [p for p in ALL if expectation(p)["kind"] != smi_csv.KIND]
HEALTHY = sorted((REPO / "tests" / "data" / "healthy").glob("*.txt"))


def _lines(text: str) -> list[str]:
    return split_lines(text)


def _codes(text: str) -> dict[tuple[str, str | None], Severity]:
    return {(f.code, f.gpu): f.severity for f in smi_csv.explain(_lines(text)).findings}


# --- the cell rule ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,want", [
    ("81559 MiB", 81559), ("71.42 W", 71.42), ("100.00 %", 100.0), ("0 us", 0),
    ("1980 MHz", 1980), ("44 C", 44), ("  12 KB/s ", 12), ("38 %", 38), ("61", 61),
    ("1650124078813", 1650124078813), ("2.1", 2.1), ("9.0", 9.0), ("-3", -3),
    ("P0", "P0"), ("590.48.01", "590.48.01"), ("0x0000", "0x0000"), ("0x0B", "0x0B"),
    ("00000000:00:0B.0", "00000000:00:0B.0"),
    ("2026/03/02 14:27:05.113", "2026/03/02 14:27:05.113"),
    ("GPU-4f1c2a9e-7d3b-4e6a-9c2f-8b5d0e1a3c77", "GPU-4f1c2a9e-7d3b-4e6a-9c2f-8b5d0e1a3c77"),
    ("None", "None"), ("No", "No"), ("Disabled", "Disabled"),
    ("Direct Connected", "Direct Connected"), ("Single Bit ECC", "Single Bit ECC"),
    ("N/A", None), ("[N/A]", None), ("[Not Supported]", None), ("", None), ("   ", None),
    ("[Requested functionality has been deprecated]", None), ("[Unknown Error]", None),
    ("[GPU is lost]", None), ("[Insufficient Permissions]", None), ("n/a", None),
    ("5 parrots", "5 parrots"), ("1e5", "1e5"), (".5", ".5"), ("5.", "5."), ("12MiB", "12MiB"),
    ("MiB", "MiB"), ("- W", "- W"),
])
def test_cell_value(text: str, want: object) -> None:
    got = cell_value(text)
    assert got == want and type(got) is type(want)


def test_dash_is_null_only_when_asked() -> None:
    assert cell_value("-") == "-"
    assert cell_value(" - ", dash_is_null=True) is None
    assert cell_value("--", dash_is_null=True) == "--"
    assert is_unavailable("-", dash_is_null=True) and not is_unavailable("-")


def test_unit_list_and_number_helper() -> None:
    assert {"W", "MiB", "MHz", "%", "us", "C", "KB/s"} <= set(UNIT_NAMES)
    assert to_number("700.00 W") == 700.0 and isinstance(to_number("700 W"), int)
    assert to_number("P0") is None and to_number("[N/A]") is None


def test_field_names_normalise_across_drivers() -> None:
    assert normalize_field("fan.speed [%]") == "fan.speed"
    assert normalize_field("Utilization.GPU [%]") == "utilization.gpu"
    assert normalize_field("clocks_throttle_reasons.hw_slowdown") == \
        "clocks_event_reasons.hw_slowdown"
    assert normalize_field("gpu_bus_id") == "pci.bus_id"
    assert normalize_field("used_gpu_memory [MiB]") == "used_memory"


def test_throttle_reasons_match_the_live_rules() -> None:
    assert smi_csv.THROTTLE_REASONS == judge.THROTTLE_REASONS


def test_split_cells() -> None:
    assert split_cells("a, b,c ,") == ["a", "b", "c", ""]
    assert split_cells('0, "python train.py, rank 0", 512 MiB') == \
        ["0", "python train.py, rank 0", "512 MiB"]
    assert split_cells('"say ""hi""", x') == ['say "hi"', "x"]
    assert split_cells('1, "unclosed, cell') == ["1", "unclosed, cell"]
    assert split_cells("") == [""]


# --- the samples (tests/fixtures/samples) ---------------------------------------------

@pytest.mark.parametrize("sample", MINE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path) -> None:
    want = expectation(sample)
    lines = split_lines(decode(fixture_input(sample)))
    assert looks_like(lines)
    got = smi_csv.explain(lines)
    assert got.kind == want["kind"]
    parsed = json.loads(json.dumps(got.parsed))
    assert subset_mismatches(want["parsed"], parsed) == []
    if "columns" not in want["parsed"]:
        assert "columns" not in parsed
    docs = [f.to_json(sample.name) for f in got.findings]
    assert finding_set(docs) == finding_set(want["findings"])


@pytest.mark.parametrize("sample", OTHERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recogniser_does_not_claim_other_kinds(sample: Path) -> None:
    assert not looks_like(split_lines(decode(fixture_input(sample))))


@pytest.mark.parametrize("sample", HEALTHY, ids=lambda p: p.stem)
def test_recogniser_does_not_claim_healthy_logs(sample: Path) -> None:
    assert not looks_like(split_lines(decode(sample.read_bytes())))


def test_the_fixtures_are_there() -> None:
    assert {p.name[:2] for p in MINE} >= {"02", "04", "06", "22"}
    assert len(OTHERS) >= 50 and len(HEALTHY) >= 3


def test_fixture_details_beyond_the_expectation() -> None:
    (win,) = [p for p in MINE if p.name.startswith("22-")]
    csv = parse_smi_csv(split_lines(decode(fixture_input(win))))
    (row,) = csv.rows
    assert csv.main is not None and csv.main.query == "gpu" and csv.main.columns is None
    assert (row.value("gpu_name"), row.value("name"), row.value("fan.speed"),
            row.value("temperature.gpu"), row.value("power.draw")) == \
        ("GeForce GTX 760", "GeForce GTX 760", 38, 61, None)
    assert row.raw("utilization.gpu") == "[Not Supported]" and row.line == 2
    (h100,) = [p for p in MINE if p.name.startswith("02-")]
    (row,) = parse_smi_csv(split_lines(decode(fixture_input(h100)))).rows
    assert len(row.cells) == 212 and not row.cut
    assert (row.value("pci.bus_id"), row.value("clocks_event_reasons.gpu_idle"),
            row.value("platform.chassis_serial_number"), row.value("memory.total")) == \
        ("00000000:00:0B.0", "Active", None, 81559)
    (p100,) = [p for p in MINE if p.name.startswith("06-")]
    raw = fixture_input(p100)
    assert not raw.endswith(b"\n")
    (row,) = parse_smi_csv(split_lines(decode(raw))).rows
    assert row.values[-1] == 1063 and not row.cut


# --- hand-made cases: multi-GPU and the findings ---------------------------------------------

HEAD = ("index, pci.bus_id, pstate, utilization.gpu [%], clocks_event_reasons.gpu_idle, "
        "clocks_event_reasons.applications_clocks_setting, clocks_event_reasons.sw_power_cap, "
        "clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, "
        "clocks_event_reasons.sw_thermal_slowdown, pcie.link.gen.gpucurrent, pcie.link.gen.max, "
        "pcie.link.width.current, pcie.link.width.max, ecc.errors.uncorrected.volatile.total, "
        "ecc.errors.uncorrected.aggregate.total, retired_pages.pending, remapped_rows.failure")
NA = "Not Active"


def _gpu(i: int, bus: str, pstate: str = "P0", util: str = "97 %", idle: str = NA,
         apps: str = NA, cap: str = NA, hw: str = NA, hwt: str = NA, swt: str = NA,
         gen: str = "5", gen_max: str = "5", width: str = "16", width_max: str = "16",
         vol: str = "0", agg: str = "0", pend: str = "No", fail: str = "No") -> str:
    return ", ".join([str(i), f"00000000:{bus}:00.0", pstate, util, idle, apps, cap, hw, hwt,
                      swt, gen, gen_max, width, width_max, vol, agg, pend, fail])


def test_eight_healthy_gpus_no_finding() -> None:
    text = "\n".join([HEAD, *(_gpu(i, b) for i, b in
                              enumerate(["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]))])
    lines = _lines(text)
    assert looks_like(lines)
    res = smi_csv.explain(lines)
    assert res.findings == ()
    rows = res.parsed["rows"]
    assert isinstance(rows, list) and len(rows) == 8 and rows[7][1] == "00000000:DB:00.0"
    assert rows[0][3] == 97 and rows[0][4] == "Not Active"


def test_throttle_reasons_fire_and_idle_ones_do_not() -> None:
    text = "\n".join([
        HEAD,
        _gpu(0, "18", hw="Active"),
        _gpu(1, "2A", hwt="Active", util="0 %", pstate="P8"),
        _gpu(2, "3A", swt="Active"),
        _gpu(3, "5D", cap="Active", util="95 %"),
        _gpu(4, "9A", cap="Active", util="0 %"),
        _gpu(5, "AB", idle="Active", util="0 %"),
        _gpu(6, "BA", apps="Active"),
    ])
    got = {g for (c, g) in _codes(text) if c == "clocks-throttled"}
    assert got == {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"}
    res = smi_csv.explain(_lines(text))
    f = next(f for f in res.findings if f.gpu == "0000:5d:00.0")
    assert (f.step, f.severity, f.line, f.extra["reasons"]) == \
        (Step.GPU, Severity.WARNING, 5, ["sw_power_cap"])
    assert f.evidence.startswith("3, 00000000:5D:00.0")


def test_old_throttle_names_and_the_active_bitmask() -> None:
    old = ("index, pci.bus_id, utilization.gpu [%], clocks_throttle_reasons.hw_slowdown, "
           "clocks_throttle_reasons.sw_power_cap\n"
           "0, 00000000:3B:00.0, 80 %, Active, Not Active\n"
           "1, 00000000:5E:00.0, 80 %, Not Active, Not Active\n")
    assert set(_codes(old)) == {("clocks-throttled", "0000:3b:00.0")}
    mask = ("index, utilization.gpu [%], clocks_event_reasons.active\n"
            "0, 0 %, 0x0000000000000001\n"      # idle
            "1, 50 %, 0x0000000000000004\n"     # power cap under load
            "2, 0 %, 0x0000000000000004\n"      # power cap while idle: no
            "3, 0 %, 0x0000000000000040\n"      # hw thermal
            "4, 90 %, 0x0000000000000102\n")    # display + applications clocks
    assert set(_codes(mask)) == {("clocks-throttled", "GPU1"), ("clocks-throttled", "GPU3")}


def test_pcie_width_warning_speed_info_and_idle_speed_nothing() -> None:
    text = "\n".join([
        HEAD,
        _gpu(0, "18", width="8"),
        _gpu(1, "2A", gen="1", util="0 %", pstate="P8"),
        _gpu(2, "3A", gen="3", util="60 %"),
        _gpu(3, "5D", gen="1", util="0 %", pstate="P0"),
        _gpu(4, "9A", gen="1", width="4", util="0 %", pstate="P8"),
    ])
    got = {g: s for (c, g), s in _codes(text).items() if c == "pcie-link-downgraded"}
    assert got == {"0000:18:00.0": Severity.WARNING, "0000:3a:00.0": Severity.INFO,
                   "0000:9a:00.0": Severity.WARNING}


def test_pcie_speed_without_load_information_is_info() -> None:
    text = ("pci.bus_id, pcie.link.gen.current, pcie.link.gen.gpumax, pcie.link.gen.hostmax\n"
            "00000000:01:00.0, 2, 4, 3\n"
            "00000000:02:00.0, 3, 4, 3\n")
    assert _codes(text) == {("pcie-link-downgraded", "0000:01:00.0"): Severity.INFO}


def test_memory_health_findings() -> None:
    text = "\n".join([
        HEAD,
        _gpu(0, "18", vol="2", agg="2"),
        _gpu(1, "2A", agg="1"),
        _gpu(2, "3A", pend="Yes"),
        _gpu(3, "5D", fail="Yes"),
        _gpu(4, "9A", vol="[N/A]", agg="[N/A]", pend="[N/A]", fail="[N/A]"),
    ])
    assert _codes(text) == {
        ("ecc-uncorrectable", "0000:18:00.0"): Severity.CRITICAL,
        ("ecc-uncorrectable", "0000:2a:00.0"): Severity.INFO,
        ("retired-pages-pending", "0000:3a:00.0"): Severity.WARNING,
        ("row-remap-failure", "0000:5d:00.0"): Severity.CRITICAL,
    }


def test_ecc_counters_without_a_total_column() -> None:
    text = ("index, ecc.errors.uncorrected.volatile.dram, ecc.errors.uncorrected.volatile.sram\n"
            "0, 0, 0\n1, 0, 3\n")
    assert _codes(text) == {("ecc-uncorrectable", "GPU1"): Severity.CRITICAL}


def test_query_remapped_rows_counts() -> None:
    text = ("$ nvidia-smi --query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,"
            "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure "
            "--format=csv\n"
            "gpu_bus_id, gpu_uuid, remapped_rows.correctable, remapped_rows.uncorrectable, "
            "remapped_rows.pending, remapped_rows.failure\n"
            "00000000:07:00.0, GPU-11111111-2222-3333-4444-555555555555, 0, 0, 0, 0\n"
            "00000000:0F:00.0, GPU-66666666-2222-3333-4444-555555555555, 2, 1, 0, 1\n")
    lines = _lines(text)
    assert looks_like(lines)
    assert _codes(text) == {("row-remap-failure", "0000:0f:00.0"): Severity.CRITICAL}
    assert smi_csv.explain(lines).parsed["columns"] == [
        "gpu_bus_id", "gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable",
        "remapped_rows.pending", "remapped_rows.failure"]


def test_retired_pages_with_addresses_are_no_finding() -> None:
    text = ("gpu_bus_id, retired_pages.address, retired_pages.timestamp, retired_pages.cause\n"
            "00000000:04:00.0, 0x000000000001f2a0, 2024/01/02 10:00:00.000, Double Bit ECC\n"
            "00000000:04:00.0, [N/A], [N/A], Single Bit ECC\n")
    res = smi_csv.explain(_lines(text))
    assert res.findings == ()
    assert res.parsed["rows"] == [
        ["00000000:04:00.0", "0x000000000001f2a0", "2024/01/02 10:00:00.000", "Double Bit ECC"],
        ["00000000:04:00.0", None, None, "Single Bit ECC"]]


def test_gpu_lost_from_error_lines_and_cells() -> None:
    text = ("index, pci.bus_id, name, temperature.gpu, utilization.gpu [%], power.draw [W]\n"
            "0, 00000000:18:00.0, NVIDIA H100 80GB HBM3, 33, 0 %, 70.10 W\n"
            "1, 00000000:2A:00.0, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]\n"
            "2, 00000000:3A:00.0, NVIDIA H100 80GB HBM3, [Unknown Error], 0 %, 71.00 W\n"
            "Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error\n")
    lines = _lines(text)
    assert looks_like(lines)
    res = smi_csv.explain(lines)
    # one [Unknown Error] cell beside readable ones is a sensor, not a lost GPU (#24)
    assert _codes(text) == {("gpu-lost", "0000:2a:00.0"): Severity.CRITICAL,
                            ("gpu-sensor-unreadable", "0000:3a:00.0"): Severity.WARNING,
                            ("gpu-lost", "0000:8a:00.0"): Severity.CRITICAL}
    assert res.parsed["errors"] == [
        "Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error"]
    rows = res.parsed["rows"]
    assert isinstance(rows, list) and rows[1][2:] == [None] * 4 and len(rows) == 3


def test_pdsh_prefixes_repeated_headers_and_hosts_kept_apart() -> None:
    head = "index, pci.bus_id, utilization.gpu [%], clocks_event_reasons.hw_slowdown"
    text = "\n".join([
        f"gpu01: {head}", "gpu01: 0, 00000000:18:00.0, 90 %, Active",
        f"gpu02: {head}", "gpu02: 0, 00000000:18:00.0, 90 %, Active",
        "gpu02: 1, 00000000:2A:00.0, 90 %, Not Active",
        "gpu01: 0, 00000000:18:00.0, 92 %, Active"])
    lines = _lines(text)
    assert looks_like(lines)
    csv = parse_smi_csv(lines)
    assert [(r.host, r.values[0]) for r in csv.rows] == [
        ("gpu01", 0), ("gpu02", 0), ("gpu02", 1), ("gpu01", 0)]
    res = smi_csv.explain(lines)
    assert res.parsed["columns"] == [c.strip() for c in head.split(",")]
    got = sorted((f.extra["host"], f.gpu, f.count) for f in res.findings)
    assert got == [("gpu01", "0000:18:00.0", 2), ("gpu02", "0000:18:00.0", 1)]


def test_crlf_quotes_trailing_spaces_and_fence() -> None:
    text = ("```\r\npid, process_name, used_gpu_memory [MiB]  \r\n"
            '4242, "python train.py --name a,b", 20480 MiB  \r\n'
            "4243, /usr/bin/python3, 512 MiB\r\n```\r\n")
    for lines in (split_lines(decode(text.encode())), text.split("\n")):
        assert looks_like(lines)
        res = smi_csv.explain(lines)
        assert res.parsed["columns"] == ["pid", "process_name", "used_gpu_memory [MiB]"]
        assert res.parsed["rows"] == [[4242, "python train.py --name a,b", 20480],
                                      [4243, "/usr/bin/python3", 512]]
        assert res.findings == ()


def test_cut_last_row_keeps_its_complete_cells() -> None:
    head = "index, pci.bus_id, power.draw [W], power.limit [W], memory.used [MiB]"
    full = "1, 00000000:2A:00.0, 644.10 W, 700.00 W, 27412 MiB"
    for cut_at, want in [(full.rindex(",") - 1, [1, "00000000:2A:00.0", 644.1]),
                         (full.index("700") + 1, [1, "00000000:2A:00.0", 644.1]),
                         (full.index("700") - 1, [1, "00000000:2A:00.0", 644.1]),
                         (3, [1]), (1, None)]:
        text = f"{head}\n0, 00000000:18:00.0, 70.00 W, 700.00 W, 4 MiB\n{full[:cut_at]}"
        csv = parse_smi_csv(_lines(text))
        got = [list(r.values) for r in csv.rows]
        assert got[0] == [0, "00000000:18:00.0", 70.0, 700.0, 4]
        if want is None:
            assert len(got) == 1
        else:
            assert got[1] == want and csv.rows[1].cut
    # a cut inside the last cell of a full-width row cannot be told from a value
    (_, last) = parse_smi_csv(_lines(f"{head}\n0, a, 1 W, 2 W, 3 MiB\n{full[:-5]}")).rows
    assert last.values[-1] == 2741 and not last.cut


def test_noheader_nounits_with_a_wrapped_command_line() -> None:
    text = ("user@node7:~$ nvidia-smi --query-gpu=index,pci.bus_id,utilization.gpu,"
            "clocks_throttle_reasons.hw_thermal_slowdown,pcie.link.width.current,"
            "pcie.link.width.max \\\n"
            "    --format=csv,noheader,nounits\n"
            "0, 00000000:18:00.0, 100, Not Active, 16, 16\n"
            "1, 00000000:2A:00.0, 100, Active, 8, 16\n")
    lines = _lines(text)
    assert looks_like(lines)
    res = smi_csv.explain(lines)
    assert "columns" not in res.parsed
    assert res.parsed["rows"] == [[0, "00000000:18:00.0", 100, "Not Active", 16, 16],
                                  [1, "00000000:2A:00.0", 100, "Active", 8, 16]]
    assert _codes(text) == {("clocks-throttled", "0000:2a:00.0"): Severity.WARNING,
                            ("pcie-link-downgraded", "0000:2a:00.0"): Severity.WARNING}


def test_headerless_rows_without_a_command_line() -> None:
    text = ("NVIDIA A100-SXM4-80GB, 00000000:07:00.0, [N/A], 31, P0\n"
            "NVIDIA A100-SXM4-80GB, 00000000:0F:00.0, [N/A], 29, P0\n")
    lines = _lines(text)
    assert looks_like(lines)
    res = smi_csv.explain(lines)
    assert "columns" not in res.parsed and len(res.parsed["rows"]) == 2  # type: ignore[arg-type]
    lost = text.replace("[N/A], 29", "[GPU is lost], [GPU is lost]")
    assert _codes(lost) == {("gpu-lost", "0000:0f:00.0"): Severity.CRITICAL}


def test_single_column_query() -> None:
    text = "$ nvidia-smi --query-gpu=pci.bus_id --format=csv\npci.bus_id\n00000000:18:00.0\n" \
           "00000000:2A:00.0\n"
    lines = _lines(text)
    assert looks_like(lines)
    assert smi_csv.explain(lines).parsed["rows"] == [["00000000:18:00.0"], ["00000000:2A:00.0"]]


def test_looped_query_with_repeated_command_merges_rows() -> None:
    block = ("$ nvidia-smi --query-gpu=index,temperature.gpu --format=csv\n"
             "index, temperature.gpu\n0, 41\n1, 43\n")
    res = smi_csv.explain(_lines(block + block.replace("41", "42")))
    assert res.parsed["rows"] == [[0, 41], [1, 43], [0, 42], [1, 43]]


def test_second_query_with_other_columns_is_a_block_of_its_own() -> None:
    text = ("index, pci.bus_id, utilization.gpu [%]\n0, 00000000:18:00.0, 5 %\n"
            "pid, process_name, used_gpu_memory [MiB]\n77, python, 100 MiB\n")
    csv = parse_smi_csv(_lines(text))
    assert [b.columns for b in csv.blocks] == [
        ("index", "pci.bus_id", "utilization.gpu [%]"),
        ("pid", "process_name", "used_gpu_memory [MiB]")]
    assert smi_csv.explain(_lines(text)).parsed["rows"] == [[0, "00000000:18:00.0", 5]]


@pytest.mark.parametrize("text", [
    "epoch, step, loss\n1, 100, 2.31\n1, 200, 2.27\n",
    "loss=2.31, lr=0.0003, step=100\nloss=2.27, lr=0.0003, step=200\n",
    "[  14.2] NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>\n"
    "[  14.3] NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.\n",
    "Device            r/s     w/s     rkB/s\nsda              1,00    2,00    4,00\n",
    "Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error\n",
    "name, index\nfoo, 1\n" + "a log line, with a comma\n" * 10,
    "", "\n\n", "```\n```\n",
])
def test_not_claimed(text: str) -> None:
    assert not looks_like(_lines(text))


def test_empty_inputs_never_fail() -> None:
    for lines in ([], [""], ["   "]):
        res = smi_csv.explain(lines)
        assert res.parsed["rows"] == [] and "columns" not in res.parsed and res.findings == ()


def test_row_dataclass_is_frozen() -> None:
    (row,) = parse_smi_csv(["index, name", "0, x"]).rows
    with pytest.raises(AttributeError):
        row.line = 3  # type: ignore[misc]


# --- never raise --------------------------------------------------------------------------------

def _corpus() -> list[list[str]]:
    out = [_lines("\n".join([HEAD, _gpu(0, "18", hw="Active"), _gpu(1, "2A", width="8")]))]
    out.append(_lines('$ nvidia-smi --query-compute-apps=pid,process_name --format=csv\n'
                      'pid, process_name\n1, "a, b"\n'))
    out += [split_lines(decode(fixture_input(p))) for p in MINE]
    return out


def test_truncation_at_every_line_and_char_never_raises() -> None:
    for lines in _corpus():
        for n in range(len(lines) + 1):
            smi_csv.explain(lines[:n])
            looks_like(lines[:n])
            if n < len(lines):
                step = max(1, len(lines[n]) // 60)
                for k in range(0, len(lines[n]), step):
                    res = smi_csv.explain([*lines[:n], lines[n][:k]])
                    json.dumps(res.parsed)


def test_random_garbage_never_raises() -> None:
    rng = random.Random(4321)
    alphabet = ',"[] N/A%WMiB0123456789x:.-_\t\ufffd`$\\=Active'
    base = _corpus()
    for _ in range(300):
        lines = garble(rng, list(rng.choice(base)), alphabet)
        looks_like(lines)
        res = smi_csv.explain(lines)
        json.dumps(res.parsed)
        for f in res.findings:
            assert f.line >= 1 and f.step is Step.GPU
    raw = bytes(rng.randrange(256) for _ in range(5000))
    smi_csv.explain(split_lines(decode(raw)))
    looks_like(split_lines(decode(raw)))
