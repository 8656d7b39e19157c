"""probes.store.codec: every recordable item survives JSON, old data still decodes, bad data
is named."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
from typing import Any

import pytest

import probes.wire.samples as samples_module
from probes.analysis.findings import Finding
from probes.errors import DisconnectKind, WatcherFault
from probes.store import codec
from probes.store.codec import CodecError, decode, encode
from probes.triage import Severity, Step
from probes.wire.events import (
    ClockOffset,
    Connected,
    Disconnected,
    JobChange,
    SourceHealth,
    XidEvent,
)
from probes.wire.protocol import StreamStats, decode_line
from probes.wire.samples import (
    BlockDevice,
    DatasetDevice,
    DiskStats,
    FabricSample,
    GpuInfo,
    GpuProcess,
    GpuSample,
    GpuState,
    Hello,
    HostFacts,
    HostSample,
    HostStats,
    IbPortSample,
    LogEvent,
    LogSourceState,
    LogSourceStatus,
    Nic,
    NicPort,
    NvLinkSample,
    PcieLink,
    ProbeError,
    ProbeStatus,
    SoftwareVersions,
)


def _links(bus: str, numa: int) -> tuple[PcieLink, ...]:
    return (PcieLink(bus, 32.0, 16, 32.0, 16, numa, "0-55"),
            PcieLink("0000:17:00.0", 16.0, 8, 32.0, 16, None, None))


def sample_8gpu(seq: int = 7, ts: float = 1_700_000_000.25) -> HostSample:
    """A busy 8-GPU host with one lost GPU, throttling, processes and a PCIe refresh."""
    gpus = [GpuSample(index=i, uuid=f"GPU-{i:08x}-aaaa", mem_used_mib=60000.0 + i,
                      mem_total_mib=81559.0, util_pct=97.5, mem_util_pct=50.0, temp_c=66.0 + i,
                      power_w=615.9, power_limit_w=700.0, sm_clock_mhz=1980.0,
                      sm_clock_max_mhz=1980.0, clock_reasons=("sw_power_cap", "hw_slowdown"),
                      pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16,
                      pstate="P0", ecc_corrected_volatile=i, remap_pending=False,
                      nvlink_up=18, nvlink_links=18, persistence=True, pcie_replay=0,
                      processes=(GpuProcess(41000 + i, "python", "train", 59480.0),))
            for i in range(7)]
    gpus.append(GpuSample(index=-1, state=GpuState.LOST, bus_id="0000:db:00.0", processes=None))
    return HostSample(
        ts=ts, seq=seq, gpus=tuple(gpus),
        host=HostStats(cpu_pct=33.8, load1=38.6, mem_used_bytes=451903942997,
                       mem_total_bytes=2199023255552, swap_in_pages_s=0.0),
        disks=(DiskStats("nvme0n1", r_s=833.3, util=17.9), DiskStats("sda")),
        pcie={"0000:18:00.0": _links("0000:18:00.0", 0), "0000:2a:00.0": ()})


def hello_full() -> Hello:
    facts = HostFacts(
        hostname="node-01", kernel="5.15.0", os_name="Ubuntu 22.04", python="3.11.7",
        driver_version="550.90.07", cuda_version="12.4", cpu_model="Xeon",
        cpu_cores_logical=224, cpu_cores_physical=112, mem_total_bytes=2 << 40,
        swap_total_bytes=None,
        gpus=(GpuInfo(0, "GPU-1", "0000:18:00.0", "H100", 81559.0, 90.0, 92.0, 5, "1654",
                      "96.00", True, True, False, None, 700.0),
              GpuInfo(1, None, None, None, None)),
        numa_nodes=2, probes=(ProbeStatus("nvml", True), ProbeStatus("psutil", False, "absent")),
        simulated=("leak",),
        software=SoftwareVersions(nvcc="12.4.131", container_runtimes=("docker",)),
        block_devices=(BlockDevice("nvme0n1", 3840755982336, False, "SAMSUNG", "nvme"),),
        swap_used_bytes=0)
    return Hello(ts=1_700_000_000.0, protocol=1, agent_version="0.1.0", facts=facts,
                 pcie={"0000:18:00.0": _links("0000:18:00.0", 0)},
                 nics=(Nic("mlx5_0", "infiniband", "0000:19:00.0", 0,
                           ports=(NicPort(1, "4: ACTIVE", "400 Gb/sec", "InfiniBand"),)),
                       Nic("eth0", "net", None, None, "up", 100000)),
                 topo_text="\tGPU0\nGPU0\t X \n", datasets=(DatasetDevice("/data", "nvme0n1",
                                                                            1, 2),))


def all_items() -> list[codec.Item]:
    """One or more of every recordable type, with the awkward fields filled in."""
    return [
        hello_full(),
        Hello(ts=1.0, protocol=1, agent_version="x",
              facts=HostFacts("h", None, None, None, None, None, None, None, None, None, None)),
        sample_8gpu(),
        HostSample(ts=2.0, seq=0),
        LogEvent(3.0, "kernel", "NVRM: Xid 79 ünïcode", boot="b1", cursor="s=1;i=2"),
        LogEvent(3.5, "job:/var/log/train.log", ""),
        *[LogSourceState(4.0, "kernel", s, via="dmesg", detail="d", fix="add to adm")
          for s in LogSourceStatus],
        ProbeError(5.0, "nvml", "timeout after 2 s"),
        Connected(6.0),
        Disconnected(7.0, "connection reset", retry_in_s=2.5,
                     stats=StreamStats(lines=10, garbled=1), kind=DisconnectKind.STALLED),
        Disconnected(7.5, "eof"),
        ClockOffset(7.6, -600.25, -600.25, 12),
        JobChange(7.7, "48211", "FAILED", "NonZeroExitCode", "3:0", ("n1", "n2"),
                  "node list changed"),
        SourceHealth(7.6, "collector 2", WatcherFault.COLLECTOR_STALLED, "no heartbeat for 3 s"),
        SourceHealth(7.7, "prometheus"),
        XidEvent(7.8, 6, 79, "0000:ba:00.0", "GPU-38a383e9-ba83-3e89-3df2-018dabd3ad01"),
        XidEvent(7.9, 0, 48),
        FabricSample(9.0, 30.0, ports=(
            IbPortSample("mlx5_3", 1, "DOWN", "Polling", 10.0, "InfiniBand",
                         errors={"link_downed": 1}, rx_bytes_s=0.0, unknown=("port_rcv_data",)),),
            nvlinks=(NvLinkSample(0, 5, False, None, 12, 1, 3),)),
        FabricSample(9.5, nvlink_text="GPU 0: NVIDIA H100\n\t Link 0: <inactive>"),
        Finding(Step.NCCL, "nccl-timeout", Severity.CRITICAL, "rank 3 timed out", "node-01",
                gpu=3, xid=None, evidence="Watchdog caught collective", ts=8.0,
                action="check the fabric", source="job:/x.log", count=4,
                extra={"ranks": [1, 3], "timeout_ms": 600000, "nested": {"a": None}},
                context=("line before", "line just before")),
        Finding(Step.GPU, "gpu-lost", Severity.WARNING, "GPU 7 is lost", "node-02"),
    ]


def _json_round_trip(item: codec.Item) -> codec.Item:
    return decode(json.loads(json.dumps(encode(item))))


def _only_json_types(value: Any) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is list:
        return all(_only_json_types(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _only_json_types(v) for k, v in value.items())
    return False


@pytest.mark.parametrize("item", all_items(), ids=lambda i: type(i).__name__)
def test_every_item_type_round_trips_through_json(item: codec.Item) -> None:
    data = encode(item)
    assert data["t"] == codec.kind_of(item)
    assert _only_json_types(data), data
    back = _json_round_trip(item)
    assert back == item
    assert type(back) is type(item)


def test_tuples_and_enums_come_back_as_tuples_and_members() -> None:
    back = _json_round_trip(sample_8gpu())
    assert isinstance(back, HostSample)
    assert isinstance(back.gpus, tuple) and isinstance(back.gpus[0].clock_reasons, tuple)
    assert back.gpus[-1].state is GpuState.LOST
    assert back.gpus[-1].processes is None
    assert back.pcie is not None
    assert isinstance(back.pcie["0000:18:00.0"], tuple)
    assert back.pcie["0000:18:00.0"][0] == PcieLink("0000:18:00.0", 32.0, 16, 32.0, 16, 0, "0-55")
    assert back.pcie["0000:2a:00.0"] == ()


def test_a_disconnect_kind_is_stored_as_its_string_and_read_back_as_the_member() -> None:
    item = Disconnected(7.0, "no data for 2 s", kind=DisconnectKind.STALLED)
    data = encode(item)
    assert data["kind"] == "stalled" and type(data["kind"]) is str
    back = decode(json.loads(json.dumps(data)))
    assert isinstance(back, Disconnected) and back.kind is DisconnectKind.STALLED
    assert Disconnected(7.5, "eof").kind is DisconnectKind.DOWN


def test_finding_extra_and_context_survive() -> None:
    f = all_items()[-2]
    assert isinstance(f, Finding)
    back = _json_round_trip(f)
    assert isinstance(back, Finding)
    # extra and context are compare=False: check them by hand.
    assert back.extra == {"ranks": [1, 3], "timeout_ms": 600000, "nested": {"a": None}}
    assert back.context == ("line before", "line just before")
    assert back.step is Step.NCCL and back.severity is Severity.CRITICAL


def test_extra_with_tuples_and_enums_is_encoded_as_plain_json() -> None:
    f = Finding(Step.GPU, "x", Severity.INFO, "s", "h", extra={"cpus": (1, 2), "step": Step.GPU})
    data = encode(f)
    assert data["extra"] == {"cpus": [1, 2], "step": "gpu"}


def test_extra_that_is_not_json_names_the_field() -> None:
    f = Finding(Step.GPU, "x", Severity.INFO, "s", "h", extra={"when": object()})
    with pytest.raises(CodecError) as e:
        encode(f)
    assert (e.value.cls, e.value.field) == ("Finding", "extra")


def test_simulator_stream_round_trips() -> None:
    """Real agent output (several scenarios), decoded by the protocol, then recorded."""
    proc = subprocess.run([sys.executable, "-m", "probes.agent", "--simulate",
                           "xid79,throttle,leak", "--count", "4", "--fast", "--kernel-log", "auto"],
                          capture_output=True, text=True, timeout=60, check=True)
    items = [decode_line(line) for line in proc.stdout.splitlines() if line.strip()]
    assert any(isinstance(i, Hello) for i in items)
    assert sum(isinstance(i, HostSample) for i in items) == 4
    for item in items:
        assert _json_round_trip(item) == item


def test_none_fields_are_left_out_and_come_back_as_none() -> None:
    data = codec.encode_dataclass(GpuSample(index=3))
    assert "uuid" not in data and "temp_c" not in data
    assert data["state"] == "ok" and data["clock_reasons"] == []
    assert codec.decode_dataclass(GpuSample, data) == GpuSample(index=3)


def _defaults(cls: type[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


@pytest.mark.parametrize("item", all_items(), ids=lambda i: type(i).__name__)
def test_a_recording_from_before_a_field_existed_decodes_with_defaults(item: codec.Item) -> None:
    """Deleting any defaulted key (as if the field were added later) gives the default."""
    data = encode(item)
    for name, default in _defaults(type(item)).items():
        old = {k: v for k, v in data.items() if k != name}
        back = decode(old)
        assert getattr(back, name) == default, name


def test_missing_keys_inside_nested_objects_take_defaults() -> None:
    data = json.loads(json.dumps(encode(sample_8gpu())))
    for g in data["gpus"]:
        for key in ("clock_reasons", "state", "nvlink_up", "processes"):
            g.pop(key, None)
    del data["host"]
    back = decode(data)
    assert isinstance(back, HostSample)
    assert back.host == HostStats()
    assert all(g.clock_reasons == () and g.state is GpuState.OK and g.processes is None
               for g in back.gpus)


def test_unknown_keys_are_ignored_at_every_level() -> None:
    data = json.loads(json.dumps(encode(sample_8gpu())))
    data["new_top_level"] = {"anything": 1}
    data["gpus"][0]["fan_pct"] = 40
    data["pcie"]["0000:18:00.0"][0]["new_link_field"] = "x"
    assert decode(data) == sample_8gpu()


def test_a_missing_required_field_names_class_and_field() -> None:
    data = encode(sample_8gpu())
    del data["gpus"][2]["index"]
    with pytest.raises(CodecError) as e:
        decode(data)
    assert (e.value.cls, e.value.field) == ("GpuSample", "index")
    assert "missing" in str(e.value)


@pytest.mark.parametrize(("path", "value", "cls", "field"), [
    (("ts",), "yesterday", "HostSample", "ts"),
    (("seq",), 1.5, "HostSample", "seq"),
    (("seq",), True, "HostSample", "seq"),
    (("gpus", 0, "temp_c"), "hot", "GpuSample", "temp_c"),
    (("gpus", 0, "state"), "melted", "GpuSample", "state"),
    (("gpus", 0, "persistence"), 1, "GpuSample", "persistence"),
    (("gpus", 0, "clock_reasons"), "sw_power_cap", "GpuSample", "clock_reasons"),
    (("gpus", 0, "clock_reasons"), [1], "GpuSample", "clock_reasons"),
    (("gpus", 0, "processes", 0, "pid"), "41000", "GpuProcess", "pid"),
    (("gpus",), {"0": {}}, "HostSample", "gpus"),
    (("gpus", 1), [], "GpuSample", None),
    (("host",), [], "HostStats", None),
    (("pcie",), [], "HostSample", "pcie"),
    (("pcie", "0000:18:00.0"), {"address": "x"}, "HostSample", "pcie"),
    (("pcie", "0000:18:00.0", 0, "width"), "x16", "PcieLink", "width"),
    (("disks", 0, "name"), None, "DiskStats", "name"),
])
def test_a_value_of_the_wrong_type_names_class_and_field(
        path: tuple[Any, ...], value: Any, cls: str, field: str | None) -> None:
    data = json.loads(json.dumps(encode(sample_8gpu())))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(CodecError) as e:
        decode(data)
    assert e.value.cls == cls
    assert e.value.field == field
    assert cls in str(e.value)


def test_an_int_in_a_float_field_becomes_a_float() -> None:
    data = encode(sample_8gpu())
    data["ts"] = 1_700_000_000
    data["gpus"][0]["temp_c"] = 66
    back = decode(data)
    assert isinstance(back, HostSample)
    assert type(back.ts) is float and type(back.gpus[0].temp_c) is float


def test_enum_values_outside_the_enum_are_refused() -> None:
    data = encode(LogSourceState(1.0, "kernel", LogSourceStatus.OK))
    data["state"] = "granted-by-a-newer-agent"
    with pytest.raises(CodecError) as e:
        decode(data)
    assert (e.value.cls, e.value.field) == ("LogSourceState", "state")


@pytest.mark.parametrize("data", [[], "sample", None, {"t": "nonsense"}, {"ts": 1.0}, {"t": 3}])
def test_not_an_item_at_all(data: Any) -> None:
    with pytest.raises(CodecError):
        decode(data)


def test_encoding_something_unrecordable_raises_codec_error() -> None:
    with pytest.raises(CodecError):
        encode(StreamStats())  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        codec.kind_of("text")  # type: ignore[arg-type]


def test_every_dataclass_in_samples_has_a_plan() -> None:
    """A field type added to samples.py that the codec cannot handle fails here, not in use."""
    classes = [c for _, c in inspect.getmembers(samples_module, inspect.isclass)
               if dataclasses.is_dataclass(c) and c.__module__ == samples_module.__name__]
    assert HostSample in classes and NicPort in classes
    for cls in classes:
        assert codec._plan(cls) is codec._plan(cls)
    for cls in (Connected, Disconnected, StreamStats, Finding):
        codec._plan(cls)


def test_kinds_are_unique_and_cover_every_item_type() -> None:
    kinds = {codec.kind_of(i) for i in all_items()}
    assert kinds == set(codec.KINDS)
