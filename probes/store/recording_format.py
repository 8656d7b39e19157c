"""The file format of a recording: schema and migrations, the row codec, the header checks.

A recording is one SQLite file (``PRAGMA application_id`` "RWC1") with the tables
``meta`` (key/value: app, schema_version, fleet_key, created, the compression dictionary,
the hosts' specs),
``hosts`` (id, name) and ``items`` (host_id, ts, kind, body), and since version 2 the
sample tables of :func:`_create_v2` (templates, blocks, staging, packed).  A body is ``zlib``
raw-deflate of compact JSON from :mod:`probes.store.codec`, primed with a preset dictionary
built from typical items; the dictionary is stored in ``meta`` with its id, so a reader
never depends on this version's dictionary.  The writer (:mod:`probes.store.recording`) and
the reader (:mod:`probes.store.recording_reader`) share what is here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import sqlite3
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

try:
    import orjson as _orjson
except ImportError:  # the standard library's json, slower
    _orjson = None  # type: ignore[assignment]

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.errors import RigwatchError
from probes.store import codec
from probes.store.bounded import MAX_ROW_BYTES, inflate
from probes.store.codec import Item
from probes.triage import Code, Severity, Step
from probes.wire.samples import (
    KERNEL_SOURCE,
    DiskStats,
    GpuInfo,
    GpuProcess,
    GpuSample,
    Hello,
    HostFacts,
    HostSample,
    HostStats,
    LogEvent,
    PcieLink,
    ProbeStatus,
)
from probes.wire.sanitize import check_depth, clean_json, clean_text, may_need_cleaning

SCHEMA_VERSION = 2
"""The layout this version writes."""

READABLE_VERSIONS = frozenset({1, 2})
"""What a reader opens as it is: version 1 holds every sample whole in ``items``."""

APPLICATION_ID = 0x52574331
"""``PRAGMA application_id`` of a recording ("RWC1"), so ``file(1)``-style tools can tell."""

RECORDING_SUFFIX = ".sqlite3"

SQLITE_MAGIC = b"SQLite format 3\x00"

_ZDICT_VERSION = 1
"""Bump when ``typical_items`` changes, so dictionary ids stay distinct."""

_RAW_DEFLATE = -15
"""Raw deflate: no zlib header or checksum, which are a noticeable part of a small row."""

_COMPRESS_LEVEL = 6


class RecordingError(RigwatchError):
    """A file that cannot be opened as a recording; the message is one line for the UI."""

    title = "Recording unusable"


Migration = Callable[[sqlite3.Connection], None]


class Queryable(Protocol):
    """What a reader queries through: a connection, or ``untrusted.Guarded`` around one."""

    def execute(self, sql: str, params: Any = ..., /) -> sqlite3.Cursor: ...


def _create_v1(conn: sqlite3.Connection) -> None:
    """Version 0 (an empty file) -> 1: the first layout."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE hosts(id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
    conn.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, host_id INTEGER, ts REAL, "
                 "kind TEXT, body BLOB)")
    conn.execute("CREATE INDEX items_ts ON items(ts)")
    conn.execute("CREATE INDEX items_kind_ts ON items(kind, ts)")
    conn.execute("INSERT INTO meta VALUES ('app', 'rigwatch')")


def _create_v2(conn: sqlite3.Connection) -> None:
    """1 -> 2: samples as columnar blocks (:mod:`probes.store.columns`).

    ``templates``: a host's whole sample, once per static signature.  ``blocks``: the
    moving numbers of up to a few minutes of one host's samples of one template.
    ``staging``: each second's samples, cheap, until their block is packed (``packed``
    says which staged rows of a host are already in blocks, so a reader never sees a
    sample twice).  ``after_item`` is the ``items`` id recorded just before a block's
    first sample: the order of samples against hellos.  Samples that do not split, and
    every sample of a version-1 file, stay whole in ``items``.
    """
    conn.execute("CREATE TABLE templates(id INTEGER PRIMARY KEY, host_id INTEGER, ts REAL, "
                 "body BLOB)")
    conn.execute("CREATE TABLE blocks(id INTEGER PRIMARY KEY, host_id INTEGER, t0 REAL, "
                 "t1 REAL, n INTEGER, template_id INTEGER, after_item INTEGER, tier INTEGER, "
                 "body BLOB, lo BLOB, hi BLOB)")
    conn.execute("CREATE INDEX blocks_t0 ON blocks(t0)")
    conn.execute("CREATE INDEX blocks_host ON blocks(host_id, t0)")
    conn.execute("CREATE INDEX blocks_after ON blocks(host_id, after_item)")
    conn.execute("CREATE INDEX blocks_tier ON blocks(tier, t0)")
    conn.execute("CREATE TABLE staging(id INTEGER PRIMARY KEY, host_id INTEGER, "
                 "template_id INTEGER, after_item INTEGER, ts REAL, body BLOB)")
    conn.execute("CREATE TABLE packed(host_id INTEGER PRIMARY KEY, last_staged INTEGER)")


