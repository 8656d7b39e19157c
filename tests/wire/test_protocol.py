"""Wire protocol v1: round trip from the real agent, and a reader that survives junk."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from probes.errors import ProtocolError
from probes.wire import decode_fields
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
    return (decode_fields._fast_sample(orjson.loads(line)),
            decode_fields._decode_sample(json.loads(line)))


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


# --- hostile hosts (issue 18): every string is data, every number believable ---------------

HOSTILE = ("[@click=app.quit]x[/] [/] [link=https://e.example]l[/link] \x1b]0;TITLE\x07 "
           "\x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J \u202e \u200b \x9b31m \ud800 \x7f")
UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e"
                    "\u2060-\u2069\u2028\u2029\ufeff\ud800-\udfff]")


def _strings(value: object) -> list[str]:
    """Every string inside a decoded message (dataclasses, tuples, dicts)."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name))]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _strings(v)]
    return []


def _hostile_hello() -> bytes:
    h = HOSTILE
    return json.dumps({
        "type": "hello", "v": 1, "ts": 5.0, "agent": h,
        "host": {"hostname": h, "kernel": h, "os": h, "driver_version": h, "cuda_version": h,
                 "cpu_model": h, "software": {"nccl": h, "container_runtimes": [h]},
                 "block_devices": [{"name": h, "model": h}]},
        "gpus": [{"index": 0, "name": h, "uuid": h, "bus_id": h, "serial": h, "vbios": h}],
        "probes": {h: {"available": False, "reason": h}}, "simulated": [h],
        "nics": [{"name": h, "ports": [{"state": h, "rate": h}]}],
        "datasets": [{"path": h, "device": h}], "pcie": {h: [{"address": h}]},
        "topo_text": "\tGPU0\tGPU1\nGPU0\t X \tNV18 " + h + "\n"}).encode()


def _hostile_sample(extra: str = "") -> bytes:
    h = HOSTILE
    return (json.dumps({
        "type": "sample", "v": 1, "ts": 5.0, "seq": 1, "host": {"cpu_pct": 1.0},
        "gpus": [{"index": 0, "pstate": h, "uuid": h, "clock_reasons": [h],
                  "processes": [{"pid": 1, "name": h, "user": h, "used_mib": 1.0}]}],
        "disks": {h: {"util": 1.0}}})[:-1] + extra + "}").encode()


