"""The plain ``nvidia-smi`` table parser: the samples, formats they lack (ERR! rows, MIG
boxes, CRLF, cuts, wide 5xx layouts, quoting), the recogniser, and a fuzz test."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from probes.rules.parsers import smi_table
from probes.rules.parsers.smi_table import SmiTableGpu, looks_like, parse_smi_table
from probes.rules.text import decode, split_lines
from probes.triage import Severity, Step
from tests.conftest import FIXTURES
from tests.support.explain_expect import (
    expectation,
    finding_set,
    fixture_input,
    garble,
    subset_mismatches,
)

ALL = sorted(FIXTURES.glob("*/*.txt"))
MINE = [p for p in ALL if expectation(p)["kind"] == smi_table.KIND]
OTHERS = [p for p in ALL if expectation(p)["kind"] != smi_table.KIND]


def _lines(text: str) -> list[str]:
    return split_lines(text)


def _keys(lines: list[str]) -> set[tuple[str, str, int | None]]:
    return {f.key for f in smi_table.explain(lines).findings}


# --- the samples (tests/fixtures/samples) ---------------------------------------------

@pytest.mark.parametrize("sample", MINE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path) -> None:
    want = expectation(sample)
    lines = split_lines(decode(fixture_input(sample)))
    assert looks_like(lines)
    got = smi_table.explain(lines)
    assert got.kind == want["kind"]
    parsed = json.loads(json.dumps(got.parsed))
    assert subset_mismatches(want["parsed"], parsed) == []
    docs = [f.to_json(sample.name) for f in got.findings]
    assert finding_set(docs) == finding_set(want["findings"])
    for f in got.findings:
        assert f.line >= 1 and f.evidence and f.step is Step.GPU


@pytest.mark.parametrize("sample", OTHERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recogniser_does_not_claim_other_kinds(sample: Path) -> None:
    assert not looks_like(split_lines(decode(fixture_input(sample))))


def test_the_fixtures_are_there() -> None:
    assert {p.name[:2] for p in MINE} >= {"08", "10", "12", "24", "26", "28"}
    assert len(OTHERS) >= 50


def test_fixture_details_beyond_the_expectation() -> None:
    (h100,) = [p for p in MINE if p.name.startswith("08-")]
    t = parse_smi_table(split_lines(decode(fixture_input(h100))))
    assert (t.driver_version, t.cuda_version) == ("590.48.01", "13.1")
    (g,) = t.gpus
    assert (g.persistence, g.perf, g.compute_mode, g.mig_mode, g.ecc_uncorr) == \
        ("On", "P0", "Default", "Disabled", 0)
    assert [(p.pid, p.type, p.name, p.mem_mib) for p in t.processes] == [
        (20731, "C", "/opt/burnin/bin/hbmfill", 4102),
        (20733, "C", "/opt/burnin/bin/hbmfill", 2054),
        (20790, "C", "./cuda_stress", 21236)]
    (legacy,) = [p for p in MINE if p.name.startswith("26-")]
    t = parse_smi_table(split_lines(decode(fixture_input(legacy))))
    assert t.timestamp == "Thu Mar 12 19:07:41 2026"
    assert (t.gpus[0].fan_pct, t.gpus[0].perf, t.processes) == (100, "P12", ())


# --- hand-made cases: formats the fixtures lack ---------------------------------------------

H100_ERR = """\
Tue Oct  8 09:12:44 2024
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
""" + "".join(
    f"""\