MIGRATIONS: dict[int, Migration] = {1: _create_v1, 2: _create_v2}
"""Target version -> the step that brings a file there from the version before.

Opening a file at version ``v`` runs steps ``v+1 … SCHEMA_VERSION`` in one transaction; a
missing step means the file is too old to migrate.  A new file is version 0.
"""


def typical_items() -> list[Item]:
    """Items like the ones a recording is full of, to build the preset dictionary from.

    Two GPUs are enough: later GPUs in a row refer back to the first one.
    """
    gpus = tuple(
        GpuSample(index=i, uuid=f"GPU-3e402b14-2484-beac-717e-b0905390241{i}",
                  mem_used_mib=60000.0, mem_total_mib=81559.0, util_pct=97.7, mem_util_pct=53.7,
                  temp_c=66.2, power_w=615.9, power_limit_w=700.0, sm_clock_mhz=1980.0,
                  sm_clock_max_mhz=1980.0, pcie_gen=5, pcie_gen_max=5, pcie_width=16,
                  pcie_width_max=16, temp_mem_c=72.2, mem_clock_mhz=2619.0,
                  mem_clock_max_mhz=2619.0, pstate="P0", ecc_corrected_volatile=0,
                  ecc_uncorrected_volatile=0, ecc_corrected_aggregate=0,
                  ecc_uncorrected_aggregate=0, remap_correctable=0, remap_uncorrectable=0,
                  remap_pending=False, remap_failure=False, nvlink_up=18, nvlink_links=18,
                  persistence=True, pcie_replay=0, pcie_tx_kbs=1234.5, pcie_rx_kbs=2345.6,
                  clock_reasons=("sw_power_cap",),
                  processes=(GpuProcess(pid=41000, name="python", user="train",
                                        used_mib=59480.0),))
        for i in range(2))
    sample = HostSample(
        ts=1796278170.120346, seq=12345, gpus=gpus,
        host=HostStats(cpu_pct=33.8, load1=38.6, load5=40.5, load15=40.1,
                       mem_used_bytes=451903942997, mem_total_bytes=2199023255552,
                       swap_used_bytes=0, swap_total_bytes=8589934592, swap_in_pages_s=0.0,
                       swap_out_pages_s=0.0),
        disks=tuple(DiskStats(name=n, r_s=833.3, w_s=3.0, rkb_s=218260.2, wkb_s=24.0,
                              r_await=0.5, w_await=0.3, aqu_sz=0.33, util=17.9)
                    for n in ("nvme0n1", "sda")))
    link = PcieLink(address="0000:18:00.0", speed_gts=32.0, width=16, max_speed_gts=32.0,
                    max_width=16, numa_node=0, local_cpulist="0-55,112-167")
    hello = Hello(
        ts=1796278170.1207213, protocol=1, agent_version="0.1.0",
        facts=HostFacts(hostname="node-01", kernel="5.15.0-119-generic",
                        os_name="Ubuntu 22.04.4 LTS", python="3.11.7",
                        driver_version="550.90.07", cuda_version="12.4",
                        cpu_model="Intel(R) Xeon(R) Platinum 8480+", cpu_cores_logical=224,
                        cpu_cores_physical=112, mem_total_bytes=2199023255552,
                        swap_total_bytes=8589934592,
                        gpus=(GpuInfo(index=0, uuid="GPU-3e402b14-2484-beac-717e-b09053902419",
                                      bus_id="0000:18:00.0", name="NVIDIA H100 80GB HBM3",
                                      mem_total_mib=81559.0, temp_slowdown_c=90.0,
                                      temp_shutdown_c=92.0, pcie_gen_max_gpu=5,
                                      persistence_mode=True, ecc_mode=True, mig_mode=False,
                                      power_limit_default_w=700.0),),
                        probes=(ProbeStatus(name="nvml", available=True),)),
        pcie={"0000:18:00.0": (link,)})
    event = LogEvent(ts=1796278171.5, source=KERNEL_SOURCE,
                     line="NVRM: Xid (PCI:0000:18:00): 79, pid=41000, GPU has fallen off the bus.",
                     boot="0b5c1f2e-8d7a-4c3b-9e6f-1a2b3c4d5e6f")
    finding = Finding(Step.GPU, Code.CLOCKS_THROTTLED, Severity.WARNING,
                      "GPU 0 throttled: hw_slowdown at 1410/1980 MHz", "node-01", gpu=0,
                      ts=1796278171.5, action="Check cooling and power delivery.")
    # Least frequent first: deflate finds the nearest (cheapest) match at the end.
    return [hello, finding, event, sample]


