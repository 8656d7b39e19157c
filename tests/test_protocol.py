"""Wire protocol v1: round trip from the real agent, and a reader that survives junk."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from probes.errors import ProtocolError
from probes.wire import protocol
from probes.wire.protocol import MessageReader, UnknownMessageType, decode_line
from probes.wire.samples import (
    BlockDevice,
    DatasetDevice,
    GpuState,
    Hello,
    HostSample,
    LogEvent,
    LogSourceState,
    LogSourceStatus,
    ProbeError,
    SoftwareVersions,
)
from tests.conftest import AGENT_SOURCE


@pytest.fixture(scope="module")
def agent_lines() -> list[bytes]:
    """A real stream: simulated host with a GPU drop-out (so events appear)."""
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--simulate", "xid79:6@60,throttle:5", "--interval", "30",
         "--fast", "--count", "6", "--seed", "4", "--kernel-log", "auto"],
        input=AGENT_SOURCE, capture_output=True, check=True, timeout=30)
    return proc.stdout.splitlines()


def _first(lines: list[bytes], kind: str) -> bytes:
    return next(x for x in lines if json.loads(x)["type"] == kind)


def test_round_trip_of_every_field(agent_lines: list[bytes]) -> None:
    reader = MessageReader()
    msgs = reader.feed(b"\n".join(agent_lines) + b"\n")
    assert reader.stats.garbled == reader.stats.overlong == reader.stats.unknown_type == 0
    raw = [json.loads(x) for x in agent_lines]
    assert len(msgs) == len(raw)
    for msg, obj in zip(msgs, raw, strict=True):
        if obj["type"] == "hello":
            assert isinstance(msg, Hello)
            assert msg.protocol == 1
            assert msg.facts.hostname == obj["host"]["hostname"]
            assert msg.facts.driver_version == obj["host"]["driver_version"]
            assert msg.facts.cpu_cores_physical == obj["host"]["cpu_cores_physical"]
            assert [g.uuid for g in msg.facts.gpus] == [g["uuid"] for g in obj["gpus"]]
            assert [g.bus_id for g in msg.facts.gpus] == [g["bus_id"] for g in obj["gpus"]]
            assert msg.facts.simulated == ("xid79", "throttle")
            _assert_hello_facts(msg, obj)
        elif obj["type"] == "sample":
            assert isinstance(msg, HostSample)
            assert msg.seq == obj["seq"]
            for g, o in zip(msg.gpus, obj["gpus"], strict=True):
                for key in ("mem_used_mib", "mem_total_mib", "util_pct", "temp_c", "power_w",
                            "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz", "pcie_gen",
                            "pcie_gen_max", "pcie_width", "pcie_width_max"):
                    assert getattr(g, key) == o[key], key
                assert list(g.clock_reasons) == o["clock_reasons"]
                assert g.state is GpuState.OK
            assert msg.host.load1 == obj["host"]["load1"]
            assert {d.name: d.util for d in msg.disks} == {
                n: d["util"] for n, d in obj["disks"].items()}
        elif obj["type"] == "event":
            assert isinstance(msg, LogEvent)
            assert msg.line == obj["line"] and msg.source == obj["source"]
        elif obj["type"] == "logsource":
            assert isinstance(msg, LogSourceState)
            assert msg.state is LogSourceStatus.SIMULATED and msg.via is None
    assert any(isinstance(m, LogEvent) and "Xid" in m.line for m in msgs)
    assert sum(isinstance(m, LogSourceState) for m in msgs) == 1


def _assert_hello_facts(msg: Hello, obj: dict) -> None:
    """The per-GPU facts, software, disks, swap and dataset space as the agent sent them."""
    gpu_keys = ("serial", "vbios", "persistence_mode", "ecc_mode", "ecc_mode_pending",
                "mig_mode", "power_limit_default_w")
    for g, o in zip(msg.facts.gpus, obj["gpus"], strict=True):
        assert {k: getattr(g, k) for k in gpu_keys} == {k: o[k] for k in gpu_keys}
    sw = obj["host"]["software"]
    assert msg.facts.software == SoftwareVersions(
        nvcc=sw["nvcc"], nccl=sw["nccl"], torch=sw["torch"], cuda_runtime=sw["cuda_runtime"],
        container_runtimes=tuple(sw["container_runtimes"]), fabric_manager=sw["fabric_manager"])
    assert msg.facts.block_devices == tuple(BlockDevice(**d)
                                            for d in obj["host"]["block_devices"])
    assert msg.facts.swap_used_bytes == obj["host"]["swap_used_bytes"] == 0
    assert msg.datasets == tuple(DatasetDevice(**d) for d in obj["datasets"])
    assert msg.datasets[0].free_bytes is not None


def test_hello_without_the_newer_facts_decodes_with_defaults() -> None:
    """An older agent's hello: no GPU modes, software, disks, swap in use or dataset space."""
    msg = decode_line(json.dumps({
        "type": "hello", "v": 1, "agent": "0.0.9", "ts": 1.0,
        "host": {"hostname": "old", "mem_total_bytes": 1024, "swap_total_bytes": 0},
        "gpus": [{"index": 0, "uuid": "GPU-1", "bus_id": "0000:18:00.0", "name": "H100",
                  "mem_total_mib": 81559.0}],
        "datasets": [{"path": "/data", "device": "nvme0n1"}]}))
    assert isinstance(msg, Hello)
    g = msg.facts.gpus[0]
    assert (g.serial, g.vbios, g.persistence_mode, g.ecc_mode, g.ecc_mode_pending, g.mig_mode,
            g.power_limit_default_w) == (None,) * 7
    assert msg.facts.software == SoftwareVersions()
    assert (msg.facts.block_devices, msg.facts.swap_used_bytes) == ((), None)
    assert msg.datasets == (DatasetDevice("/data", "nvme0n1"),)


