"""Reading the agent's wire protocol v1: newline-delimited JSON, one object per line.

The reader is tolerant by design: unknown fields and unknown message types are
ignored, and a garbled, partial or over-long line is counted and skipped.  A host
that prints junk (a login banner, a Python warning, a half-written line when the
link drops) must never take the console down.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

try:
    import orjson as _orjson
except ImportError:  # the console still works on the standard library, only slower
    _orjson = None  # type: ignore[assignment]
from orjson import dumps as _dumps  # a dependency whatever the above (``sanitize``)

from probes.errors import ProtocolError
from probes.wire import fields, structs
from probes.wire.compact import COMPACT_VERSION, CompactStream
from probes.wire.fabric_fast import (
    MAX_FABRIC_PORTS,
    MAX_NAME,
    MAX_NVLINK_GPUS,
    MAX_NVLINK_ROWS,
    MAX_NVLINK_TEXT,
    MAX_PORT_COUNTERS,
    decode_fabric,
    fabric_shell,
)
from probes.wire.fastfill import MAX_AMOUNT, Filler
from probes.wire.fields import Type
from probes.wire.hello_shared import reshared
from probes.wire.samples import (
    AgentMessage,
    BlockDevice,
    ClockFacts,
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
from probes.wire.sanitize import check_depth, clean_tree, may_need_cleaning
from probes.wire.shared import known, remember, shared

PROTOCOL_VERSION = 1
_BLOCK_KEYS = frozenset({"topo_text", "nvlink_text"})
"""Fields whose newlines and tabs are their layout (``nvidia-smi topo -m``)."""
MAX_LINE_BYTES = 256 * 1024
MAX_TOPO_CHARS = 64 * 1024
MAX_CLOCK_SPEED = 1e6
"""A hello's clock speed above this is no simulation rigwatch runs: read as real time."""
MAX_UTC_OFFSET_S = 14 * 3600
"""Zones run from UTC-12 to UTC+14."""
"""A hello for a 16-GPU host is about 5 KiB; anything this long is not ours."""


@dataclass
class StreamStats:
    """Counters of what the reader skipped, shown per host so junk is visible."""

    lines: int = 0
    garbled: int = 0
    overlong: int = 0
    unknown_type: int = 0