|   {i}  NVIDIA H100 80GB HBM3          On  | 00000000:{bus}:00.0 Off |                    0 |
| N/A   3{i}C    P0             11{i}W / 700W |      4MiB / 81559MiB |      0%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
""" if i != 5 else f"""\
|   {i}  ERR!                           On  | 00000000:{bus}:00.0 Off |                 ERR! |
|ERR!  ERR!  ERR!             ERR! / ERR! |      0MiB / 81559MiB |    ERR!      Default |
|                                         |                      |                 ERR! |
+-----------------------------------------+----------------------+----------------------+
""" for i, bus in enumerate(["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]))


def test_eight_h100_one_showing_err_cells() -> None:
    lines = _lines(H100_ERR)
    assert looks_like(lines)
    t = parse_smi_table(lines)
    assert [g.index for g in t.gpus] == list(range(8))
    bad = t.gpus[5]
    assert bad.bus_id == "0000:ab:00.0"
    assert (bad.name, bad.temp_c, bad.power_w, bad.power_cap_w, bad.util_pct, bad.fan_pct,
            bad.perf, bad.ecc_uncorr, bad.mig_mode) == (None,) * 9
    assert (bad.mem_used_mib, bad.mem_total_mib) == (0, 81559)
    assert "name" in bad.err_fields and len(bad.err_fields) >= 8
    assert t.gpus[7].temp_c == 37 and t.gpus[7].power_w == 117
    res = smi_table.explain(lines)
    (f,) = res.findings
    assert (f.code, f.severity, f.gpu, f.line) == ("gpu-lost", Severity.CRITICAL,
                                                   "0000:ab:00.0", 29)
    assert f.time == "Tue Oct  8 09:12:44 2024"
    assert json.loads(json.dumps(res.parsed))["gpus"][5]["temp_c"] is None


def test_a_single_err_cell_is_a_warning_not_a_lost_gpu() -> None:
    text = H100_ERR.replace("| N/A   33C    P0             113W / 700W |",
                            "|ERR!   33C    P0             113W / 700W |")
    res = smi_table.explain(_lines(text))
    sev = {f.gpu: f.severity for f in res.findings}
    assert sev == {"0000:ab:00.0": Severity.CRITICAL, "0000:5d:00.0": Severity.WARNING}
    assert parse_smi_table(_lines(text)).gpus[3].err_fields == ("fan_pct",)


A100_MIG = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                   On |
| N/A   31C    P0    86W / 400W |  24131MiB / 40536MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA A100-SXM...  On   | 00000000:0F:00.0 Off |                    0 |
| N/A   29C    P0    61W / 400W |      0MiB / 40536MiB |      0%      Default |
|                               |                      |             Disabled |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| MIG devices:                                                                |
+------------------+----------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|
|                  |                      |        ECC|                       |
|==================+======================+===========+=======================|
|  0    1   0   0  |  14366MiB / 19968MiB | 42      0 |  3   0    2    0    0 |
|                  |      4MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
|  0    2   0   1  |   9765MiB / 19968MiB | 42      0 |  3   0    2    0    0 |
|                  |      2MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0    1    0      34965      C   python                          14195MiB |
|    0    2    0      46505      C   python train.py                  9743MiB |
+-----------------------------------------------------------------------------+
"""


def test_mig_table_keeps_mig_devices_out_of_the_gpu_list() -> None:
    lines = _lines(A100_MIG)
    assert looks_like(lines)
    t = parse_smi_table(lines)
    assert [(g.index, g.bus_id, g.mig_mode) for g in t.gpus] == [
        (0, "0000:07:00.0", "Enabled"), (1, "0000:0f:00.0", "Disabled")]
    g0 = t.gpus[0]
    assert (g0.name, g0.util_pct, g0.ecc_uncorr, g0.mem_used_mib) == \
        ("NVIDIA A100-SXM...", None, None, 24131)
    assert [(m.gpu, m.gi, m.ci, m.mig_dev, m.mem_used_mib, m.bar1_total_mib, m.sm, m.ecc_uncorr)
            for m in t.mig_devices] == [(0, 1, 0, 0, 14366, 32767, 42, 0),
                                        (0, 2, 0, 1, 9765, 32767, 42, 0)]
    assert [(p.gpu, p.gi, p.ci, p.pid, p.name, p.mem_mib) for p in t.processes] == [
        (0, 1, 0, 34965, "python", 14195), (0, 2, 0, 46505, "python train.py", 9743)]
    assert smi_table.explain(lines).findings == ()
    assert len(json.loads(json.dumps(smi_table.explain(lines).parsed))["mig_devices"]) == 2