def test_error_message_decodes() -> None:
    msg = decode_line(b'{"type":"error","v":1,"ts":5,"probe":"nvml","message":"GpuIsLost"}')
    assert msg == ProbeError(ts=5.0, probe="nvml", message="GpuIsLost")


def test_logsource_message_decodes() -> None:
    msg = decode_line(json.dumps({
        "type": "logsource", "v": 1, "ts": 7.5, "source": "kernel", "state": "denied",
        "via": None, "detail": "journalctl: No journal files were opened due to insufficient "
        "permissions.; dmesg: read kernel buffer failed: Operation not permitted",
        "fix": "add ops to the systemd-journal or adm group", "future": 1}))
    assert msg == LogSourceState(
        ts=7.5, source="kernel", state=LogSourceStatus.DENIED, via=None,
        detail="journalctl: No journal files were opened due to insufficient permissions.; "
               "dmesg: read kernel buffer failed: Operation not permitted",
        fix="add ops to the systemd-journal or adm group")
    ok = decode_line(b'{"type":"logsource","v":1,"ts":1,"source":"kernel","state":"ok",'
                     b'"via":"file:/var/log/kern.log","detail":"","fix":null}')
    assert isinstance(ok, LogSourceState)
    assert (ok.state, ok.via, ok.detail, ok.fix) == (
        LogSourceStatus.OK, "file:/var/log/kern.log", "", None)
    assert ok.state == "ok"  # a str enum: compares with the wire value


def test_logsource_from_a_newer_agent_and_broken_ones() -> None:
    newer = decode_line(b'{"type":"logsource","v":1,"ts":1,"source":"kernel","state":"paused"}')
    assert isinstance(newer, LogSourceState) and newer.state is LogSourceStatus.UNAVAILABLE
    assert (newer.via, newer.detail, newer.fix) == (None, "", None)
    for line in (b'{"type":"logsource","v":1,"ts":1,"source":"kernel"}',
                 b'{"type":"logsource","v":1,"ts":1,"source":"kernel","state":3}'):
        with pytest.raises(ProtocolError, match="bad logsource message"):
            decode_line(line)


def test_event_boot_and_cursor() -> None:
    msg = decode_line(b'{"type":"event","v":1,"ts":2,"source":"kernel","line":"NVRM: Xid 79",'
                      b'"boot":"5d1e","cursor":"s=ab;i=9"}')
    assert msg == LogEvent(ts=2.0, source="kernel", line="NVRM: Xid 79", boot="5d1e",
                           cursor="s=ab;i=9")
    plain = decode_line(b'{"type":"event","v":1,"ts":2,"source":"job:/x","line":"a",'
                        b'"boot":7}')
    assert isinstance(plain, LogEvent) and (plain.boot, plain.cursor) == (None, None)


def test_unknown_fields_and_types_are_ignored() -> None:
    msg = decode_line(json.dumps({"type": "sample", "v": 1, "ts": 1.0, "seq": 3, "new": [1],
                                  "gpus": [{"index": 0, "temp_c": 50, "quantum": True}]}))
    assert isinstance(msg, HostSample) and msg.gpus[0].temp_c == 50.0
    with pytest.raises(UnknownMessageType):
        decode_line(b'{"type":"telemetry2","v":2}')


