"""The agent's fabric reader: IB/RoCE ports from a sysfs tree stepped over time, counter
increases across saturation and resets, NVLink per link from NVML and from nvidia-smi.

The sysfs tree is ``tests/support/ib_sysfs.py`` (the kernel's documented layout, mlx5's
``hw_counters/``, values shaped after leptonai/gpud's H100 testdata).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.agent.fabric import FABRIC_EVERY_TICKS, FabricReader, counter_delta
from probes.transport.bootstrap import agent_source
from tests.agent.test_agent import by_type, run_agent
from tests.conftest import REPO
from tests.support.ib_sysfs import IbTree

TOP32 = 4294967295


class TestCounterDelta:
    @pytest.mark.parametrize(("name", "old", "new", "want"), [
        ("symbol_error", 3, 10, 7),
        ("symbol_error", 10, 3, None),  # reset (perfquery -R, driver reload)
        ("symbol_error", 65535, 65535, None),  # 16-bit counter stuck at its top
        ("symbol_error", 65530, 65535, 5),  # reached the top: rose at least 5
        ("link_downed", 254, 255, 1),
        ("link_downed", 255, 255, None),  # 8 bits
        ("local_link_integrity_errors", 15, 15, None),  # 4 bits
        ("port_rcv_data", TOP32, TOP32, None),  # a 32-bit data counter saturated
        ("port_rcv_data", TOP32 - 10, TOP32, None),  # reaching the top: its rate would lie
        ("port_rcv_data", 100, 400, 300),
        ("port_rcv_data", 2**40, 2**40 + 8, 8),  # 64-bit (PortCountersExtended)
        ("port_xmit_wait", TOP32, TOP32, None),
        ("local_ack_timeout_err", 2**33, 2**33 + 1, 1),
        ("local_ack_timeout_err", 5, 2, None),  # a 32-bit hardware counter wrapped, or reset
        ("symbol_error", None, 3, None),
    ])
    def test_delta(self, name: str, old: int | None, new: int, want: int | None) -> None:
        assert counter_delta(name, old, new) == want


def _ports(msg: dict) -> dict[str, dict]:
    return {p["hca"]: p for p in msg["ports"]}


class TestFabricReader:
    def test_first_message_at_once_then_only_on_change_or_period(self, tmp_path: Path) -> None:
        tree = IbTree(tmp_path, n=2)
        r = FabricReader(str(tmp_path))
        first = r.tick(100.0)
        assert first is not None and first["interval_s"] is None
        p = _ports(first)["mlx5_0"]
        assert (p["state"], p["phys_state"], p["rate_gbs"], p["link_layer"], p["port"]) == (
            "ACTIVE", "LinkUp", 400.0, "InfiniBand", 1)
        assert p["errors"] == {} and "rx_bytes_s" not in p  # no interval yet: no rate
        assert r.tick(101.0) is None  # nothing changed
        tree.set_state("mlx5_1", "DOWN", "Polling", 40)
        down = r.tick(102.0)
        assert down is not None
        assert _ports(down)["mlx5_1"]["state"] == "DOWN"
        assert _ports(down)["mlx5_1"]["phys_state"] == "Polling"
        quiet = [r.tick(103.0 + i) for i in range(FABRIC_EVERY_TICKS)]
        assert quiet[:-1] == [None] * (FABRIC_EVERY_TICKS - 1) and quiet[-1] is not None

    def test_rates_and_errors_over_the_interval(self, tmp_path: Path) -> None:
        tree = IbTree(tmp_path, n=1)
        r = FabricReader(str(tmp_path))
        r.tick(0.0)
        for t in range(1, FABRIC_EVERY_TICKS + 1):
            tree.add("mlx5_0", "port_rcv_data", 250_000_000)  # words: 1 GB/s
            tree.add("mlx5_0", "port_xmit_data", 125_000_000)
            msg = r.tick(float(t))
        p = _ports(msg)["mlx5_0"]
        assert msg["interval_s"] == FABRIC_EVERY_TICKS
        assert p["rx_bytes_s"] == 1e9 and p["tx_bytes_s"] == 5e8
        assert p["errors"] == {}
        tree.add("mlx5_0", "symbol_error", 4)
        tree.add("mlx5_0", "link_downed", 1)
        tree.add("mlx5_0", "local_ack_timeout_err", 2)
        got = [r.tick(100.0 + i) for i in range(5)]
        assert got[:4] == [None] * 4  # errors are sent within FABRIC_ERROR_TICKS, not per tick
        assert _ports(got[4])["mlx5_0"]["errors"] == {
            "symbol_error": 4, "link_downed": 1, "local_ack_timeout_err": 2}

    def test_saturated_and_reset_counters_never_make_a_rate(self, tmp_path: Path) -> None:
        tree = IbTree(tmp_path, n=1)
        tree.set_counter("mlx5_0", "port_rcv_data", TOP32 - 1000)  # an old 32-bit PMA
        tree.set_counter("mlx5_0", "port_xmit_data", 5_000_000)
        r = FabricReader(str(tmp_path))
        r.tick(0.0)
        for t in range(1, FABRIC_EVERY_TICKS + 1):
            tree.set_counter("mlx5_0", "port_rcv_data", TOP32)  # reaches the top, stays
            tree.set_counter("mlx5_0", "port_xmit_data", 10 if t == 5 else 10 + t)  # reset
            msg = r.tick(float(t))
        p = _ports(msg)["mlx5_0"]
        assert "rx_bytes_s" not in p and "tx_bytes_s" not in p
        assert p["unknown"] == ["port_rcv_data", "port_xmit_data"]
        for t in range(FABRIC_EVERY_TICKS):  # still stuck, but the reset is behind us
            tree.set_counter("mlx5_0", "port_xmit_data", 100 + t * 1000)
            msg = r.tick(31.0 + t)
        p = _ports(msg)["mlx5_0"]
        assert "rx_bytes_s" not in p and p["unknown"] == ["port_rcv_data"]
        assert p["tx_bytes_s"] == round((100 - 40 + 29 * 1000) * 4 / 30, 1)  # 4-octet words

    def test_no_hca_no_message(self, tmp_path: Path) -> None:
        assert FabricReader(str(tmp_path)).tick(0.0) is None


class TestAgentFabric:
    def test_hello_names_guid_type_and_bridges(self, tmp_path: Path) -> None:
        IbTree(tmp_path, n=2)
        lines, _, _ = run_agent(["--once", "--sys-root", str(tmp_path)])
        nics = {n["name"]: n for n in by_type(lines, "hello")[0]["nics"]}
        n0 = nics["mlx5_0"]
        assert n0["node_guid"] == "a088:c203:00ad:eab8" and n0["hca_type"] == "MT4129"
        assert n0["address"] == "0000:13:00.0" and n0["numa_node"] == 0
        assert n0["bridges"] == ["0000:11:01.0", "0000:10:00.0", "0000:00:01.0"]
        assert n0["ports"][0]["phys_state"] == "5: LinkUp"
        fabric = by_type(lines, "fabric")
        assert len(fabric) == 1 and len(fabric[0]["ports"]) == 2

    def test_port_down_mid_run_on_a_bare_python(self, tmp_path: Path, bare_python: str) -> None:
        """The stock interpreter, a port going down while the agent runs: the next tick says so."""
        tree = IbTree(tmp_path, n=4)
        proc = subprocess.Popen([bare_python, "-I", "-S", "-", "--sys-root", str(tmp_path),
                                 "--interval", "0.2", "--count", "12"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(agent_source(simulate=False))
        proc.stdin.close()
        seen: list[dict] = []
        for raw in proc.stdout:
            msg = json.loads(raw)
            seen.append(msg)
            if msg["type"] == "sample" and msg["seq"] == 4:
                tree.set_state("mlx5_2", "DOWN", "Disabled", 40)
                tree.add("mlx5_2", "link_downed", 1)
        assert proc.wait(timeout=30) == 0
        order = [(m["type"], m.get("seq")) for m in seen if m["type"] in ("fabric", "sample")]
        fabric = [m for m in seen if m["type"] == "fabric"]
        assert len(fabric) == 2  # the first tick's, then the change's
        assert _ports(fabric[0])["mlx5_2"]["state"] == "ACTIVE"
        down = _ports(fabric[1])["mlx5_2"]
        assert (down["state"], down["phys_state"], down["rate_gbs"]) == ("DOWN", "Disabled", 40.0)
        assert down["errors"] == {"link_downed": 1}
        at = order.index(("fabric", None), 1)
        assert order[at + 1] == ("sample", 5)  # sent with the very next sample


NVML = str(REPO / "tests" / "data" / "fake_pynvml")


class TestNvlink:
    def test_nvml_links_with_speed_and_counters(self) -> None:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": NVML, "FAKE_NVML": "nvlinkerr2"}
        lines, _, _ = run_agent(["--once"], env=env, isolated=False)
        fabric = by_type(lines, "fabric")[0]
        links = {g["gpu"]: g["links"] for g in fabric["nvlink"]}
        assert len(links[0]) == 18 and links[0][0] == [0, 1, 26.562, 0, 0, 0]
        assert links[2][5][:2] == [5, 0]  # the fake's inactive link
        assert links[2][7][3:] == [12, 1, 3]  # replay, recovery, CRC (flit + data)
        assert "nvlink" not in by_type(lines, "sample")[0]["gpus"][0]

    def test_nvidia_smi_text_sent_when_it_changes(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        env = fake_smi("csv")
        env["FAKE_SMI_NVLINK"] = "inactive3"
        lines, _, _ = run_agent(["--interval", "0.05", "--count", "3"], env=env)
        fabric = by_type(lines, "fabric")
        assert len(fabric) == 1  # the text did not change: sent once
        text = fabric[0]["nvlink_text"]
        assert "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-" in text
        assert "\t Link 3: <inactive>" in text and "Link 0: Replay Errors: 0" in text