class LineSplitter:
    """Split a byte stream into lines with a bounded buffer.

    An over-long line is dropped as it arrives, never held whole; reading resumes after it.
    """

    def __init__(self, stats: StreamStats, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._discarding = False
        self._max = max_line_bytes
        self._stats = stats

    def feed(self, chunk: bytes) -> Iterator[bytes | None]:
        """Yield the complete lines that ``chunk`` finishes, without their newline.

        An over-long line yields ``None`` where it ended, so readers see it in order.
        """
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._keep(chunk[start:])
                return
            piece = chunk[start:nl]
            start = nl + 1
            if self._discarding:
                self._discarding = False
                self._buf.clear()
                yield None
                continue
            if not self._buf and len(piece) <= self._max:  # a whole line in this chunk:
                yield piece  # no copy through the buffer (nearly every tick's line)
                continue
            if len(self._buf) + len(piece) > self._max:
                self._stats.overlong += 1
                self._buf.clear()
                yield None
                continue
            self._buf += piece
            line = bytes(self._buf)
            self._buf.clear()
            yield line

    def idle(self) -> bool:
        """Nothing held of a line and none being dropped: a chunk's first line is whole
        from its first byte."""
        return not self._buf and not self._discarding

    def flush(self) -> Iterator[bytes]:
        """Yield a final line that had no newline (the stream ended)."""
        if self._buf and not self._discarding:
            yield bytes(self._buf)
        self._buf.clear()
        self._discarding = False

    def _keep(self, rest: bytes) -> None:
        if self._discarding:
            return
        if len(self._buf) + len(rest) > self._max:
            self._stats.overlong += 1
            self._buf.clear()
            self._discarding = True
            return
        self._buf += rest


class MessageReader:
    """Turn raw stream chunks into typed messages, counting what is skipped."""

    builds_ticks = True
    """False: a v2 tick is only checked (its verdict counts as for any line) and no sample
    is returned; a collector relays the bytes and the console decodes them (issue 38).
    Likewise a ``fabric`` report the one-pass decode takes is only checked, and comes back
    as its shell (``fabric_fast.fabric_shell``: its time, no ports or links), which the
    session counts as a message and nothing reads (issue 38, start-up)."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.stats = StreamStats()
        self._splitter = LineSplitter(self.stats, max_line_bytes)
        self.bad_streak = 0
        """Garbled or over-long lines since the last good message."""
        self.compact: CompactStream | None = None
        """The stream's v2 state, from its v2 hello (None: v1, the default)."""
        self.tick_row: Any = None
        """A reader that does not build ticks: the row of the last tick its fast path took
        whole (``CompactStream.readable``), else None; a collector relays it."""

    def feed(self, chunk: bytes) -> list[AgentMessage]:
        """Decode every complete line in ``chunk``."""
        return [m for line in self._splitter.feed(chunk) if (m := self._decode(line)) is not None]

    def close(self) -> list[AgentMessage]:
        """Decode what is left when the stream ends."""
        return [m for line in self._splitter.flush() if (m := self._decode(line)) is not None]

    def _decode(self, line: bytes | None) -> AgentMessage | None:
        if line is None:
            self.bad_streak += 1
            return None
        if not line.strip():
            return None
        self.stats.lines += 1
        try:
            obj = None
            if self.compact is not None:
                msg = self._decode_v2(line)
            else:
                msg, obj = _decode_line(line, self.builds_ticks)
            if msg is None:
                return None
            if isinstance(msg, Hello):  # the columns from the object it was decoded from
                self.compact = None if msg.protocol < COMPACT_VERSION else \
                    self._stream(_columns(line) if obj is None else _columns_of(obj))
        except UnknownMessageType:
            self.stats.unknown_type += 1
            return None
        except Exception:  # any failure is one host's junk line, never the fleet's
            self.stats.garbled += 1
            self.bad_streak += 1
            return None
        self.bad_streak = 0
        return msg


    def _stream(self, columns: Any) -> CompactStream:
        """A v2 stream's state, new at its hello (``columns``: the hello's, cleaned)."""
        return CompactStream(columns, _decode_sample, builds=self.builds_ticks, parse=_parsed,
                             gpu_index=_index, statics=_static_half)

    def relayed_hello(self, hello: Hello, columns: Any) -> Hello:
        """Take a hello a collector decoded from this stream's line (``columns``: that
        line's, cleaned, as ``_columns`` gave them there) as ``feed`` takes the line: the
        line counted, the stream's v2 state new, the streak ended.  The facts the decode
        shares come back as this process's shared objects (``shared``)."""
        self.stats.lines += 1
        self.compact = None if hello.protocol < COMPACT_VERSION else \
            self._stream(shared_columns(columns))
        self.bad_streak = 0
        return reshared(hello)

    def _decode_v2(self, line: bytes) -> AgentMessage | None:
        """A line of a v2 stream: an array is a tick, ``static`` updates the state."""
        assert self.compact is not None
        head = line.lstrip()[:1]
        if head == b"[":
            raw = None if may_need_cleaning(line) else line
            if not self.builds_ticks:
                self.tick_row = self.compact.readable(raw, lambda: _parsed(line))
                self.bad_streak = 0  # a good line, as when a sample is returned
                return None
            return self.compact.sample(raw, lambda: _parsed(line))
        if b'"static"' in line:  # else no need to parse it twice
            obj, finite = _loads(line)
            if may_need_cleaning(line):  # as ``_parsed``
                obj = clean_tree(obj, _BLOCK_KEYS)
            if isinstance(obj, dict) and obj.get("type") == "static":
                self.compact.static(obj, zlib.crc32(line), line, finite)
                return None
        return _decode_line(line, self.builds_ticks)[0]


def _static_half(obj: dict[str, Any]) -> HostSample:
    """``_decode_sample(obj)`` of a ``static`` message's half as v1's sample, every float
    finite (``CompactStream._check_all``), as ``decode_line`` takes such a line: its orjson
    text, where it needs no cleaning, in one pass (``structs.decode_sample``: the checked
    decoder's answer, types and signs too, or a refusal), else the checked decoder (issue
    38, start-up: ~70 µs of the console's ~200 µs a ``static`` message)."""
    try:
        line = _dumps(obj)
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        return _decode_sample(obj)
    if not may_need_cleaning(line):
        try:
            check_depth(line)
            return structs.decode_sample(line)
        except Exception:  # the checked decoder decides
            pass
    return _decode_sample(obj)


def _parsed(line: bytes) -> Any:
    """One line parsed and every string sanitised (the checked path's first step)."""
    obj, _ = _loads(line)
    return clean_tree(obj, _BLOCK_KEYS) if may_need_cleaning(line) else obj


COLUMNS_SHARED_MAX = 64
"""Distinct ``columns`` declarations kept for sharing (a fleet runs a few agent versions)."""
_columns_seen: dict[str, Any] = {}


def _columns(hello: bytes) -> Any:
    """A v2 hello's ``columns``, cleaned: the whole hello is not walked a second time.

    Equal declarations (``repr``: the same keys, names and JSON types, in order) are one
    parsed object, so every host's stream holds the same names (issue 38, memory: ~4 KB a
    host in the console and in a collector).  Nothing writes to it."""
    obj, _ = _loads(hello)
    if not isinstance(obj, dict):
        return None
    cols = obj.get("columns")
    return shared_columns(clean_tree(cols, _BLOCK_KEYS, 1) if may_need_cleaning(hello) else cols)


def _columns_of(hello: dict[str, Any]) -> Any:
    """``_columns`` of a hello's line from the object it was decoded from (sanitised whole,
    so its ``columns`` are those ``_columns`` cleans one level down): no second parse."""
    return shared_columns(hello.get("columns"))


def shared_columns(cols: Any) -> Any:
    """``cols`` (a hello's ``columns``, cleaned), or the equal declaration met before."""
    key = repr(cols)
    seen = _columns_seen.get(key)
    if seen is not None:
        return seen
    if len(_columns_seen) >= COLUMNS_SHARED_MAX:
        _columns_seen.clear()
    _columns_seen[key] = cols
    return cols


class UnknownMessageType(ProtocolError):
    """A well-formed line of a type this console does not know (a newer agent)."""


def decode_line(line: bytes | str) -> AgentMessage:
    """Decode one wire line.

    Args:
        line: one line, with or without its newline.

    Returns:
        The typed message.

    Raises:
        UnknownMessageType: valid JSON object with a ``type`` we do not know.
        ProtocolError: not JSON, not an object, or a known type with unusable fields.
    """
    return _decode_line(line)[0]


def _decode_line(line: bytes | str, builds: bool = True) -> tuple[AgentMessage, Any]:
    """``decode_line``, and the parsed, sanitised object it decoded the message from (None
    where a one-pass path decoded it: a sample or a fabric report, never a hello).  Not
    ``builds``: a fabric report the one-pass path takes comes back as its shell."""
    if type(line) is bytes and line.startswith(b'{"type":"sample"'):
        try:  # the one-pass path for a clean line; anything it refuses is judged below
            if not may_need_cleaning(line):
                check_depth(line)
                return structs.decode_sample(line), None
        except Exception:  # the checked path below decides
            pass
    elif type(line) is bytes and line.startswith(b'{"type":"fabric"'):
        try:  # the same for the agent's fabric report (fabric_fast)
            if not may_need_cleaning(line):
                check_depth(line)
                return decode_fabric(line) if builds else fabric_shell(line), None
        except Exception:  # the checked path below decides
            pass
    obj, finite = _loads(line)
    if may_need_cleaning(line if isinstance(line, bytes) else line.encode("utf-8", "replace")):
        obj = clean_tree(obj, _BLOCK_KEYS)  # raises TooDeep, a ProtocolError
    if not isinstance(obj, dict):
        raise ProtocolError("not a JSON object")
    kind = obj.get("type")
    decoder = None
    if isinstance(kind, str):
        decoder = (_FAST_DECODERS.get(kind) if finite else None) or _DECODERS.get(kind)
    if decoder is None:
        raise UnknownMessageType(f"unknown message type {kind!r}")
    try:
        return decoder(obj), obj
    except Exception as exc:  # any decoder failure is a garbled line
        raise ProtocolError(f"bad {kind} message: {exc!r}") from None


def _loads(line: bytes | str) -> tuple[Any, bool]:
    """Parse one line; the flag says every float in the result is finite.

    orjson (a console dependency) parses a sample line three times faster than the
    standard library and refuses NaN, Infinity and numbers that overflow a double, so
    what it returns needs no finiteness checks.  A line it refuses gets a second chance
    with ``json``, whose result takes the fully checked path.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(line), True
        except _orjson.JSONDecodeError:
            pass
    try:
        check_depth(line if isinstance(line, bytes) else line.encode("utf-8", "replace"))
        return json.loads(line), False
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None


def _num(value: Any) -> float | None:
    """A finite number within ±``MAX_AMOUNT``; NaN, ±Inf, 10**400, ``true`` are None."""
    t = type(value)  # exact types: bool is no number here
    if t is float:
        return value if -MAX_AMOUNT <= value <= MAX_AMOUNT else None  # NaN fails both
    if t is int:
        return float(value) if -MAX_AMOUNT <= value <= MAX_AMOUNT else None
    return None


def _int(value: Any) -> int | None:
    t = type(value)
    if t is int:
        return value if -MAX_AMOUNT <= value <= MAX_AMOUNT else None
    if t is float:
        return int(value) if -MAX_AMOUNT <= value <= MAX_AMOUNT else None
    return None


def _pnum(value: Any) -> float | None:
    """A sample amount (MiB, W, %, MHz, a rate): never negative."""
    f = _num(value)
    return f if f is not None and f >= 0 else None


def _pint(value: Any) -> int | None:
    """A count or a size in bytes: never negative."""
    i = _int(value)
    return i if i is not None and i >= 0 else None


MAX_GPU_INDEX = 1023
MAX_TS = 1e11
"""The year 5138: a timestamp past it (or before 1970) is a lie and reads as unknown."""


def _index(value: Any) -> int | None:
    """A GPU index a host could have; a GPU with another is dropped."""
    i = _int(value)
    return i if i is not None and 0 <= i <= MAX_GPU_INDEX else None


def _ts(value: Any) -> float | None:
    f = _num(value)
    return f if f is not None and 0 <= f <= MAX_TS else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _decode_hello(obj: dict[str, Any]) -> Hello:
    host = _dict(obj.get("host"))
    gpus = tuple(
        GpuInfo(
            index=idx,
            uuid=_str(g.get("uuid")),
            bus_id=_str(g.get("bus_id")),
            name=shared(_str(g.get("name"))),
            mem_total_mib=_pnum(g.get("mem_total_mib")),
            temp_slowdown_c=_pnum(g.get("temp_slowdown_c")),
            temp_shutdown_c=_pnum(g.get("temp_shutdown_c")),
            pcie_gen_max_gpu=_pint(g.get("pcie_gen_max_gpu")),
            serial=_str(g.get("serial")),
            vbios=shared(_str(g.get("vbios"))),
            persistence_mode=_bool(g.get("persistence_mode")),
            ecc_mode=_bool(g.get("ecc_mode")),
            ecc_mode_pending=_bool(g.get("ecc_mode_pending")),
            mig_mode=_bool(g.get("mig_mode")),
            power_limit_default_w=_pnum(g.get("power_limit_default_w")),
        )
        for g in _list(obj.get("gpus"))
        if isinstance(g, dict) and (idx := _index(g.get("index"))) is not None
    )
    probes = tuple(
        shared(ProbeStatus(name=name, available=bool(_dict(p).get("available")),
                           reason=_str(_dict(p).get("reason"))))
        for name, p in _dict(obj.get("probes")).items()
    )
    facts = HostFacts(
        hostname=_str(host.get("hostname")) or "?",
        kernel=_str(host.get("kernel")),
        os_name=_str(host.get("os")),
        python=_str(host.get("python")),
        driver_version=_str(host.get("driver_version")),
        cuda_version=_str(host.get("cuda_version")),
        cpu_model=_str(host.get("cpu_model")),
        cpu_cores_logical=_pint(host.get("cpu_cores_logical")),
        cpu_cores_physical=_pint(host.get("cpu_cores_physical")),
        mem_total_bytes=_pint(host.get("mem_total_bytes")),
        swap_total_bytes=_pint(host.get("swap_total_bytes")),
        gpus=gpus,
        numa_nodes=_int(host.get("numa_nodes")),
        probes=probes,
        simulated=tuple(s for s in _list(obj.get("simulated")) if isinstance(s, str)),
        software=_decode_software(host.get("software")),
        block_devices=tuple(_decode_block_device(d) for d in _list(host.get("block_devices"))
                            if isinstance(d, dict) and _str(d.get("name"))),
        swap_used_bytes=_pint(host.get("swap_used_bytes")),
    )
    protocol = _int(obj.get("v"))
    if protocol is None:
        raise ValueError("hello without protocol version 'v'")
    topo = _str(obj.get("topo_text"))
    clock = _dict(obj.get("clock"))
    speed = _pnum(clock.get("speed"))
    offset = _num(clock.get("utc_offset_s"))
    return Hello(ts=_ts(obj.get("ts")) or 0.0, protocol=protocol,
                 clock=ClockFacts(
                     speed=speed if speed is not None and 0.0 < speed <= MAX_CLOCK_SPEED
                     else 1.0,
                     utc_offset_s=offset if offset is not None
                     and abs(offset) <= MAX_UTC_OFFSET_S else None,
                     boot_time=_ts(clock.get("boot_time"))),
                 agent_version=_str(obj.get("agent")) or "?", facts=facts,
                 pcie=_decode_chains(obj.get("pcie")) or {},
                 nics=tuple(_decode_nic(n) for n in _list(obj.get("nics"))
                            if isinstance(n, dict) and _str(n.get("name"))),
                 topo_text=shared(topo[:MAX_TOPO_CHARS]) if topo else None,
                 datasets=tuple(DatasetDevice(path=d["path"], device=_str(d.get("device")),
                                              free_bytes=_pint(d.get("free_bytes")),
                                              total_bytes=_pint(d.get("total_bytes")))
                                for d in _list(obj.get("datasets"))
                                if isinstance(d, dict) and _str(d.get("path"))))


def _decode_software(value: Any) -> SoftwareVersions:
    """An older agent sends no ``software``: every version is then unknown."""
    d = _dict(value)
    return shared(SoftwareVersions(
        nvcc=_str(d.get("nvcc")), nccl=_str(d.get("nccl")), torch=_str(d.get("torch")),
        cuda_runtime=_str(d.get("cuda_runtime")),
        container_runtimes=tuple(r for r in _list(d.get("container_runtimes"))
                                 if isinstance(r, str)),
        fabric_manager=_str(d.get("fabric_manager"))))


def _decode_block_device(d: dict[str, Any]) -> BlockDevice:
    return shared(BlockDevice(name=str(d["name"]), size_bytes=_pint(d.get("size_bytes")),
                              rotational=_bool(d.get("rotational")),
                              model=_str(d.get("model")), transport=_str(d.get("transport"))))


def _decode_link(d: dict[str, Any]) -> PcieLink:
    """``shared`` of the link, looked up by its typed values first (``hello_shared._link``'s
    key: each field's type is fixed here, so equal values are equal fields but for a float
    zero's sign, which goes to ``shared``): a hello's 32 links cost the collector's start-up
    a dataclass and a key walk each (issue 38, start-up)."""
    address, speed = _str(d.get("address")), _num(d.get("speed_gts"))
    width, max_speed = _int(d.get("width")), _num(d.get("max_speed_gts"))
    max_width, numa, cpus = _int(d.get("max_width")), _int(d.get("numa_node")), \
        _str(d.get("local_cpulist"))
    if speed == 0.0 or max_speed == 0.0:
        return shared(PcieLink(address, speed, width, max_speed, max_width, numa, cpus))
    key = (PcieLink, address, speed, width, max_speed, max_width, numa, cpus)
    got = known(key)
    return got if type(got) is PcieLink else remember(
        key, PcieLink(address, speed, width, max_speed, max_width, numa, cpus))


def _decode_chains(value: Any) -> dict[str, tuple[PcieLink, ...]] | None:
    if not isinstance(value, dict):
        return None
    return {bus: tuple(_decode_link(d) for d in _list(chain) if isinstance(d, dict))
            for bus, chain in value.items() if isinstance(bus, str)}


def _decode_nic_port(p: dict[str, Any]) -> NicPort:
    """``shared`` of the port, by its typed values first (an int and texts: no sign)."""
    key = (NicPort, _int(p.get("port")), _str(p.get("state")), _str(p.get("rate")),
           _str(p.get("link_layer")), _str(p.get("phys_state")))
    got = known(key)
    return got if type(got) is NicPort else remember(key, NicPort(*key[1:]))


def _decode_nic(n: dict[str, Any]) -> Nic:
    ports = tuple(_decode_nic_port(p) for p in _list(n.get("ports")) if isinstance(p, dict))
    # A NIC's GUID is its own; its name, slot, type and bridges are its model's (shared)
    return Nic(name=shared(str(n["name"])), kind=shared(_str(n.get("kind")) or "net"),
               address=shared(_str(n.get("address"))), numa_node=_int(n.get("numa_node")),
               state=shared(_str(n.get("state"))), speed_mbps=_int(n.get("speed_mbps")),
               ports=shared(ports), node_guid=_str(n.get("node_guid")),
               hca_type=shared(_str(n.get("hca_type"))),
               bridges=shared(tuple(b for b in _list(n.get("bridges")) if isinstance(b, str))[:16]))




def _decode_port(p: dict[str, Any]) -> IbPortSample:
    return IbPortSample(
        hca=str(p["hca"])[:MAX_NAME], port=_pint(p.get("port")), state=_str(p.get("state")),
        phys_state=_str(p.get("phys_state")), rate_gbs=_pnum(p.get("rate_gbs")),
        link_layer=_str(p.get("link_layer")),
        errors={k[:MAX_NAME]: n for k, v in list(_dict(p.get("errors")).items())
                [:MAX_PORT_COUNTERS] if isinstance(k, str) and (n := _pint(v)) is not None},
        rx_bytes_s=_pnum(p.get("rx_bytes_s")), tx_bytes_s=_pnum(p.get("tx_bytes_s")),
        xmit_wait_s=_pnum(p.get("xmit_wait_s")),
        unknown=tuple(u[:MAX_NAME] for u in _list(p.get("unknown"))[:MAX_PORT_COUNTERS]
                      if isinstance(u, str)))


def _decode_links(value: Any) -> tuple[NvLinkSample, ...] | None:
    """NVML's links, ``[{"gpu", "links": [[link, up, GB/s, replay, recovery, crc]]}]``."""
    if not isinstance(value, list):
        return None
    out = []
    for g in value[:MAX_NVLINK_GPUS]:
        gpu = _index(_dict(g).get("gpu"))
        for row in _list(_dict(g).get("links"))[:MAX_NVLINK_ROWS]:
            if gpu is None or not isinstance(row, list) or len(row) < 6:
                continue
            link = _pint(row[0])
            if link is not None:
                out.append(NvLinkSample(gpu, link, active=bool(row[1]) if row[1] in (0, 1)
                                        else None, speed_gbs=_pnum(row[2]),
                                        replay=_pint(row[3]), recovery=_pint(row[4]),
                                        crc=_pint(row[5])))
    return tuple(out)


def _decode_fabric(obj: dict[str, Any]) -> FabricSample:
    ts = _ts(obj.get("ts"))
    if ts is None:
        raise ValueError("fabric without a believable 'ts'")
    text = _str(obj.get("nvlink_text"))
    return FabricSample(
        ts=ts, interval_s=_pnum(obj.get("interval_s")),
        ports=tuple(_decode_port(p) for p in _list(obj.get("ports"))[:MAX_FABRIC_PORTS]
                    if isinstance(p, dict) and _str(p.get("hca"))),
        nvlinks=_decode_links(obj.get("nvlink")),
        nvlink_text=text[:MAX_NVLINK_TEXT] if text is not None else None)


def _gpu_state(value: Any) -> GpuState:
    try:
        return GpuState(value)
    except ValueError:
        return GpuState.UNKNOWN


def _decode_gpu(g: dict[str, Any]) -> GpuSample:
    """One GPU, every field checked by its type in the table (``_GPU_CHECKED``)."""
    values = {name: check(g.get(name)) for name, check in _GPU_CHECKED}
    values["index"] = _index(g.get("index")) or 0  # callers keep only GPUs with a valid index
    values["state"] = _gpu_state(g.get("state", "ok"))
    values["clock_reasons"] = tuple(r for r in _list(g.get("clock_reasons"))
                                    if isinstance(r, str))
    values["processes"] = _decode_processes(g.get("processes"))
    obj = object.__new__(GpuSample)  # every field is given: what ``__init__`` would do
    object.__setattr__(obj, "__dict__", values)
    return obj


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _decode_processes(value: Any) -> tuple[GpuProcess, ...] | None:
    return tuple(_decode_process(p) for p in value if isinstance(p, dict)) \
        if isinstance(value, list) else None


def _decode_process(p: dict[str, Any]) -> GpuProcess:
    return GpuProcess(
        pid=_pint(p.get("pid")), name=_str(p.get("name")), user=_str(p.get("user")),
        used_mib=_pnum(p.get("used_mib")), slurm_job=_str(p.get("slurm_job")),
        slurm_step=_str(p.get("slurm_step")), slurm_task=_pint(p.get("slurm_task")),
        rank=_pint(p.get("rank")), local_rank=_pint(p.get("local_rank")),
        world_size=_pint(p.get("world_size")), master_addr=_str(p.get("master_addr")),
        cuda_visible_devices=_str(p.get("cuda_visible_devices")), pod=_str(p.get("pod")),
        container=_str(p.get("container")), runtime=_str(p.get("runtime")),
        environ=_bool(p.get("environ")))


def _decode_disk(name: str, d: dict[str, Any]) -> DiskStats:
    return DiskStats(
        name=name,
        **{k: _pnum(d.get(k)) for k in
           ("r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util")},
    )


def _decode_sample(obj: dict[str, Any]) -> HostSample:
    host = _dict(obj.get("host"))
    stats = HostStats(
        cpu_pct=_pnum(host.get("cpu_pct")),
        load1=_pnum(host.get("load1")),
        load5=_pnum(host.get("load5")),
        load15=_pnum(host.get("load15")),
        mem_used_bytes=_pint(host.get("mem_used_bytes")),
        mem_total_bytes=_pint(host.get("mem_total_bytes")),
        swap_used_bytes=_pint(host.get("swap_used_bytes")),
        swap_total_bytes=_pint(host.get("swap_total_bytes")),
        swap_in_pages_s=_pnum(host.get("swap_in_pages_s")),
        swap_out_pages_s=_pnum(host.get("swap_out_pages_s")),
    )
    gpus = tuple(_decode_gpu(g) for g in _list(obj.get("gpus"))
                 if isinstance(g, dict) and _index(g.get("index")) is not None)
    disks = tuple(_decode_disk(n, d) for n, d in _dict(obj.get("disks")).items()
                  if isinstance(d, dict))
    ts = _ts(obj.get("ts"))
    if ts is None:
        raise ValueError("sample without a believable 'ts'")
    return HostSample(ts=ts, seq=_int(obj.get("seq")) or 0, gpus=gpus, host=stats, disks=disks,
                      pcie=_decode_chains(obj.get("pcie")))


def _decode_event(obj: dict[str, Any]) -> LogEvent:
    line = obj["line"]
    if not isinstance(line, str):
        raise TypeError("event 'line' is not a string")
    return LogEvent(ts=_ts(obj.get("ts")) or 0.0, source=_str(obj.get("source")) or "?", line=line,
                    boot=_str(obj.get("boot")), cursor=_str(obj.get("cursor")))


def _log_status(value: Any) -> LogSourceStatus:
    try:
        return LogSourceStatus(value)
    except ValueError:
        return LogSourceStatus.UNAVAILABLE


def _decode_logsource(obj: dict[str, Any]) -> LogSourceState:
    state = obj["state"]
    if not isinstance(state, str):
        raise TypeError("logsource 'state' is not a string")
    return LogSourceState(ts=_ts(obj.get("ts")) or 0.0, source=_str(obj.get("source")) or "?",
                          state=_log_status(state), via=_str(obj.get("via")),
                          detail=_str(obj.get("detail")) or "", fix=_str(obj.get("fix")),
                          note=_str(obj.get("note")))


def _decode_error(obj: dict[str, Any]) -> ProbeError:
    return ProbeError(ts=_ts(obj.get("ts")) or 0.0, probe=_str(obj.get("probe")) or "?",
                      message=_str(obj.get("message")) or "")


_CHECKS: dict[Type, Callable[[Any], Any]] = {Type.AMOUNT: _pnum, Type.COUNT: _pint,
                                             Type.FLAG: _bool, Type.TEXT: _str}
_GPU_CHECKED = tuple((s.name, _CHECKS[s.type]) for s in fields.GPU_TABLE if s.type in _CHECKS)
"""The table's plain GPU fields with their checked decoders (index, state, reasons and
processes have their own)."""
_FILL_TYPES = {Type.AMOUNT: "float | None", Type.COUNT: "int | None", Type.FLAG: "bool | None",
               Type.TEXT: "str | None"}
_GPU = Filler(GpuSample, skip=("index",),
              more={s.name: _FILL_TYPES[s.type] for s in fields.GPU_TABLE if s.type in _CHECKS})
_HOST = Filler(HostStats)
_DISK = Filler(DiskStats)
_EMPTY_HOST = HostStats()


def _fast_gpu(g: dict[str, Any]) -> GpuSample | None:
    index = g.get("index")
    if type(index) is not int or not 0 <= index <= MAX_GPU_INDEX:
        index = _index(index)
        if index is None:
            return None
    reasons = g.get("clock_reasons")
    state = g.get("state", "ok")
    return _GPU.fill(
        g, index=index,
        state=GpuState.OK if state == "ok" else _gpu_state(state),
        clock_reasons=tuple(r for r in reasons if type(r) is str)
        if type(reasons) is list else (),
        processes=_decode_processes(g.get("processes")))


def _fast_sample(obj: dict[str, Any]) -> HostSample:
    """``_decode_sample`` for a line parsed by orjson (every float finite)."""
    ts = obj.get("ts")
    if type(ts) is not float or not 0 <= ts <= MAX_TS:
        ts = _ts(ts)
        if ts is None:
            raise ValueError("sample without a believable 'ts'")
    host = obj.get("host")
    gpus = obj.get("gpus")
    disks = obj.get("disks")
    return HostSample(
        ts=ts, seq=_int(obj.get("seq")) or 0,
        gpus=tuple(s for g in gpus if type(g) is dict and (s := _fast_gpu(g)) is not None)
        if type(gpus) is list else (),
        host=_HOST.fill(host) if type(host) is dict else _EMPTY_HOST,
        disks=tuple(_DISK.fill(d, name=n) for n, d in disks.items() if type(d) is dict)
        if type(disks) is dict else (),
        pcie=_decode_chains(obj.get("pcie")))


_FAST_DECODERS: dict[str, Callable[[dict[str, Any]], AgentMessage]] = {"sample": _fast_sample}
_DECODERS: dict[str, Callable[[dict[str, Any]], AgentMessage]] = {
    "hello": _decode_hello,
    "sample": _decode_sample,
    "event": _decode_event,
    "error": _decode_error,
    "logsource": _decode_logsource,
    "fabric": _decode_fabric,
}
