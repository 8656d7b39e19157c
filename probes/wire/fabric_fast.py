"""A ``fabric`` line decoded in one pass: msgspec into typed Structs, then the frozen samples.

The agent sends a ``fabric`` message every 30 ticks (its IB ports), and every tenth one with
each GPU's NVLinks (144 on an HGX board): after the PCIe chains went onto the v2 fast path
this was the text the collector and the console still parsed most often (RESULTS.md, "#38
text still decoded in the console (session 6)").  As for a sample line
(``probes.wire.structs``), the Structs carry the checked decoder's bounds
(``decode_fields._decode_fabric``: ``_pnum``, ``_pint``, ``_str``, ``_index``, the counts and
lengths it cuts at); a line holding anything that decoder would null, skip or cut refuses
here, and the checked path then decides, so both paths agree on every line
(tests/wire/test_fabric_fast.py).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct
from msgspec.structs import asdict

from probes.wire.fields import Amount, Count, Index
from probes.wire.samples import FabricSample, IbPortSample, NvLinkSample
from probes.wire.structs import Refused, Stamp

MAX_FABRIC_PORTS = 64
MAX_NVLINK_GPUS = 64
MAX_NVLINK_ROWS = 64
MAX_NVLINK_TEXT = 64 * 1024
MAX_PORT_COUNTERS = 32
"""The agent reads 23 counters a port; a host sending thousands of names is not believed."""
MAX_NAME = 64
"""The checked decoder's cuts (``protocol`` imports them from here)."""

Name = Annotated[str, Meta(max_length=MAX_NAME)]


class PortS(Struct, gc=False):
    """:class:`IbPortSample` on the wire, same order."""

    hca: Annotated[str, Meta(min_length=1, max_length=MAX_NAME)]
    port: Count | None = None
    state: str | None = None
    phys_state: str | None = None
    rate_gbs: Amount | None = None
    link_layer: str | None = None
    errors: Annotated[dict[Name, Count], Meta(max_length=MAX_PORT_COUNTERS)] = {}
    rx_bytes_s: Amount | None = None
    tx_bytes_s: Amount | None = None
    xmit_wait_s: Amount | None = None
    unknown: Annotated[tuple[Name, ...], Meta(max_length=MAX_PORT_COUNTERS)] = ()


class LinkRowS(Struct, array_like=True, gc=False):
    """One NVLink, ``[link, up, GB/s, replay, recovery, crc]`` (more items ignored, as
    the checked decoder ignores them)."""

    link: Count
    up: Annotated[int, Meta(ge=0, le=1)] | None
    speed_gbs: Amount | None
    replay: Count | None
    recovery: Count | None
    crc: Count | None


class GpuLinksS(Struct, gc=False):
    gpu: Index
    links: Annotated[list[LinkRowS], Meta(max_length=MAX_NVLINK_ROWS)] = []


class FabricS(Struct, gc=False):
    type: str
    ts: Stamp
    interval_s: Amount | None = None
    ports: Annotated[list[PortS], Meta(max_length=MAX_FABRIC_PORTS)] = []
    nvlink: Annotated[list[GpuLinksS], Meta(max_length=MAX_NVLINK_GPUS)] | None = None
    nvlink_text: Annotated[str, Meta(max_length=MAX_NVLINK_TEXT)] | None = None


_DECODER = msgspec.json.Decoder(FabricS)
_new = object.__new__
_set = object.__setattr__


def decode_fabric(line: bytes) -> FabricSample:
    """A ``fabric`` line the agent wrote, decoded in one pass.

    The caller has checked the line needs no cleaning and is not nested too deep.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError, Refused: the checked path decides.
    """
    s = _DECODER.decode(line)
    if s.type != "fabric":
        raise Refused(s.type)
    ports = []
    for p in s.ports:
        port = _new(IbPortSample)
        _set(port, "__dict__", asdict(p))
        ports.append(port)
    links: tuple[NvLinkSample, ...] | None = None
    if s.nvlink is not None:
        out = []
        for g in s.nvlink:
            gpu = g.gpu
            for r in g.links:
                link = _new(NvLinkSample)
                up = r.up
                _set(link, "__dict__", {"gpu": gpu, "link": r.link,
                                        "active": None if up is None else up == 1,
                                        "speed_gbs": r.speed_gbs, "replay": r.replay,
                                        "recovery": r.recovery, "crc": r.crc})
                out.append(link)
        links = tuple(out)
    obj: Any = _new(FabricSample)
    _set(obj, "__dict__", {"ts": s.ts, "interval_s": s.interval_s, "ports": tuple(ports),
                           "nvlinks": links, "nvlink_text": s.nvlink_text})
    return obj


def fabric_shell(line: bytes) -> FabricSample:
    """``decode_fabric``'s verdict on ``line`` without the report: the same checks (the
    typed decode, the type), and on success a report with the line's time and interval but
    no ports, links or text.  A collector's reader returns it (``MessageReader.builds_ticks``
    False): its session counts the message and nothing reads it, while the relay forwards
    the line, which the console decodes whole (issue 38, start-up: the 144 links' objects
    were ~60 µs of a collector's ~125 µs a report).

    Raises:
        as ``decode_fabric``.
    """
    s = _DECODER.decode(line)
    if s.type != "fabric":
        raise Refused(s.type)
    obj: Any = _new(FabricSample)
    _set(obj, "__dict__", {"ts": s.ts, "interval_s": s.interval_s, "ports": (),
                           "nvlinks": None, "nvlink_text": None})
    return obj