def test_mig_box_without_its_title_is_still_not_gpus() -> None:
    lines = [line for line in _lines(A100_MIG) if "MIG devices:" not in line]
    t = parse_smi_table(lines)
    assert [g.index for g in t.gpus] == [0, 1]
    assert [(m.gi, m.mig_dev, m.bar1_used_mib) for m in t.mig_devices] == [(1, 0, 4), (2, 1, 2)]


def test_mig_device_with_uncorrectable_ecc_is_a_finding() -> None:
    text = A100_MIG.replace("| 42      0 |  3   0    2    0    0 |\n|                  |      2MiB",
                            "| 42      3 |  3   0    2    0    0 |\n|                  |      2MiB")
    (f,) = smi_table.explain(_lines(text)).findings
    assert (f.code, f.severity, f.gpu, f.line) == ("ecc-uncorrectable", Severity.CRITICAL,
                                                   "0000:07:00.0", 27)


def test_gpu_row_with_uncorrectable_ecc() -> None:
    text = A100_MIG.replace("Off |                    0 |", "Off |                    2 |")
    t = parse_smi_table(_lines(text))
    assert t.gpus[1].ecc_uncorr == 2
    (f,) = smi_table.explain(_lines(text)).findings
    assert (f.code, f.gpu) == ("ecc-uncorrectable", "0000:0f:00.0")


def test_crlf_input() -> None:
    raw = A100_MIG.replace("\n", "\r\n").encode()
    lines = split_lines(decode(raw))
    assert looks_like(lines)
    t = parse_smi_table(lines)
    assert len(t.gpus) == 2 and t.gpus[1].mig_mode == "Disabled"
    # lines split on \n only still carry \r: the cleaner strips it
    t2 = parse_smi_table(A100_MIG.replace("\n", "\r\n").split("\n"))
    assert t2.gpus == t.gpus and t2.processes == t.processes


def test_table_cut_in_the_middle_of_a_gpu_row() -> None:
    lines = _lines(H100_ERR)
    cut_at = next(i for i, line in enumerate(lines) if "3A:00.0" in line) + 1
    row2 = lines[cut_at]
    cut = [*lines[:cut_at], row2[:row2.index("/ 8") + 3]]  # "…|      4MiB / 8"
    assert cut[-1].endswith("/ 8")
    t = parse_smi_table(cut)
    assert [g.index for g in t.gpus] == [0, 1, 2]
    g2 = t.gpus[2]
    assert (g2.temp_c, g2.power_w, g2.power_cap_w, g2.mem_used_mib, g2.mem_total_mib,
            g2.util_pct) == (32, 112, 700, 4, None, None)
    # cut inside the power cell: the partial cap is dropped, not read as 7 W
    t3 = parse_smi_table([*lines[:cut_at], row2[:row2.index("/ 7") + 3]])
    assert t3.gpus[2].power_w == 112 and t3.gpus[2].power_cap_w is None
    # cut inside the name: index kept, name unknown rather than a fragment
    t4 = parse_smi_table([*lines[:cut_at - 1], lines[cut_at - 1][:14]])
    assert (t4.gpus[-1].index, t4.gpus[-1].name, t4.gpus[-1].bus_id) == (2, None, None)


WIDE_5XX = """\
Wed Jan 15 10:02:11 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |                  Off |
|100%   71C    P2            446W /  450W |   23011MiB /  24564MiB |     98%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA L40S                    On  |   00000000:81:00.0 Off |                    0 |
| 30%   44C    P8             33W /  350W |       1MiB /  46068MiB |      0%   E. Process |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A      2291      G   /usr/lib/xorg/Xorg                            412MiB |
|    0   N/A  N/A     88120    C+G   ...Program Files\\Steam\\steam webhelper.exe   2110MiB |
|    0   N/A  N/A    190221      C   python3                                     20480MiB |
+-----------------------------------------------------------------------------------------+
"""


