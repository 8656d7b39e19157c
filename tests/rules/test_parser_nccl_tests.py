"""nccl-tests output: the parser, the two findings, the expectation table and the live path.

The samples in ``tests/data/nccl_tests`` keep the layouts of public output (values changed):

* ``h100-allreduce-8gpu*.txt``: the current frame as ``src/util.cu`` of NVIDIA/nccl-tests
  prints it (``# Collective test starting``, ``#  Rank … [0000:18:00]``, ``root``, ``#wrong``);
  the sizes and figures follow coreweave/nccl-tests PR #43's published runs.
* ``v100-2node-sockets-linear.txt``: NVIDIA/nccl-tests issue #107 (2022: two nodes over a
  10 Gb/s NIC, no ``root`` column, ``error`` printed ``0e+00``), with a linear ``-i`` step.
* ``a100-allgather-wrong.txt``: NVIDIA/nccl issue #2001 (occasional ``#wrong`` at 1 MiB) and
  nccl-tests issue #131 (``Out of bounds values : N FAILED``).
* ``rtx2080ti-old-error-column.txt``: microsoft/NPKit issue #19 (rounding deviations such as
  ``1e-07`` in the old ``error`` column with ``Out of bounds values : 0``; nccl-tests issue #52
  explains they are not errors).
* ``v100-allgather-2020-oob.txt``: nccl-tests issue #37 (2020 table without ``redop``, footer
  without ``#``, ``1e+00`` deviations, 2 out-of-bounds values).
* ``v100-two-processes-without-mpi.txt``: NVIDIA/nccl-tests issue #107 again (two processes
  each running a one-rank test: the frame twice, two ``Rank 0`` lines, busbw 0);
* ``p5-mpi-tagged-tail.txt``: aws/aws-k8s-tester PR #503 (Open MPI ``[1,0]<stdout>:`` tags).
* ``rtx5090-alltoall-1gpu.txt``: nccl-tests issue #287 (one GPU, ``N/A`` in-place #wrong).
* ``a10g-markdown-stripped.txt``: nccl-tests issue #249 (``#`` lost to a markdown renderer).
* ``gb200-tail.txt``: coreweave/nccl-tests PR #43 (a tail: one rank line, large sizes).
* ``h200-reducescatter-then-broadcast.txt``, ``a100-sendrecv-per-iter.txt``,
  ``h100-allreduce-timestamps-small.txt``: written with the printf formats of ``src/util.cu``
  (two runs in one file, ``-I`` per-iteration columns, ``-T`` time stamps).
"""
# ruff: noqa: E501

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from probes.explain.detect import detect_kind, parse_as
from probes.rules.logrules.families import scan_lines
from probes.rules.logrules.lines import log_lines
from probes.rules.logrules.live import LiveLogScanner
from probes.rules.nccl_expect import Fabric, NcclExpectations, fabric_of, gpu_fabric, using
from probes.rules.parsers import nccl_tests
from probes.rules.result import ExplainFinding
from probes.rules.text import decode, split_lines
from probes.triage import Severity
from tests.conftest import REPO
from tui.cli import main

DATA = REPO / "tests" / "data" / "nccl_tests"


def _lines(name: str) -> list[str]:
    return split_lines(decode((DATA / name).read_bytes()))


def _explain(name: str) -> tuple[str, dict[str, Any], dict[str, ExplainFinding]]:
    lines = _lines(name)
    kind = detect_kind(lines)
    done = parse_as(kind, lines)
    codes = {f.code: f for f in done.findings}
    return kind, dict(done.parsed), codes