def build_zdict() -> tuple[str, bytes]:
    parts = [dumps(codec.encode(item)) for item in typical_items()]
    data = b"".join(parts)[-32768:]
    digest = hashlib.sha256(data).hexdigest()[:12]
    return f"v{_ZDICT_VERSION}-{digest}", data


def dumps(data: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON of one encoded item.

    orjson writes it nine times faster than ``json`` (7 against 67 µs for an 8-GPU sample:
    half the writer thread's time, which holds the GIL the UI needs).  Items hold only
    finite numbers (the protocol refuses the others), so orjson's NaN-as-null never
    applies; what it refuses (an integer over 64 bits, a lone surrogate) goes to ``json``,
    as before.
    """
    if _orjson is not None:
        try:
            return _orjson.dumps(data)
        except (TypeError, _orjson.JSONEncodeError):
            pass
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Body:
    """Packs and unpacks rows with one file's dictionary."""

    def __init__(self, zdict: bytes) -> None:
        self.zdict = zdict

    def pack(self, item: Item) -> tuple[str, bytes]:
        data = codec.encode(item)
        c = zlib.compressobj(_COMPRESS_LEVEL, zlib.DEFLATED, _RAW_DEFLATE, zdict=self.zdict)
        return data[codec.TAG_KEY], c.compress(dumps(data)) + c.flush()

    def unpack(self, body: bytes) -> Item:
        """The item a row holds.  The file may be someone else's: the row is inflated no
        further than ``MAX_ROW_BYTES``, its nesting is checked before it is parsed, a
        number JSON cannot hold (NaN, ±Inf, 1e400, an integer beyond 64 bits) refuses
        it, and its text is cleaned as the wire's is.

        Raises:
            DataTooLarge, TooDeep, CodecError, ValueError, zlib.error: a row to skip.
        """
        raw = inflate(body, MAX_ROW_BYTES, _RAW_DEFLATE, self.zdict)
        check_depth(raw)
        data = _loads(raw)
        if may_need_cleaning(raw):  # a recording made before the wire sanitised host text
            data = clean_json(data, frozenset({"topo_text", "nvlink_text"}))
        return codec.decode(data)


def _loads(raw: bytes) -> Any:
    """JSON with finite numbers only: orjson refuses the others; what it refuses that
    :func:`dumps` may have written with ``json`` (a lone surrogate) is read by ``json``,
    refusing the same numbers."""
    if _orjson is not None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(raw, parse_constant=_refuse, parse_float=_finite, parse_int=_int64)


def _refuse(text: str) -> Any:
    raise ValueError(f"{text} in a recorded item")


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text[:20]} in a recorded item")
    return v


def _int64(text: str) -> int:
    if len(text) > 20 or not -(2 ** 63) <= (v := int(text)) < 2 ** 64:
        raise ValueError(f"an integer of {len(text)} digits in a recorded item")
    return v


def check_header(path: Path) -> bool:
    """True when the file is empty (a new recording); RecordingError unless it is SQLite."""
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise RecordingError(f"cannot open recording {path}: {e.strerror or e}") from None
    if not head:
        return True
    if head != SQLITE_MAGIC:
        raise RecordingError(f"{path} is not a rigwatch recording (not an SQLite file)")
    return False


def schema_version(conn: Queryable, path: Path) -> int:
    """The file's schema version; 0 for a database with no tables yet."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return 0
        if "meta" not in tables:
            raise RecordingError(f"{path} is not a rigwatch recording (no meta table)")
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                                 "('app', 'schema_version')").fetchall())
    except sqlite3.DatabaseError as e:
        raise RecordingError(f"{path} is not a rigwatch recording ({e})") from None
    if meta.get("app") != "rigwatch":
        raise RecordingError(f"{path} is not a rigwatch recording (no rigwatch meta)")
    try:
        return int(meta.get("schema_version", ""))
    except ValueError:
        raise RecordingError(f"{path} is not a rigwatch recording "
                             f"(schema_version {meta.get('schema_version')!r})") from None


def refuse_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise RecordingError(f"{path} has schema version {version}, newer than the supported "
                             f"version {SCHEMA_VERSION}: open it with a newer rigwatch")
    missing = [v for v in range(version + 1, SCHEMA_VERSION + 1) if v not in MIGRATIONS]
    if missing:
        raise RecordingError(f"{path} has schema version {version}, which cannot be migrated "
                             f"to the supported version {SCHEMA_VERSION}")


MAX_META_CHARS = 64 << 20
"""The longest ``meta`` value read (the hosts' specs of 10,000 hosts are about 2 MB)."""
MAX_META_ROWS = 4096


def read_meta(conn: Queryable) -> dict[str, str]:
    """The ``meta`` table's text values (a value of another type, or longer than any
    rigwatch writes, is not read: the file may be someone else's)."""
    return dict(conn.execute(
        "SELECT key, value FROM meta WHERE typeof(key) = 'text' AND typeof(value) = 'text' "
        "AND length(value) <= ? LIMIT ?", (MAX_META_CHARS, MAX_META_ROWS)).fetchall())


MAX_HOST_NAME = 256
"""A host name read from a file longer than this is cut (with an ellipsis): a name is a
screen's label, and the file may be someone else's."""


def clean_host_name(raw: object) -> str:
    """A host name read from a file as one printable line (``clean_text``), at most
    ``MAX_HOST_NAME`` characters."""
    name = clean_text(raw if isinstance(raw, str) else str(raw))
    return name if len(name) <= MAX_HOST_NAME else name[:MAX_HOST_NAME - 1] + "…"


def stored_zdict(meta: dict[str, str], path: Path) -> bytes:
    try:
        zdict = base64.b64decode(meta["zdict"], validate=True)
    except (KeyError, ValueError):
        raise RecordingError(f"{path} is damaged: its compression dictionary is missing") from None
    digest = hashlib.sha256(zdict).hexdigest()[:12]
    if not meta.get("zdict_id", "").endswith(digest):
        raise RecordingError(f"{path} is damaged: compression dictionary "
                             f"{meta.get('zdict_id')!r} does not match its contents")
    return zdict


HOST_SPECS_KEY = "host_specs"
"""``meta`` key of the hosts as the recording console described them (tags, GPUs expected…)."""
GPU_NUMBERS_KEY = "gpu_numbers"
"""``meta`` key of each GPU's moving columns in the rows (a JSON list, the field table's at
creation): a console whose table has more reads them as None.  A recording without it has
``probes.store.columns.LEGACY_GPU_NUMBERS``."""


def encode_host_specs(specs: Iterable[HostSpec]) -> str:
    """What a replay needs of each host's spec, as JSON for ``meta``.

    Only what the screens show or judge by: tags, expected GPUs, the sampling interval and
    simulated speed (a simulated minute per second is a normal pace, not silence), and the
    scenarios (a simulated host says so).  Addresses, users and key files stay out.
    """
    return json.dumps({s.name: {"tags": list(s.tags), "expect_gpus": s.expect_gpus,
                                "interval_s": s.interval_s, "speed": s.speed,
                                "simulate": list(s.simulate)} for s in specs},
                      separators=(",", ":"))


def decode_host_specs(text: str | None, names: Iterable[str]) -> list[HostSpec]:
    """A spec per recorded host name, from :func:`encode_host_specs`'s JSON where it has one.

    A recording made before specs were stored, or a damaged entry, gives the bare name: it
    still opens.  Text from the file is cleaned like host text (the file may come from
    elsewhere).
    """
    try:
        stored = _loads(text.encode("utf-8", "replace")) if text else {}
    except (ValueError, RecursionError):
        stored = {}
    if not isinstance(stored, dict):
        stored = {}
    stored = {clean_host_name(k): v for k, v in stored.items()}
    specs = []
    for name in names:
        entry = stored.get(name)
        specs.append(_spec_from(name, entry) if isinstance(entry, dict) else HostSpec(name=name))
    return specs


def _spec_from(name: str, entry: dict[str, Any]) -> HostSpec:
    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key)
        if not isinstance(value, list):
            return ()
        return tuple(clean_text(v) for v in value if isinstance(v, str))[:32]

    def positive(key: str, default: float) -> float:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e9:
            return float(value)
        return default

    expect = entry.get("expect_gpus")
    expect_ok = isinstance(expect, int) and not isinstance(expect, bool) and 0 <= expect <= 4096
    return HostSpec(name=name, tags=strings("tags"), expect_gpus=expect if expect_ok else None,
                    interval_s=positive("interval_s", 1.0), speed=positive("speed", 1.0),
                    simulate=strings("simulate"))