def test_newer_5xx_wide_layout() -> None:
    lines = _lines(WIDE_5XX)
    assert looks_like(lines)
    t = parse_smi_table(lines)
    assert (t.driver_version, t.cuda_version, t.timestamp) == \
        ("550.127.05", "12.4", "Wed Jan 15 10:02:11 2025")
    g0, g1 = t.gpus
    assert (g0.fan_pct, g0.temp_c, g0.perf, g0.power_w, g0.power_cap_w, g0.disp_a,
            g0.ecc_uncorr) == (100, 71, "P2", 446, 450, "On", None)
    assert (g1.compute_mode, g1.persistence, g1.ecc_uncorr, g1.mem_total_mib) == \
        ("E. Process", "On", 0, 46068)
    assert [(p.type, p.name, p.mem_mib) for p in t.processes] == [
        ("G", "/usr/lib/xorg/Xorg", 412),
        ("C+G", "...Program Files\\Steam\\steam webhelper.exe", 2110),
        ("C", "python3", 20480)]
    assert smi_table.explain(lines).findings == ()


def test_indented_and_quoted_table() -> None:
    quoted = ["> " + line if line else ">" for line in WIDE_5XX.splitlines()]
    indented = ["    " + line for line in quoted]
    quoted_code = ["> " + "    " + line for line in WIDE_5XX.splitlines()]
    for variant in (quoted, indented, quoted_code,
                    ["   " + line for line in WIDE_5XX.splitlines()]):
        assert looks_like(variant)
        t = parse_smi_table(variant)
        assert [g.bus_id for g in t.gpus] == ["0000:01:00.0", "0000:81:00.0"]
        assert len(t.processes) == 3 and t.gpus[0].fan_pct == 100


def test_fenced_and_host_prefixed_table() -> None:
    fenced = ["```text", *(f"gpu07: {line}" for line in A100_MIG.splitlines()), "```"]
    t = parse_smi_table(fenced)
    assert [g.index for g in t.gpus] == [0, 1] and len(t.mig_devices) == 2
    assert looks_like(fenced)


def test_header_less_fragment_of_gpu_rows() -> None:
    everything = _lines(H100_ERR)
    start = next(i for i, line in enumerate(everything) if line.startswith("|   5  ERR!")) - 1
    lines = everything[start:start + 8]  # the GPU5/GPU6 blocks only, no header
    assert lines[0].startswith("+---") and "ERR!" in lines[1]
    assert looks_like(lines)
    t = parse_smi_table(lines)
    assert [g.index for g in t.gpus] == [5, 6]
    assert {f.code for f in smi_table.explain(lines).findings} == {"gpu-lost"}


def test_windows_wddm_table() -> None:
    text = """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 546.12                 Driver Version: 546.12       CUDA Version: 12.3     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                     TCC/WDDM  | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA GeForce RTX 3080      WDDM  | 00000000:0A:00.0  On |                  N/A |
|  0%   48C    P8              22W / 320W |   1187MiB / 10240MiB |      4%      Default |
|                                         |                      |                  N/A |
+-----------------------------------------+----------------------+----------------------+
"""
    (g,) = parse_smi_table(_lines(text)).gpus
    assert (g.name, g.persistence, g.fan_pct, g.mem_used_mib) == \
        ("NVIDIA GeForce RTX 3080", "WDDM", 0, 1187)


def test_repeated_snapshots_are_merged() -> None:
    later = WIDE_5XX.replace("71C", "75C").replace("Wed Jan 15 10:02:11", "Wed Jan 15 10:02:13")
    t = parse_smi_table(_lines(WIDE_5XX + "\n$ nvidia-smi\n" + later))
    assert [g.index for g in t.gpus] == [0, 1]
    assert t.gpus[0].temp_c == 75 and len(t.gpu_rows) == 4 and len(t.processes) == 3


# --- error-only output ------------------------------------------------------------------------

@pytest.mark.parametrize("text,lost,gpu", [
    ("Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the "
     "system to recover this GPU", True, "0000:3b:00.0"),
    ("$ nvidia-smi\nUnable to determine the device handle for GPU0000:B1:00.0: Unknown Error\n",
     True, "0000:b1:00.0"),
    ("No devices were found", False, None),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
     "that the latest NVIDIA driver is installed and running.", False, None),
    ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.183",
     False, None),
])
def test_error_only_outputs(text: str, lost: bool, gpu: str | None) -> None:
    lines = _lines(text)
    assert looks_like(lines)
    res = smi_table.explain(lines)
    assert res.parsed["gpus"] == []
    errors = res.parsed["errors"]
    assert isinstance(errors, list) and errors and errors[0] in text
    if lost:
        (f,) = res.findings
        assert (f.code, f.severity, f.gpu) == ("gpu-lost", Severity.CRITICAL, gpu)
    else:
        assert res.findings == ()


