"""``rigwatch explain`` on the fabric's outputs: ``ibstat``/``ibstatus``, ``nvidia-smi nvlink
-s/-e``, ``dcgmi diag`` (table and ``-j``), remapped rows in ``nvidia-smi -q`` and Fabric
Manager log lines, per the contract's additions of 2026-12-06.

Each input in ``tests/data/fabric/`` names in its header the public output it is shaped
after (leptonai/gpud test data, DCGM and Fabric Manager issue threads); values are changed.
Healthy outputs give no finding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.explain_expect import fixture_input
from tests.support.paths import TEST_DATA
from tui.cli import main

DATA = TEST_DATA / "fabric"


def explain(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
            ) -> tuple[dict, list[dict]]:
    """The input (after its header) through ``rigwatch explain --json``."""
    path = tmp_path / name
    path.write_bytes(fixture_input(DATA / name))
    assert main(["explain", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (inp,) = doc["inputs"]
    return inp, doc["findings"]


HEALTHY = {
    "ibstat-h100-all-active.txt": "ibstat",
    "ibstatus-a100-all-active.txt": "ibstat",
    "nvlink-s-a100-healthy.txt": "nvlink",
    "nvlink-e-gb300-clean.txt": "nvlink",
    "dcgmi-diag-r3-pass.txt": "dcgmi-diag",
    "dcgmi-diag-v4-warn.txt": "dcgmi-diag",
    "smi-q-remap-clean.txt": "nvidia-smi-q",
    "fabricmanager-healthy.log": "log",
}


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_outputs_give_no_finding(name: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    inp, findings = explain(name, tmp_path, capsys)
    assert inp["kind"] == HEALTHY[name]
    assert findings == []


class TestIbstat:
    def test_adapters_and_ports_as_the_contract_says(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        inp, _ = explain("ibstat-h100-all-active.txt", tmp_path, capsys)
        adapters = {a["name"]: a for a in inp["parsed"]["adapters"]}
        assert len(adapters) == 10
        assert adapters["mlx5_0"]["ports"] == [{"port": 1, "state": "Active",
                                                "physical_state": "LinkUp", "rate_gbs": 400.0,
                                                "link_layer": "InfiniBand"}]
        assert adapters["mlx5_1"]["ports"][0]["rate_gbs"] == 100.0  # a front-end CX-6 Dx
        assert adapters["mlx5_0"]["ca_type"] == "MT4129"

    def test_ports_down_beside_active_siblings_are_critical(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        _, findings = explain("ibstat-h100-some-down.txt", tmp_path, capsys)
        (down,) = findings  # no ib-link-degraded: the 100 Gb/s ports are another model
        assert (down["step"], down["code"], down["severity"]) == ("gpu", "ib-port-down",
                                                                  "critical")
        assert down["ports"] == ["mlx5_11/1", "mlx5_5/1"]
        assert down["evidence"] == "State: Down"
        assert down["summary"].startswith("mlx5_11/1 DOWN/Polling, mlx5_5/1 DOWN/Disabled; 8 "
                                          "of 10 ports Active")
        assert "reseat or replace the cable" in down["action"]

    def test_a_port_trained_below_its_siblings_is_degraded(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        _, findings = explain("ibstat-a100-one-slow.txt", tmp_path, capsys)
        (slow,) = findings
        assert (slow["code"], slow["severity"], slow["evidence"]) == (
            "ib-link-degraded", "warning", "Rate: 100")
        assert slow["summary"] == "mlx5_6/1 at 100 Gb/s, below its siblings' 200 Gb/s"

    def test_every_port_down_is_critical_too(self, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        text = fixture_input(DATA / "ibstat-a100-one-slow.txt").decode()
        text = text.replace("State: Active", "State: Down").replace("LinkUp", "Polling")
        (tmp_path / "down.txt").write_text(text)
        assert main(["explain", "--json", str(tmp_path / "down.txt")]) == 0
        (f,) = json.loads(capsys.readouterr().out)["findings"]
        assert (f["code"], f["severity"]) == ("ib-port-down", "critical")
        assert "every port of the host is down" in f["summary"]


class TestNvlink:
    def test_links_per_gpu_with_state_and_speed(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        inp, _ = explain("nvlink-s-a100-healthy.txt", tmp_path, capsys)
        gpus = inp["parsed"]["gpus"]
        assert len(gpus) == 8 and gpus[0]["name"] == "NVIDIA A100-SXM4-80GB"
        assert gpus[0]["uuid"].startswith("GPU-00000000")
        assert gpus[3]["links"][11] == {"link": 11, "state": "active", "speed_gbs": 25.0,
                                        "errors": {}}

    def test_an_inactive_link_beside_active_ones_is_nvlink_down(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        inp, findings = explain("nvlink-s-v100-inactive.txt", tmp_path, capsys)
        assert inp["parsed"]["gpus"][3]["links"][3]["state"] == "inactive"
        (down,) = findings
        assert (down["code"], down["severity"], down["gpu"]) == ("nvlink-down", "critical",
                                                                 "GPU3")
        assert down["evidence"] == "Link 3: <inactive>" and down["links"] == [3, 5]

    def test_error_counters_above_zero(self, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        inp, findings = explain("nvlink-e-h100-crc.txt", tmp_path, capsys)
        assert inp["parsed"]["gpus"][5]["links"][11]["errors"] == {
            "replay_errors": 1843, "recovery_errors": 7, "crc_errors": 96}
        by_gpu = {f["gpu"]: f for f in findings}
        assert set(by_gpu) == {"GPU5", "GPU2"}
        assert (by_gpu["GPU5"]["code"], by_gpu["GPU5"]["severity"]) == ("nvlink-errors",
                                                                        "warning")
        assert by_gpu["GPU5"]["evidence"] == "Link 11: Replay Errors: 1843"
        assert by_gpu["GPU2"]["severity"] == "info"  # three replays only: retried, recovered

    def test_status_and_error_counters_pasted_together(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        both = (fixture_input(DATA / "nvlink-s-v100-inactive.txt") + b"\n"
                + b"GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-00000003-1111-2222-3333-444455556666)\n"
                + b"\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 0\n"
                + b"\t Link 0: CRC Errors: 0\n")
        (tmp_path / "both.txt").write_bytes(both)
        assert main(["explain", "--json", str(tmp_path / "both.txt")]) == 0
        doc = json.loads(capsys.readouterr().out)
        gpu3 = doc["inputs"][0]["parsed"]["gpus"][3]
        assert gpu3["links"][0]["errors"] == {"replay_errors": 0, "recovery_errors": 0,
                                              "crc_errors": 0}
        assert gpu3["links"][0]["speed_gbs"] == 25.781
        assert [f["code"] for f in doc["findings"]] == ["nvlink-down"]

    def test_a_link_slower_than_its_peers(self, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        text = fixture_input(DATA / "nvlink-s-a100-healthy.txt").decode()
        lines = text.splitlines()
        lines[5] = "         Link 4: 12.5 GB/s"
        (tmp_path / "slow.txt").write_text("\n".join(lines))
        assert main(["explain", "--json", str(tmp_path / "slow.txt")]) == 0
        (f,) = json.loads(capsys.readouterr().out)["findings"]
        assert (f["code"], f["severity"], f["gpu"]) == ("nvlink-slow", "warning", "GPU0")


class TestDcgmiDiag:
    def test_a_failed_test_names_its_gpu(self, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        inp, findings = explain("dcgmi-diag-r2-fail.txt", tmp_path, capsys)
        assert inp["parsed"]["level"] == 2
        tests = [(t["name"], t["result"], t["gpus"]) for t in inp["parsed"]["tests"]]
        assert ("GPU Memory", "Pass", [1, 2, 3, 4, 5, 6, 7]) in tests
        assert ("GPU Memory", "Fail", [0]) in tests
        assert ("Page Retirement/Row Remap", "Pass", None) in tests
        assert all(name != "DCGM Version" for name, _, _ in tests)  # metadata is no test
        (fail,) = findings
        assert (fail["code"], fail["severity"], fail["gpu"], fail["gpus"]) == (
            "dcgm-diag-fail", "critical", "GPU0", [0])
        assert "Fail - GPU: 0" in fail["evidence"]
        assert "Thermal violations totaling 13.3 seconds started at 9.7" in fail["summary"]

    def test_skipped_hardware_tests_are_no_clean_bill_of_health(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        inp, findings = explain("dcgmi-diag-r3-skipped.txt", tmp_path, capsys)
        assert inp["parsed"]["level"] == 3
        (f,) = findings
        assert (f["code"], f["severity"]) == ("dcgm-diag-incomplete", "info")
        assert "5 skipped" not in f["summary"] and "6 skipped" in f["summary"]

    def test_a_level_one_run_has_no_hardware_tests(self, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        text = fixture_input(DATA / "dcgmi-diag-r3-pass.txt").decode()
        head, _, _ = text.partition("+-----  Integration")
        (tmp_path / "r1.txt").write_text(head.replace("-r 3", "-r 1") + "+" + "-" * 27 + "+\n")
        assert main(["explain", "--json", str(tmp_path / "r1.txt")]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["inputs"][0]["parsed"]["level"] == 1
        assert [(f["code"], f["severity"]) for f in doc["findings"]] == [
            ("dcgm-diag-incomplete", "info")]

    def test_dcgm4_rows_per_gpu(self, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
        inp, _ = explain("dcgmi-diag-v4-warn.txt", tmp_path, capsys)
        tests = [(t["name"], t["result"], t["gpus"]) for t in inp["parsed"]["tests"]]
        assert ("pcie", "Warn", [2]) in tests and ("memory", "Pass", [3]) in tests

    def test_json_output(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        inp, findings = explain("dcgmi-diag-json-fail.txt", tmp_path, capsys)
        assert inp["kind"] == "dcgmi-diag"
        (fail,) = findings
        assert (fail["code"], fail["gpus"]) == ("dcgm-diag-fail", [2])


class TestRemappedRowsAndFabricManager:
    def test_remapped_rows_pending(self, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
        inp, findings = explain("smi-q-remap-pending.txt", tmp_path, capsys)
        assert inp["parsed"]["gpus"][0]["remapped_rows"] == {
            "correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
        (f,) = findings
        assert (f["code"], f["severity"], f["gpu"]) == ("row-remap-pending", "warning",
                                                        "0000:07:00.0")

    def test_error_lines_are_critical(self, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        _, findings = explain("fabricmanager-errors.log", tmp_path, capsys)
        (f,) = findings  # two ERROR lines: one incident, counted
        assert (f["step"], f["code"], f["severity"], f["count"]) == (
            "gpu", "fabric-manager-error", "critical", 2)
        assert f["line"] == 2 and "non-fatal error 12028" in f["evidence"]

    def test_nothing_to_do_without_nvswitch_is_info(self, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
        _, findings = explain("fabricmanager-nothing-to-do.log", tmp_path, capsys)
        (f,) = findings
        assert (f["code"], f["severity"], f["line"]) == ("fabric-manager-error", "info", 2)
        assert "not needed" in f["action"]

    def test_nothing_to_do_where_the_log_shows_nvswitches_is_critical(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        text = fixture_input(DATA / "fabricmanager-nothing-to-do.log").decode()
        text = ("Nov 15 14:15:40 gpu-hgx01 nvidia-fabricmanager-start.sh[4100]: Detected NVL5 "
                "system\n") + text
        (tmp_path / "nvl5.log").write_text(text)
        assert main(["explain", "--json", str(tmp_path / "nvl5.log")]) == 0
        (f,) = json.loads(capsys.readouterr().out)["findings"]
        assert (f["code"], f["severity"]) == ("fabric-manager-error", "critical")