# name: (op, rows, avg busbw, out of bounds, ranks, finding codes)
EXPECTED = {
    "h100-allreduce-8gpu.txt": ("all_reduce", 14, 343.163, 0, 8, set()),
    "h100-allreduce-8gpu-slow.txt": ("all_reduce", 14, 68.6326, 0, 8, {"nccl-bandwidth-low"}),
    "v100-2node-sockets-linear.txt": ("all_reduce", 5, 1.14946, 0, 2, {"nccl-bandwidth-low"}),
    "a100-allgather-wrong.txt": (None, 5, 27.7956, 1, 4, {"nccl-tests-wrong"}),
    "rtx2080ti-old-error-column.txt": (None, 5, 3.20814, 0, 4, set()),
    "v100-allgather-2020-oob.txt": ("all_gather", 1, 127.971, 2, 0, {"nccl-tests-wrong"}),
    "p5-mpi-tagged-tail.txt": (None, 4, 91.7722, 0, 0, set()),
    "rtx5090-alltoall-1gpu.txt": ("alltoall", 1, 0.0, 0, 1, set()),
    "a10g-markdown-stripped.txt": (None, 3, 0.0, 0, 1, set()),
    "gb200-tail.txt": (None, 5, 745.2, 0, 1, set()),
    "h200-reducescatter-then-broadcast.txt": ("reduce_scatter", 3, 333.6, 0, 16, set()),
    "a100-sendrecv-per-iter.txt": ("sendrecv", 3, 143.8, 0, 2, set()),
    "h100-allreduce-timestamps-small.txt": ("all_reduce", 5, 0.0, 0, 8, set()),
    "v100-two-processes-without-mpi.txt": ("all_reduce", 2, 0.0, 0, 2, set()),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_sample_parses_to_its_summary_and_findings(name: str) -> None:
    op, rows, avg, oob, ranks, codes = EXPECTED[name]
    kind, parsed, found = _explain(name)
    assert kind == "nccl-tests"
    assert parsed["op"] == op
    assert isinstance(parsed["rows"], list) and len(parsed["rows"]) == rows
    assert parsed["avg_busbw_gbs"] == avg
    assert parsed["out_of_bounds"] == oob
    assert parsed["ranks"] == ranks
    assert set(found) == codes


def test_a_current_row_has_every_contract_field() -> None:
    _, parsed, _ = _explain("h100-allreduce-8gpu.txt")
    rows = parsed["rows"]
    assert isinstance(rows, list)
    assert rows[-1] == {
        "size_bytes": 8589934592, "count": 2147483648, "type": "float", "redop": "sum",
        "root": -1, "time_us": 28560.0, "algbw_gbs": 300.77, "busbw_gbs": 526.35, "wrong": 0,
        "ip_time_us": 28557.0, "ip_algbw_gbs": 300.80, "ip_busbw_gbs": 526.40, "ip_wrong": 0}
    devices = parsed["devices"]
    assert isinstance(devices, list)
    assert devices[0] == {"rank": 0, "host": "gpu-a01", "device": 0, "bus_id": "0000:18:00.0",
                          "name": "NVIDIA H100 80GB HBM3"}
    assert parsed["config"] == {"threads": 1, "gpus_per_thread": 8, "min_bytes": 1048576,
                                "max_bytes": 8589934592, "step": 2, "step_kind": "factor"}


def test_old_tables_without_root_or_redop_and_na_cells() -> None:
    _, parsed, _ = _explain("v100-2node-sockets-linear.txt")
    row = parsed["rows"][0]
    assert (row["redop"], row["root"], row["wrong"]) == ("sum", None, 0)
    assert parsed["config"]["step_kind"] == "bytes"
    sizes = [r["size_bytes"] for r in parsed["rows"]]
    assert {b - a for a, b in itertools.pairwise(sizes)} == {1048576}
    assert parsed["devices"][0]["bus_id"] is None  # "[0x00]" is no PCI address
    _, gathered, _ = _explain("v100-allgather-2020-oob.txt")
    assert gathered["rows"][0]["redop"] is None
    _, one, _ = _explain("rtx5090-alltoall-1gpu.txt")
    assert one["rows"][0]["ip_wrong"] is None and one["rows"][0]["redop"] == "none"


def test_the_first_releases_table_reads_milliseconds_as_microseconds() -> None:
    # the 2017 frame (src/common.cu before NVIDIA/nccl-tests cbe7f65): "bytes N type op … res",
    # time printed with %7.3f in milliseconds, deviation with %7.0le
    text = (" nThread 1 nGpus 2 minBytes 33554432 maxBytes 67108864 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
            "#      bytes             N    type      op        out-of-place                    in-place\n"
            "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n"
            "    33554432       8388608   float     sum    3.012  11.14  11.14    0e+00    3.010  11.15  11.15    0e+00\n"
            "    67108864      16777216   float     sum    5.998  11.19  11.19    0e+00    5.995  11.19  11.19    0e+00\n"
            " Out of bounds values : 0 OK\n Avg bus bandwidth    : 11.1675\n")
    (test,) = nccl_tests.parse(split_lines(text))
    assert [r.time_us for r in test.rows] == [3012.0, 5998.0]
    assert test.avg_busbw_gbs == 11.1675 and not test.wrong_is_count


def test_two_runs_in_one_input_are_each_listed_and_judged() -> None:
    _, parsed, _ = _explain("h200-reducescatter-then-broadcast.txt")
    tests = parsed["tests"]
    assert isinstance(tests, list)
    assert [(t["op"], t["ranks"], t["hosts"]) for t in tests] == [
        ("reduce_scatter", 16, ["h200-n01", "h200-n02"]), ("broadcast", 8, ["h200-n01"])]
    assert {r["root"] for r in tests[1]["rows"]} == {0}
    slow = _lines("h200-reducescatter-then-broadcast.txt")
    with using(NcclExpectations(internode_gbs=800.0, nvlink4_gbs=400.0)):
        found = parse_as("nccl-tests", slow).findings
    assert [f.code for f in found] == ["nccl-bandwidth-low"]  # reduce_scatter over the NICs only
    assert found[0].extra["fabric"] == "internode"


def test_per_iteration_columns_and_time_stamps_do_not_shift_the_cells() -> None:
    _, parsed, _ = _explain("a100-sendrecv-per-iter.txt")
    row = parsed["rows"][0]
    assert (row["busbw_gbs"], row["wrong"], row["ip_busbw_gbs"], row["ip_wrong"]) == (140.3, 0, 140.3, 0)
    _, stamped, _ = _explain("h100-allreduce-timestamps-small.txt")
    assert {r["ip_time_us"] for r in stamped["rows"]} == {23.9}


def test_wrong_elements_are_critical_and_point_at_the_first_bad_row() -> None:
    _, _, found = _explain("a100-allgather-wrong.txt")
    f = found["nccl-tests-wrong"]
    assert f.severity is Severity.CRITICAL
    assert f.line == 14 and "2304" in f.evidence
    assert "1 out-of-bounds" in f.summary


def test_rounding_deviations_of_the_old_error_column_are_not_wrong_data() -> None:
    _, _, found = _explain("rtx2080ti-old-error-column.txt")
    assert found == {}


def test_low_bandwidth_shows_the_ratio_and_the_table_is_configurable() -> None:
    _, _, found = _explain("h100-allreduce-8gpu-slow.txt")
    f = found["nccl-bandwidth-low"]
    assert f.severity is Severity.WARNING
    assert f.extra == {"busbw_gbs": 105.28, "expected_gbs": 360.0, "ratio": 0.292,
                       "fabric": "nvlink4", "size_bytes": 8589934592}
    assert "29% of the 360 GB/s expected over nvlink4" in f.summary
    with using(NcclExpectations(nvlink4_gbs=150.0)):
        assert parse_as("nccl-tests", _lines("h100-allreduce-8gpu-slow.txt")).findings == ()
    # a run that stops below min_bytes measures latency, not links: never judged
    assert not any(f.code == "nccl-bandwidth-low" for f in
                   parse_as("nccl-tests", _lines("h100-allreduce-timestamps-small.txt")).findings)


@pytest.mark.parametrize(("name", "fabric"), [
    ("NVIDIA H100 80GB HBM3", Fabric.NVLINK4), ("NVIDIA H100 PCIe", Fabric.PCIE),
    ("NVIDIA H100 NVL", Fabric.PCIE), ("NVIDIA H200", Fabric.NVLINK4),
    ("NVIDIA H800", Fabric.NVLINK4_CUT), ("NVIDIA A100-SXM4-80GB", Fabric.NVLINK3),
    ("NVIDIA A100-PCIE-40GB", Fabric.PCIE), ("NVIDIA A800-SXM4-80GB", Fabric.NVLINK3_CUT),
    ("Tesla V100-SXM2-16GB", Fabric.NVLINK2), ("NVIDIA B200", Fabric.NVLINK5),
    ("NVIDIA GB200", Fabric.NVLINK5), ("NVIDIA A10G", Fabric.PCIE),
    ("NVIDIA Graphics Device", Fabric.PCIE), ("NVIDIA GeForce RTX 4090", Fabric.PCIE)])
def test_gpu_names_map_to_their_fabric(name: str, fabric: Fabric) -> None:
    assert gpu_fabric(name) is fabric


def test_the_slowest_fabric_wins_and_two_hosts_mean_the_network() -> None:
    assert fabric_of(["a", "a"], ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]) is Fabric.PCIE
    assert fabric_of(["a", "b"], ["NVIDIA H100 80GB HBM3"] * 2) is Fabric.INTERNODE
    assert fabric_of([], []) is None