def test_error_line_above_a_table_and_two_lost_gpus() -> None:
    text = ("Unable to determine the device handle for GPU 0000:9A:00.0: Unknown Error\n"
            "Unable to determine the device handle for GPU 0000:DB:00.0: GPU is lost\n"
            "Unable to determine the device handle for GPU 0000:9A:00.0: Unknown Error\n"
            + H100_ERR)
    res = smi_table.explain(_lines(text))
    lost = {f.gpu: f.count for f in res.findings if f.code == "gpu-lost"}
    assert lost == {"0000:9a:00.0": 2, "0000:db:00.0": 1, "0000:ab:00.0": 1}
    assert len(res.parsed["errors"]) == 3  # type: ignore[arg-type]


def test_error_line_inside_other_output_is_not_claimed() -> None:
    csv = ["index, name, pci.bus_id, temperature.gpu"] + [
        f"{i}, NVIDIA H100 80GB HBM3, 00000000:{b}:00.0, 3{i}" for i, b in
        enumerate(["18", "2A", "3A", "5D"])] + [
        "Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error"]
    assert not looks_like(csv)
    log = ["[  12.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01",
           "[  14.2] NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>",
           "[  14.3] NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.",
           "job: Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error"]
    assert not looks_like(log)
    assert not looks_like(["Loss went to NaN at step 12", "No devices were found? retrying",
                           "epoch 3", "epoch 4"])


def test_empty_and_blank_inputs() -> None:
    for lines in ([], [""], ["   ", "```", "```"]):
        assert not looks_like(lines)
        res = smi_table.explain(lines)
        assert res.parsed["gpus"] == [] and res.findings == ()


def test_gpu_dataclass_is_frozen() -> None:
    g = SmiTableGpu(0)
    with pytest.raises(AttributeError):
        g.index = 1  # type: ignore[misc]


# --- never raise --------------------------------------------------------------------------------

def _corpus() -> list[list[str]]:
    out = [_lines(t) for t in (H100_ERR, A100_MIG, WIDE_5XX)]
    out += [split_lines(decode(fixture_input(p))) for p in MINE]
    return out


def test_truncation_at_every_line_and_char_never_raises() -> None:
    for lines in _corpus():
        for n in range(len(lines) + 1):
            smi_table.explain(lines[:n])
            looks_like(lines[:n])
            if n < len(lines):
                for k in range(0, len(lines[n]), 7):
                    res = smi_table.explain([*lines[:n], lines[n][:k]])
                    json.dumps(res.parsed)


def test_random_garbage_never_raises() -> None:
    rng = random.Random(1234)
    alphabet = "| +-=/%CWMiB0123456789 NA!ERPxX:.\t\ufffd>`"
    base = _corpus()
    for _ in range(400):
        lines = garble(rng, list(rng.choice(base)), alphabet)
        looks_like(lines)
        res = smi_table.explain(lines)
        json.dumps(res.parsed)
        for f in res.findings:
            assert f.line >= 1
    raw = bytes(rng.randrange(256) for _ in range(5000))
    smi_table.explain(split_lines(decode(raw)))


def test_a_job_log_that_printed_the_table_at_start_is_a_log() -> None:
    from probes.explain.detect import detect_kind

    table = split_lines(decode(fixture_input(
        FIXTURES / "nvidia-smi" / "08-h100-default-table-load-processes.txt")))
    log = [f"2025-11-08 03:17:{i % 60:02d},552 INFO step {i} loss 2.{i:03d}" for i in range(200)]
    log.append("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert looks_like(table) and detect_kind(table) == smi_table.KIND
    assert not looks_like(table + log)
    assert detect_kind(table + log) == "log"
    # a table with a few lines of prompt and notes around it is still the table
    assert looks_like(["$ nvidia-smi", *table, "note: GPU3 was reset yesterday", "$ "])