@pytest.mark.parametrize("line", [
    _hostile_hello(), _hostile_sample(), _hostile_sample(',"nan":NaN'),
    json.dumps({"type": "event", "ts": 5.0, "source": HOSTILE, "line": HOSTILE}).encode(),
    json.dumps({"type": "error", "probe": HOSTILE, "message": HOSTILE}).encode(),
    json.dumps({"type": "logsource", "source": HOSTILE, "state": "ok", "detail": HOSTILE,
                "fix": HOSTILE, "via": HOSTILE}).encode(),
], ids=["hello", "sample-fast", "sample-checked", "event", "error", "logsource"])
def test_every_host_string_is_printable_after_decode(line: bytes) -> None:
    msg = decode_line(line)
    texts = _strings(msg)
    assert any("\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in t for t in texts)  # evidence kept, visible
    assert any("<U+202E>" in t for t in texts)
    for t in texts:
        if isinstance(msg, Hello) and t == msg.topo_text:
            t = t.replace("\n", "").replace("\t", "")
        assert not UNSAFE.search(t), t


def test_topology_text_keeps_its_layout() -> None:
    msg = decode_line(_hostile_hello())
    assert isinstance(msg, Hello) and msg.topo_text is not None
    assert msg.topo_text.startswith("\tGPU0\tGPU1\nGPU0\t X \tNV18 ")
    assert "\x1b" not in msg.topo_text


@pytest.mark.parametrize("line", [
    b"[" * 100_000, b'{"a":' * 50_000, b"[" * 3000 + b"]" * 3000,
    b'{"type":"event","line":"x\\\\","deep":' + b"[" * 900 + b"]" * 900 + b"}",
    b'{"type":"sample","ts":' + b"9" * 5000 + b"}",
], ids=["list-100000-deep", "object-50000-deep", "list-3000-closed", "orjson-depth-900-walked",
        "5000-digit-number"])
def test_any_parser_failure_is_a_garbled_line_never_an_exception(line: bytes) -> None:
    reader = MessageReader()
    good = json.dumps({"type": "sample", "v": 1, "ts": 5.0, "gpus": []}).encode()
    got = reader.feed(line + b"\n" + good + b"\n")
    assert [type(m) for m in got] == [HostSample]
    assert reader.stats.garbled == 1


@pytest.mark.parametrize("exc", [RecursionError, OverflowError, IndexError, ZeroDivisionError])
def test_a_decoder_that_raises_anything_gives_a_garbled_line(
        monkeypatch: pytest.MonkeyPatch, exc: type[Exception]) -> None:
    def boom(obj: object) -> None:
        raise exc("boom")
    monkeypatch.setitem(decode_fields._DECODERS, "event", boom)
    reader = MessageReader()
    assert reader.feed(b'{"type":"event","line":"x"}\n') == []
    assert reader.stats.garbled == 1


def test_absurd_numbers_become_none_or_drop_the_gpu() -> None:
    hello = decode_line(
        b'{"type":"hello","v":1,"ts":1e308,"host":{"mem_total_bytes":1' + b"0" * 400
        + b',"cpu_cores_physical":-4,"swap_total_bytes":-1e308,"numa_nodes":NaN},'
        b'"gpus":[{"index":100000000000000000000},{"index":-3},{"index":2.5e9},'
        b'{"index":1,"mem_total_mib":Infinity}]}')
    assert isinstance(hello, Hello)
    f = hello.facts
    assert (f.mem_total_bytes, f.cpu_cores_physical, f.swap_total_bytes, f.numa_nodes) == \
        (None, None, None, None)
    assert [g.index for g in f.gpus] == [1] and f.gpus[0].mem_total_mib is None
    assert hello.ts == 0.0
    for path in ("fast", "checked"):  # orjson takes 1e308; NaN sends the line to json
        tail = b',"x":NaN}' if path == "checked" else b"}"
        sample = decode_line(
            b'{"type":"sample","v":1,"ts":5.0,"host":{"mem_used_bytes":-5,"load1":1e308},'
            b'"gpus":[{"index":0,"mem_used_mib":-1.0,"temp_c":1e300,"ecc_corrected_volatile":'
            b'18446744073709551615,"processes":[{"pid":-1,"used_mib":1e308}]},'
            b'{"index":9223372036854775807}],"disks":{"sda":{"util":-3}}' + tail)
        assert isinstance(sample, HostSample), path
        g = sample.gpus[0]
        assert [x.index for x in sample.gpus] == [0]
        assert (g.mem_used_mib, g.temp_c, g.ecc_corrected_volatile) == (None, None, None)
        assert g.processes is not None and g.processes[0].pid is None
        assert g.processes[0].used_mib is None
        assert (sample.host.mem_used_bytes, sample.host.load1) == (None, None)
        assert sample.disks[0].util is None


@pytest.mark.parametrize("ts", [b"1e308", b"-1e308", b"-5", b"1" + b"0" * 400, b"NaN"])
def test_a_sample_with_an_unbelievable_time_is_garbled(ts: bytes) -> None:
    reader = MessageReader()
    assert reader.feed(b'{"type":"sample","v":1,"ts":' + ts + b',"gpus":[]}\n') == []
    assert reader.stats.garbled == 1


def test_a_disconnect_reason_quoting_the_host_is_sanitised() -> None:
    """The reason quotes the agent's last stderr line or an SSH server's text."""
    from probes.wire.events import Disconnected

    d = Disconnected(5.0, "agent exited with status 1: \x1b]52;c;ZWNobyBwd25lZA==\x07 \u202e")
    assert d.reason == ("agent exited with status 1: \\x1b]52;c;ZWNobyBwd25lZA==\\x07 "
                        "<U+202E>")