def test_cut_tails_keep_whole_rows_only() -> None:
    lines = _lines("h100-allreduce-8gpu.txt")
    head_cut = ["0.00  0.00      0    12.94    0.00", *lines[20:28]]
    tail_cut = [*lines[:25], lines[25][:60]]
    assert all(r.size_bytes >= 8388608 for r in nccl_tests.parse(head_cut)[0].rows)
    (test,) = nccl_tests.parse(tail_cut)
    assert len(test.rows) == 8 and test.avg_busbw_gbs is None
    assert detect_kind(lines[20:24]) == "nccl-tests"


def test_nccl_tests_inside_a_training_log_are_found_by_the_log_rules() -> None:
    noise = ["[rank0]: step 10 loss 2.31", "NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7"]
    lines = noise + _lines("a100-allgather-wrong.txt") + noise
    codes = {f.code for f in scan_lines(log_lines(lines))}
    assert "nccl-tests-wrong" in codes


def test_the_console_follows_nccl_tests_in_a_job_log() -> None:
    scanner = LiveLogScanner()
    for line in _lines("a100-allgather-wrong.txt"):
        scanner.add("job:/scratch/nccl.out", line, 1.0)
    hits = scanner.scan()
    assert [h.finding.code for h in hits] == ["nccl-tests-wrong"]
    scanner.add("kernel", "# Out of bounds values : 3 FAILED", 2.0)
    assert scanner.scan() == []  # the kernel log is not a job log