@pytest.mark.parametrize("line", [
    b"Welcome to gpu-07! Authorized use only.",
    b'{"type":"sample","v":1,"ts":1,"gpus":[{"ind',
    b"[1, 2, 3]",
    b'{"type":"sample","v":1}',
    b'{"type":"event","v":1,"ts":1,"source":"kernel","line":42}',
    b"\xff\xfe\x00garbage",
    b'{"type":"hello","host":{}}',
])
def test_garbage_is_a_protocol_error(line: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_line(line)


def test_non_numbers_become_none() -> None:
    msg = decode_line(b'{"type":"sample","v":1,"ts":1,"gpus":[{"index":0,"temp_c":"hot",'
                      b'"power_w":true,"util_pct":1e999}]}')
    assert isinstance(msg, HostSample)
    g = msg.gpus[0]
    assert (g.temp_c, g.power_w, g.util_pct) == (None, None, None)


def test_reader_survives_garbage_partial_and_huge_lines(agent_lines: list[bytes]) -> None:
    reader = MessageReader()
    hello, sample = _first(agent_lines, "hello"), _first(agent_lines, "sample")
    stream = (b"banner line\n" + hello + b"\n" + b"x" * (1024 * 1024) + b"\n"
              + b'{"type":"nope"}\n' + sample + b"\n" + b'{"broken": \n')
    got = []
    for i in range(0, len(stream), 4093):  # chunk boundaries fall inside lines
        got += reader.feed(stream[i:i + 4093])
    got += reader.close()
    assert [type(m) for m in got] == [Hello, HostSample]
    assert reader.stats.overlong == 1
    assert reader.stats.garbled == 2
    assert reader.stats.unknown_type == 1


def test_huge_line_in_one_chunk_then_valid_line(agent_lines: list[bytes]) -> None:
    reader = MessageReader()
    got = reader.feed(b"{" + b"9" * (1024 * 1024) + b"}\n" + _first(agent_lines, "sample")
                      + b"\n")
    assert [type(m) for m in got] == [HostSample]
    assert reader.stats.overlong == 1


def test_final_line_without_newline_is_kept(agent_lines: list[bytes]) -> None:
    reader = MessageReader()
    assert reader.feed(_first(agent_lines, "sample")) == []
    assert [type(m) for m in reader.close()] == [HostSample]


ODD_VALUES: list[object] = [None, True, False, 0, -1, 7, 2**40, 2**63 - 1, 1.5, -0.0, 1e300,
                            "x", "", [], {}, [1, "a", None], {"a": 1}]


def _both_paths(line: bytes) -> tuple[object, object]:
    """The orjson fast path and the standard library's checked path, on one line."""
    orjson = pytest.importorskip("orjson")
    return protocol._fast_sample(orjson.loads(line)), protocol._decode_sample(json.loads(line))


def test_fast_sample_path_equals_the_checked_path(agent_lines: list[bytes]) -> None:
    samples = [x for x in agent_lines if json.loads(x)["type"] == "sample"]
    assert samples
    for line in samples:
        fast, checked = _both_paths(line)
        assert fast == checked
        assert isinstance(fast, HostSample) and fast.gpus
        # same types, not only equal values: an int where a float is due becomes a float
        for a, b in zip(fast.gpus, checked.gpus, strict=True):  # type: ignore[attr-defined]
            assert {k: type(v) for k, v in vars(a).items()} == \
                {k: type(v) for k, v in vars(b).items()}


def test_fast_sample_path_agrees_on_odd_values(agent_lines: list[bytes]) -> None:
    """Every GPU, host and disk field replaced by values of every JSON type in turn."""
    import random

    rng = random.Random(5)
    base = json.loads(_first(agent_lines, "sample"))
    places = ([("gpus", 0, k) for k in base["gpus"][0]] + [("host", None, k) for k in base["host"]]
              + [("disks", name, k) for name, d in base["disks"].items() for k in d])
    places += [("gpus", 0, "processes"), ("gpus", 0, "clock_reasons"), ("gpus", 0, "state")]
    for _ in range(400):
        obj = json.loads(json.dumps(base))
        for part, sub, key in rng.sample(places, 6):
            target = obj[part] if sub is None else obj[part][sub]
            target[key] = rng.choice(ODD_VALUES)
        fast, checked = _both_paths(json.dumps(obj).encode())
        assert fast == checked, obj


def test_lines_orjson_refuses_take_the_checked_path() -> None:
    """NaN, Infinity and overflowing numbers are not JSON; the standard library reads them."""
    line = (b'{"type":"sample","v":1,"ts":5.0,"seq":1,"host":{"cpu_pct":NaN,"load1":1e999},'
            b'"gpus":[{"index":0,"temp_c":Infinity,"power_w":250}]}')
    sample = decode_line(line)
    assert isinstance(sample, HostSample)
    assert sample.host.cpu_pct is None and sample.host.load1 is None
    assert sample.gpus[0].temp_c is None and sample.gpus[0].power_w == 250.0
    assert type(sample.gpus[0].power_w) is float
