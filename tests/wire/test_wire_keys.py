"""Every key the agent sends is a field the console reads, and the simulator fills them all.

The reader ignores unknown keys by design (a newer agent may send more), so a misspelt key
(``temp_mem_C``) would be dropped without a sound.  Here the messages of the real agent (the
simulator in every scenario; a bare host with fake NVML, nvidia-smi and journalctl) are
walked against the typed classes of ``probes/wire/samples.py``, following the decode
mapping of ``probes/wire/protocol.py``: each key must name a field of its class, and the
checked decoder must actually read it.  The simulator, which stands in for a full host in
the demo and the tests, must send every field except those named below with a reason.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from probes.agent import SIM_SCENARIOS
from probes.transport.bootstrap import shipped_source
from probes.wire import decode_fields
from probes.wire.samples import (
    ClockFacts,
    DiskStats,
    FabricSample,
    GpuProcess,
    GpuSample,
    Hello,
    HostFacts,
    HostSample,
    IbPortSample,
    LogEvent,
    LogSourceState,
    Nic,
    ProbeError,
    ProbeStatus,
)
from tests.agent.test_agent_kernel_log import _journal
from tests.conftest import REPO
from tests.support.ib_sysfs import IbTree

MESSAGES: dict[str, type] = {"hello": Hello, "sample": HostSample, "event": LogEvent,
                             "logsource": LogSourceState, "error": ProbeError,
                             "fabric": FabricSample}
"""Each message type and the class the console decodes it into."""
ENVELOPE = {"type", "v"}
"""Top-level keys of every message that select and check the decoder, not fields."""
RENAMED: dict[type, dict[str, str]] = {
    Hello: {"v": "protocol", "agent": "agent_version", "host": "facts",
            "gpus": "facts.gpus", "probes": "facts.probes", "simulated": "facts.simulated"},
    HostFacts: {"os": "os_name"},
    FabricSample: {"nvlink": "nvlinks"},
}
"""Wire key -> field path where protocol.py stores it under another name (or one level down)."""


class Shape(Enum):
    """How a nested value is laid out on the wire."""

    OBJECT = "object"
    LIST = "list of objects"
    MAP = "name -> object"
    CHAINS = "name -> list of objects"
    ROWS = "GPUs, each with rows of numbers"


MAPS: dict[tuple[type, str], Shape] = {
    (Hello, "probes"): Shape.MAP, (Hello, "pcie"): Shape.CHAINS,
    (HostSample, "disks"): Shape.MAP, (HostSample, "pcie"): Shape.CHAINS,
    (FabricSample, "nvlink"): Shape.ROWS,
}
"""Nested values keyed by name (the name fills the inner class's ``name`` field)."""
FROM_MAP_KEY = {(ProbeStatus, "name"), (DiskStats, "name")}

SIM_LEAVES_OUT: dict[tuple[type, str], str] = {
    (HostFacts, "gpus"): "sent beside ``host`` in the hello",
    (HostFacts, "probes"): "sent beside ``host`` in the hello",
    (HostFacts, "simulated"): "sent beside ``host`` in the hello",
    (ProbeStatus, "reason"): "only a probe that is not available says why",
    (Nic, "state"): "an InfiniBand HCA reports its ports instead (Ethernet NICs have these)",
    (Nic, "speed_mbps"): "an InfiniBand HCA reports its ports instead (Ethernet NICs have these)",
    (GpuSample, "bus_id"): "only nvidia-smi repeats it per sample; the hello has it",
    (GpuSample, "pcie_tx_kbs"): "PCIe throughput is not simulated",
    (GpuProcess, "container"): "simulated hosts run their job on bare metal",
    (GpuProcess, "runtime"): "simulated hosts run their job on bare metal",
    (GpuProcess, "pod"): "simulated hosts run their job on bare metal",
    (GpuSample, "pcie_rx_kbs"): "PCIe throughput is not simulated",
    (LogEvent, "boot"): "only journal and dmesg lines carry a boot id",
    (LogEvent, "cursor"): "only journal lines carry a cursor",
    (LogSourceState, "note"): "only a syslog-file kernel log carries a caveat",
    (ClockFacts, "boot_time"): "a simulated host has no kernel boot: its kernel lines carry "
                               "no [sec.usec] stamp",
    (FabricSample, "nvlink_text"): "a simulated host has NVML: its NVLinks come as numbers",
    (IbPortSample, "unknown"): "a simulated counter is never reset nor stuck at its top",
}
"""Fields a simulated host does not send, each with the reason."""


# ---------------------------------------------------------------- walking messages

@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _element(tp: Any) -> type | None:
    """The dataclass inside ``X``, ``X | None``, ``tuple[X, ...]`` or
    ``Mapping[str, tuple[X, ...]]``; None for a scalar field."""
    if dataclasses.is_dataclass(tp):
        return typing.cast(type, tp)
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        inner = [_element(a) for a in args if a is not type(None)]
        return next((e for e in inner if e is not None), None)
    if typing.get_origin(tp) in (tuple, Mapping):
        return next((e for e in (_element(a) for a in args if a is not Ellipsis)
                     if e is not None), None)
    return None


@functools.cache
def _field(cls: type, key: str) -> tuple[type, str]:
    """(class, field name) that the wire key ``key`` of a ``cls`` object fills."""
    path = RENAMED.get(cls, {}).get(key, key).split(".")
    owner = cls
    for step in path[:-1]:
        owner = typing.cast(type, _element(_hints(owner)[step]))
    return owner, path[-1]


def _children(value: Any, shape: Shape, where: str) -> Iterator[tuple[str, Any]]:
    if shape is Shape.ROWS:  # [{"gpu", "links": [[...]]}]: numbers in protocol.py's order
        return
    if shape is Shape.OBJECT:
        yield where, value
    elif shape is Shape.LIST:
        yield from ((f"{where}[{i}]", v) for i, v in enumerate(value))
    elif shape is Shape.MAP:
        yield from ((f"{where}[{k!r}]", v) for k, v in value.items())
    else:
        yield from ((f"{where}[{k!r}][{i}]", v) for k, chain in value.items()
                    for i, v in enumerate(chain))


def walk(obj: dict[str, Any], cls: type, where: str) -> Iterator[tuple[str, type, dict, str]]:
    """(where, class, wire object, key) for every key of ``obj`` and of the objects in it."""
    for key, value in obj.items():
        yield where, cls, obj, key
        if where.count(".") == 0 and key in ENVELOPE:
            continue
        owner, name = _field(cls, key)
        if name not in _names(owner):
            continue
        inner = _element(_hints(owner)[name])
        if inner is None or value is None:
            continue
        shape = MAPS.get((cls, key)) or (Shape.LIST if isinstance(value, list) else Shape.OBJECT)
        for sub_where, sub in _children(value, shape, f"{where}.{key}"):
            if isinstance(sub, dict):
                yield from walk(sub, inner, sub_where)


class Tracked(dict):  # type: ignore[type-arg]
    """A JSON object that notes which of its keys the decoder asks for."""

    def __init__(self, src: dict[str, Any]) -> None:
        super().__init__({k: _track(v) for k, v in src.items()})
        self.read_keys: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.read_keys.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read_keys.add(key)
        return super().__getitem__(key)


def _track(value: Any) -> Any:
    if isinstance(value, dict):
        return Tracked(value)
    if isinstance(value, list):
        return [_track(v) for v in value]
    return value


def stray_keys(msg: dict[str, Any]) -> list[str]:
    """Keys of ``msg`` that no field of its class takes, or that protocol.py never reads."""
    kind = msg.get("type")
    if kind not in MESSAGES:
        return [f"message type {kind!r} has no decoder"]
    tracked = Tracked(msg)
    decode_fields._DECODERS[kind](tracked)  # the checked path reads key by key
    out = []
    for where, cls, obj, key in walk(tracked, MESSAGES[kind], kind):
        if where == kind and key in ENVELOPE:
            continue
        owner, name = _field(cls, key)
        if name not in _names(owner):
            out.append(f"{where}.{key}: not a field of {owner.__name__} (probes/wire/samples.py)")
        elif isinstance(obj, Tracked) and key not in obj.read_keys:
            out.append(f"{where}.{key}: {owner.__name__}.{name} exists, but protocol.py's "
                       "decoder never reads it")
    return out


def missing_keys(messages: list[dict[str, Any]]) -> list[str]:
    """Fields that no object of their class in ``messages`` sends (bar SIM_LEAVES_OUT).

    A field counts as sent when any object of its class has it: the PCIe chains, for one,
    ride on every thirtieth sample only.
    """
    present: dict[type, set[str]] = {}
    for msg in messages:
        for _where, cls, _obj, key in walk(msg, MESSAGES[msg["type"]], msg["type"]):
            present.setdefault(cls, set()).add(key)
    out = []
    for cls, keys in present.items():
        wire = {v: k for k, v in RENAMED.get(cls, {}).items() if "." not in v}
        for f in dataclasses.fields(cls):
            key = wire.get(f.name, f.name)
            if f.init and (key not in keys and (cls, f.name) not in SIM_LEAVES_OUT
                    and (cls, f.name) not in FROM_MAP_KEY):
                out.append(f"no {key!r} in any {cls.__name__} ({cls.__name__}.{f.name})")
    return sorted(out)


# ---------------------------------------------------------------- the agent's messages

def _agent(args: list[str], env: dict[str, str] | None = None, *,
           isolated: bool = True, cwd: Path | None = None) -> list[dict[str, Any]]:
    flags = ["-I"] if isolated else []
    proc = subprocess.run([sys.executable, *flags, "-", *args], input=shipped_source(args),
                          capture_output=True, env=env, timeout=120, check=True, cwd=cwd)
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


SIM_RUNS = [[s] for s in SIM_SCENARIOS] + [["xid79:2@60,nccl-timeout@90,leak,throttle"]]
"""Each scenario alone, and one of them together.  ``no-environ`` leaves the processes'
job fields out on purpose (an agent that may not read their environment): it is walked
for stray keys but not asked to fill every field."""


@pytest.fixture(scope="module")
def simulated() -> dict[str, list[dict[str, Any]]]:
    """Each scenario's run: 31 samples (the last with its PCIe chains), kernel-log on."""
    return {run[0]: _agent(["--simulate", run[0], "--fast", "--count", "31", "--speed", "60",
                            "--kernel-log", "auto"]) for run in SIM_RUNS}


@pytest.fixture(scope="module")
def real_host(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A bare host: fake NVML, a fake journalctl, and one dataset; 31 samples."""
    tmp = tmp_path_factory.mktemp("host")
    host = {"bin": tmp / "bin", "root": tmp / "root", "tmp": tmp}
    host["bin"].mkdir()
    (host["root"] / "proc").mkdir(parents=True)
    _journal(host)
    env = {"PATH": f"{host['bin']}:/usr/bin:/bin",
           "PYTHONPATH": str(REPO / "tests" / "data" / "fake_pynvml"), "FAKE_NVML": ""}
    tree = IbTree(tmp / "sys", n=2)
    tree.set_counter("mlx5_1", "port_rcv_data", 4294967295)  # stuck: an ``unknown`` counter
    return _agent(["--interval", "0", "--count", "31", "--kernel-log", "journal",
                   "--log-root", str(host["root"]), "--dataset", str(tmp),
                   "--sys-root", str(tmp / "sys")], env, isolated=False, cwd=tmp)


def _kinds(messages: list[dict[str, Any]]) -> set[str]:
    return {m["type"] for m in messages}


def test_the_real_hosts_keys_are_fields_the_console_reads(
        real_host: list[dict[str, Any]]) -> None:
    assert _kinds(real_host) == set(MESSAGES)
    assert [s for m in real_host for s in stray_keys(m)] == []


def test_nvidia_smi_keys_are_fields_the_console_reads(
        fake_smi: typing.Callable[[str], dict[str, str]]) -> None:
    lines = _agent(["--once", "--kernel-log", "off"], fake_smi("csv"))
    assert _kinds(lines) == {"hello", "logsource", "sample", "fabric"}
    assert lines[0]["gpus"] and lines[-1]["gpus"]
    assert [s for m in lines for s in stray_keys(m)] == []


@pytest.mark.parametrize("scenario", [run[0] for run in SIM_RUNS])
def test_the_simulators_keys_are_fields_the_console_reads(
        simulated: dict[str, list[dict[str, Any]]], scenario: str) -> None:
    messages = simulated[scenario]
    assert [s for m in messages for s in stray_keys(m)] == []


@pytest.mark.parametrize("scenario", [run[0] for run in SIM_RUNS if run[0] != "no-environ"])
def test_the_simulator_fills_every_field(simulated: dict[str, list[dict[str, Any]]],
                                         scenario: str) -> None:
    messages = simulated[scenario]
    assert any("pcie" in m for m in messages if m["type"] == "sample")
    assert missing_keys(messages) == []


def test_every_scenario_run_has_events_somewhere(
        simulated: dict[str, list[dict[str, Any]]]) -> None:
    kinds = set().union(*(_kinds(m) for m in simulated.values()))
    assert kinds == {"hello", "logsource", "sample", "event", "fabric"}


@pytest.mark.parametrize(("msg", "stray"), [
    ({"type": "sample", "v": 1, "ts": 1.0, "seq": 0, "host": {},
      "gpus": [{"index": 0, "temp_mem_C": 80.0}]},
     "sample.gpus[0].temp_mem_C: not a field of GpuSample"),
    ({"type": "hello", "v": 1, "agent": "x", "ts": 1.0, "host": {"hostname": "h", "osname": "x"},
      "gpus": []}, "hello.host.osname: not a field of HostFacts"),
    ({"type": "sample", "v": 1, "ts": 1.0, "seq": 0, "disks": {"sda": {"util_pct": 3.0}}},
     "sample.disks['sda'].util_pct: not a field of DiskStats"),
    ({"type": "sample", "v": 1, "ts": 1.0, "seq": 0, "host": {"name": "x"}},
     "sample.host.name: not a field of HostStats"),
])
def test_a_misspelt_key_is_named(msg: dict[str, Any], stray: str) -> None:
    """The check itself can fail, and says which key and which class."""
    assert [s for s in stray_keys(msg) if s.startswith(stray)] != [], stray_keys(msg)


def test_a_field_the_decoder_forgets_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field in samples.py that protocol.py does not read is caught too."""
    def forgetful(g: dict[str, Any]) -> GpuSample:
        return GpuSample(index=int(g["index"]))

    monkeypatch.setattr(decode_fields, "_decode_gpu", forgetful)
    found = stray_keys({"type": "sample", "v": 1, "ts": 1.0, "seq": 0,
                        "gpus": [{"index": 0, "temp_c": 50.0}]})
    assert found == ["sample.gpus[0].temp_c: GpuSample.temp_c exists, but protocol.py's "
                     "decoder never reads it"]


def test_a_missing_field_is_named() -> None:
    msg = {"type": "sample", "v": 1, "ts": 1.0, "seq": 0, "gpus": [], "disks": {},
           "host": {"cpu_pct": 1.0}}
    assert "no 'load1' in any HostStats (HostStats.load1)" in missing_keys([msg])