def test_explain_json_reports_the_kind_rows_and_findings(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    given = tmp_path / "nccl.txt"
    given.write_bytes((DATA / "v100-2node-sockets-linear.txt").read_bytes().replace(b"\n", b"\r\n"))
    assert main(["explain", "--json", str(given)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (inp,) = doc["inputs"]
    assert inp["kind"] == "nccl-tests" and inp["parsed"]["avg_busbw_gbs"] == 1.14946
    assert [f["code"] for f in doc["findings"]] == ["nccl-bandwidth-low"]
    assert doc["findings"][0]["ratio"] == 0.115 and doc["findings"][0]["step"] == "nccl"


def test_garbled_inputs_never_raise() -> None:
    rnd = random.Random(23)
    base = "\n".join(_lines("h100-allreduce-8gpu.txt"))
    for _ in range(200):
        cut = list(base)
        for _ in range(rnd.randint(1, 30)):
            at = rnd.randrange(len(cut))
            cut[at] = rnd.choice(["", " ", "#", "N/A", "9", "e", "\n", "-", "x"])
        lines = "".join(cut).splitlines()
        parse_as(detect_kind(lines), lines)


def test_settings_yaml_sets_the_table_explain_judges_against(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from probes.rules import nccl_expect

    settings = tmp_path / "settings.yaml"
    settings.write_text("nccl_tests:\n  nvlink4_gbs: 150\n  low_ratio: 0.5\n", encoding="utf-8")
    monkeypatch.setenv("RIGWATCH_SETTINGS", str(settings))
    monkeypatch.setattr(nccl_expect, "_CONFIGURED", [nccl_expect.DEFAULT])
    assert main(["explain", "--json", str(DATA / "h100-allreduce-8gpu-slow.txt")]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    settings.write_text("nccl_tests:\n  nvlink4_gb: 150\n", encoding="utf-8")
    assert main(["explain", "--json", str(DATA / "h100-allreduce-8gpu-slow.txt")]) == 2
    assert "nvlink4_gbs" in capsys.readouterr().err  # the close match is named


def test_two_one_rank_processes_are_said_so_and_not_judged_as_two_hosts() -> None:
    _, parsed, found = _explain("v100-two-processes-without-mpi.txt")
    assert parsed["separate_processes"] is True and parsed["hosts"] == ["node-b", "node-a"]
    assert found == {}  # busbw 0 is what a one-rank test prints, not a slow network
