"""Reading wire protocol v2: static facts once, then each tick's moving numbers as an array.

A v2 hello declares the columns (``columns``); a ``static`` object carries the fields
that rarely move, per GPU in the order of the tick's GPU list, and comes again whenever
one changes; each tick is then one JSON array ``[seq, ts, gpus, host, disks(, pcie)]``
(PROTOCOL.md, "Wire protocol v2").  So this reader has state, one per stream: it lives in
``MessageReader`` next to the line splitter.

The decoded :class:`HostSample` equals what v1 gives for the same agent tick, field by
field: every value goes through the same checks.  The fast path decodes the array with
msgspec into ``array_like`` Structs typed with the checked bounds and merges each GPU's
already-checked static values; any line it refuses (an odd value, columns this console
does not know) is rebuilt into v1's object and handed to v1's checked decoder.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import Struct
from msgspec.structs import asdict

from probes.errors import ProtocolError
from probes.wire import fields, structs
from probes.wire.fields import Amount, Count, Type
from probes.wire.samples import (
    DiskStats,
    GpuProcess,
    GpuSample,
    HostSample,
    HostStats,
)
from probes.wire.structs import Seq, Stamp

COMPACT_VERSION = 2
GPU_STATIC = fields.static_columns(fields.GPU_TABLE)
GPU_MOVING = fields.moving_columns(fields.GPU_TABLE)
PROCESS_COLUMNS = ("pid", "name", "user", "slurm_job", "slurm_step", "slurm_task", "rank",
                   "local_rank", "world_size", "master_addr", "cuda_visible_devices",
                   "container", "runtime", "pod", "environ")
HOST_STATIC = ("mem_total_bytes", "swap_total_bytes")
HOST_MOVING = ("cpu_pct", "load1", "load5", "load15", "mem_used_bytes", "swap_used_bytes",
               "swap_in_pages_s", "swap_out_pages_s")
DISK_COLUMNS = ("name", "r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util")
COLUMNS: dict[str, tuple[str, ...]] = {
    "gpu_static": GPU_STATIC, "gpu": GPU_MOVING, "process": PROCESS_COLUMNS,
    "host_static": HOST_STATIC, "host": HOST_MOVING, "disk": DISK_COLUMNS}
"""The layout this console's fast path knows (the agent's ``compact_columns``)."""


def _row_field(spec: fields.GpuFieldSpec) -> tuple[str, Any]:
    if spec.type is Type.REASONS:
        return spec.name, tuple[str, ...]
    if spec.type is Type.PROCESS_MIB:
        return spec.name, list[Amount | None] | None
    if spec.type is Type.AMOUNT:
        return spec.name, Amount | None
    if spec.type is Type.COUNT:
        return spec.name, Count | None
    raise ValueError(f"GPU field {spec.name}: a moving field is a number, the clock reasons "
                     f"or the processes' memory, not {spec.type.value}")


def gpu_row_struct(table: tuple[fields.GpuFieldSpec, ...]) -> type[Struct]:
    """One GPU's moving numbers, in the table's moving order (positional on the wire).

    Each field is named as the sample's (``process_used_mib`` as ``processes``, so
    the filler sets the sample's slot, which then gets the static processes with these
    amounts)."""
    return msgspec.defstruct("GpuRow", [_row_field(s) for s in fields.moving_specs(table)],
                             array_like=True, gc=False)


if TYPE_CHECKING:  # what mypy sees: the fields read by name (the others by the filler)
    class GpuRow(Struct, array_like=True, gc=False):
        clock_reasons: tuple[str, ...]
        processes: list[Amount | None] | None
else:
    GpuRow = gpu_row_struct(fields.GPU_TABLE)
_STATIC_VALUES = tuple(s.name for s in fields.static_specs(fields.GPU_TABLE)
                       if s.type is not Type.PROCESSES)
"""The static fields a GPU's checked static half gives (its processes come apart)."""
GPU_ROW_FIELDS: tuple[str, ...] = GpuRow.__struct_fields__
"""A GPU's moving fields as its row holds them (``processes`` for ``process_used_mib``)."""

Filler = Callable[[dict[str, Any], Any], dict[str, Any]]


def row_filler(names: tuple[str, ...], skip: str | None = None) -> Filler:
    """A function ``fill(base, row) -> dict``: a copy of ``base`` with each of ``names``
    set from the row's attribute of that name (all but ``skip``).

    ``base`` already holds every key, the moving ones as placeholders, so the copy is made
    at its final size in the sample's key order and each value is one store: half the cost
    of ``base | asdict(row)``, which builds a second dict and grows the first (issue 38:
    the decode's dict per GPU).  Written once per table, as ``dataclasses`` writes
    ``__init__``; the names come from the field table, never from the wire.
    """
    for n in names:
        if not n.isidentifier():
            raise ValueError(f"not a field name: {n!r}")
    body = "".join(f"    d[{n!r}] = row.{n}\n" for n in names if n != skip)
    ns: dict[str, Any] = {}
    exec(f"def fill(base, row):\n    d = base.copy()\n{body}    return d\n", ns)
    fill: Filler = ns["fill"]
    return fill


_fill_gpu = row_filler(GPU_ROW_FIELDS, skip="processes")
_GPU_PLACES = dict.fromkeys(GPU_ROW_FIELDS)


class HostRow(Struct, array_like=True, gc=False):
    cpu_pct: Amount | None
    load1: Amount | None
    load5: Amount | None
    load15: Amount | None
    mem_used_bytes: Count | None
    swap_used_bytes: Count | None
    swap_in_pages_s: Amount | None
    swap_out_pages_s: Amount | None


class DiskRow(Struct, array_like=True, gc=False):
    name: str
    r_s: Amount | None
    w_s: Amount | None
    rkb_s: Amount | None
    wkb_s: Amount | None
    r_await: Amount | None
    w_await: Amount | None
    aqu_sz: Amount | None
    util: Amount | None


class SampleRow(Struct, array_like=True, gc=False):
    """A v2 tick.  ``pcie``: the chains the agent sends every 30th tick, typed as v1's
    checked decoder bounds them (``structs.PcieLinkS``); any other shape refuses the tick."""

    seq: Seq | None
    ts: Stamp
    gpus: list[GpuRow]
    host: HostRow
    disks: list[DiskRow]
    pcie: structs.Chains | None = None


_fill_host = row_filler(HostRow.__struct_fields__)
_HOST_PLACES = dict.fromkeys(HostRow.__struct_fields__)
_DECODER = msgspec.json.Decoder(SampleRow)
_new = object.__new__
_DISK_NAME = attrgetter("name")
_ROW_PROCS = attrgetter("processes")
_set = object.__setattr__

V1Decoder = Callable[[dict[str, Any]], HostSample]
"""v1's checked sample decoder (``probes.wire.decode_fields._decode_sample``), passed in so this
module does not import the reader that imports it."""


class StaticEpoch:
    """One ``static`` message of one v2 stream (``HostSample.static_epoch``): its identity
    (``is``) says two samples share every static field, and its slots hold what the
    console's per-tick judges read from those fields once, so each verdict lives exactly as
    long as the facts it judged (issue 38: judgements recomputed only for what changed)."""

    __slots__ = ("_bases", "_host", "_last_procs", "findings", "gpus", "listed", "strays")

    def __init__(self, gpus: tuple[GpuSample | None, ...] = (),
                 host: dict[str, Any] | None = None) -> None:
        self.gpus = gpus
        """Each GPU position's checked static half (its moving fields None, its processes
        with no memory): what a per-tick reader of ``HostSample.wire_row`` takes a GPU's
        index, limits and processes from (None: a GPU v1 would drop; such a stream's samples
        have no ``wire_row``)."""
        self._bases = [g.__dict__ for g in gpus if g is not None]
        self._host = host or {}
        """The host's checked static half with the moving places (``row_host``'s base)."""
        self.listed = sum(1 for g in gpus if g is not None and g.index >= 0)
        """How many GPUs with a believable index it lists (``listed_gpus``)."""
        """Each GPU's static half as the filler's base (``row_gpus``; a whole epoch's)."""
        self._last_procs: list[tuple[list[float | None], tuple[GpuProcess, ...]] | None] = \
            [None] * len(gpus)
        self.findings: object = None
        """``probes.analysis.findings.sample_findings``: the static half of its findings."""
        self.strays: object = None
        """``probes.analysis.allocation.stray_process_findings``: which processes could be
        strays (outside any job on a Slurm node), whatever memory they hold."""

    def row_gpus(self, row: SampleRow) -> tuple[GpuSample, ...]:
        """The GPUs of a sample whose tick ``row`` was kept whole (``HostSample.wire_row``),
        built as the eager fast path built them: each position's static half filled with the
        row's moving values, in the same key order; a GPU's processes the last tuple built
        in this epoch while their amounts stay the same (so samples share it, as before).
        ``HostSample.gpus`` calls this on its first read."""
        out = []
        bases, lasts = self._bases, self._last_procs
        for i, r in enumerate(row.gpus):  # as many as bases: checked by the fast path
            base = bases[i]
            values = _fill_gpu(base, r)
            mib = r.processes
            last = lasts[i]
            if last is not None and last[0] == mib:
                values["processes"] = last[1]
            else:  # the static processes (a whole epoch has them) with these amounts
                procs = tuple([_proc(p, m) for p, m in zip(base["processes"], mib or (),
                                                             strict=True)])
                lasts[i] = (mib, procs)  # type: ignore[assignment]
                values["processes"] = procs
            obj = _new(GpuSample)
            _set(obj, "__dict__", values)
            out.append(obj)
        return tuple(out)


    def row_host(self, row: SampleRow) -> HostStats:
        """The ``HostStats`` of a sample whose tick ``row`` was kept whole, built as the
        eager fast path built it (``_fill_host`` over this epoch's static half).
        ``HostSample.host`` calls this on its first read."""
        stats = _new(HostStats)
        _set(stats, "__dict__", _fill_host(self._host, row.host))
        return stats

    @staticmethod
    def row_disks(row: SampleRow) -> tuple[DiskStats, ...]:
        """The disks of a sample whose tick ``row`` was kept whole, built as the eager fast
        path built them (the fast path refused a disk named twice already).
        ``HostSample.disks`` calls this on its first read."""
        return tuple([_disk(d) for d in row.disks])


class CompactStream:
    """The v2 state of one stream: the declared columns and the last static facts."""

    def __init__(self, columns: Any, checked: V1Decoder, *, builds: bool = True,
                 parse: Callable[[bytes], Any] | None = None,
                 gpu_index: Callable[[Any], int | None] | None = None,
                 statics: V1Decoder | None = None) -> None:
        self.columns = columns
        """The hello's ``columns`` as given (shared: ``protocol.shared_columns``): a
        collector relays them with the hello it decoded."""
        if not isinstance(columns, dict):  # every tick then reads as garbled, the hello not
            columns = {}
        self.cols = {k: tuple(c for c in v if isinstance(c, str)) if isinstance(v, list) else ()
                     for k, v in columns.items() if isinstance(k, str)}
        self.known = all(self.cols.get(k) == v for k, v in COLUMNS.items())
        """The hello declares the layout the fast path was written for."""
        self._checked = checked
        self._static_gpus: list[dict[str, Any]] | None = None
        """The last ``static`` message's GPUs as named fields, as parsed: what the checked
        path (``_slow``) merges a tick into.  None where it is to be read again from the kept
        line (``_raw_statics``): a stream that builds its samples holds its static facts
        checked (the epoch's halves), not twice (issue 38, memory: ~9 KB a host)."""
        self._has_static = False
        """A ``static`` message has come (a tick before one is refused)."""
        self._static_host: dict[str, Any] = {}
        self._gpu_base: list[dict[str, Any] | None] = []
        """Per GPU position: its checked static fields, or None when v1 would drop it."""
        self._procs: list[tuple[GpuProcess, ...] | None] = []
        self._host_base: dict[str, Any] = {}
        self._last_procs: list[tuple[list[float | None] | None, tuple[GpuProcess, ...]] | None]
        self._last_procs = []
        self._epoch = StaticEpoch()
        self._whole = False
        """Every GPU and its processes are kept as the tick sends them (``wire_row``): the
        samples' GPUs are then built only when read (``StaticEpoch.row_gpus``)."""
        self._proc_counts: list[int] = []
        """Per GPU position, how many processes its static facts list (a whole epoch's)."""
        self._builds = builds
        """False: the stream's ticks are only checked (``readable``: a collector's); the
        static facts are then kept as the message's line, and the checked halves each
        tick's sample is filled from are never built: a tick the quick check refuses is
        judged by the checked path alone, from the line parsed again (issue 38, memory: a
        collector holds a thousand streams)."""
        self._fit: list[int | None] = []
        """Per GPU position, how many process amounts a tick must give (None: any, the GPU
        is dropped or lists no processes): ``readable``'s check, in either mode."""
        self._fit_all = False
        """No None in ``_fit``: the check is one list comparison."""
        self._thin = False
        """The checked halves are not built (``builds`` False)."""
        self._message: dict[str, Any] | bytes = {}
        """The last ``static`` message's line, compressed, where ``parse`` (the reader's
        parse-and-sanitise) can read it again, else (a thin stream's) as parsed: only a tick
        the fast path or the quick check refuses reads it (issue 38, memory: the line is a
        third of the parsed message and compresses to a quarter; a stream that builds its
        samples otherwise holds its facts checked only)."""
        self._parse = parse
        self._gpu_index = gpu_index
        self._checked_whole = statics or checked
        """What checks a ``static`` message's host and GPUs in one call (``_check_all``)
        where every float in it is finite: ``checked``'s answer, or its equal by a quicker
        path (``protocol._static_half``)."""
        self._finite = False
        """Every float of the ``static`` message being taken is finite (``static``)."""
        """v1's check of a GPU's ``index`` (``decode_fields._index``: None where v1 drops the
        GPU): a stream that does not build reads its ``static`` summary with it
        (``_take_thin``); without it, it checks the message as one that builds does."""
        self.static_id = 0
        """The last ``static`` line's CRC-32 (0: none): a relayed tick names its own."""

    # --- static -------------------------------------------------------------------------

    def static(self, obj: dict[str, Any], static_id: int = 0, line: bytes | None = None,
               finite: bool = False) -> None:
        """Take a ``static`` message (already parsed and sanitised; ``static_id`` its line's
        CRC-32; ``line`` the line ``obj`` was parsed from, which a thin stream keeps;
        ``finite``: every float in ``obj`` is finite, as orjson parses them)."""
        self.static_id = static_id
        self._finite = finite
        self._take(obj)
        if line is not None and self._parse is not None:
            self._message = zlib.compress(line, 1)  # ~2 KB to ~0.5 KB; ~35 µs a message
            if not self._thin:  # read again from the line by the rare tick that needs them
                self._static_gpus = None

    def _statics(self, obj: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A ``static`` message's GPUs and host as named fields (what ``_slow`` merges)."""
        gpus = obj.get("gpus")
        host = obj.get("host")
        names = self.cols.get("gpu_static", ())
        return ([dict(zip(names, row, strict=False)) if isinstance(row, list) else {}
                 for row in gpus] if isinstance(gpus, list) else [],
                dict(zip(self.cols.get("host_static", ()), host, strict=False))
                if isinstance(host, list) else {})

    def _kept(self) -> dict[str, Any]:
        """A thin stream's last ``static`` message, parsed (again, from its line)."""
        m = self._message
        if isinstance(m, bytes):
            assert self._parse is not None
            obj = self._parse(zlib.decompress(m))
            return obj if isinstance(obj, dict) else {}
        return m

    def _raw_statics(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The last ``static`` message's GPUs and host as named fields (``_statics``): a
        stream that dropped them reads them again from its kept line, once, and keeps them
        while this epoch lasts (a host whose ticks the fast path refuses pays one parse)."""
        if self._static_gpus is None:
            self._static_gpus, self._static_host = self._statics(self._kept())
        return self._static_gpus, self._static_host

    def _take(self, obj: dict[str, Any]) -> None:
        if not self._builds and self._gpu_index is not None:
            self._take_thin(obj)
            return
        self._message = {} if self._builds else obj
        self._has_static = True
        self._static_gpus, self._static_host = self._statics(obj)
        # Check the static half once, as v1's decoder would on every tick: the host and
        # every GPU in one call where v1 keeps every GPU (issue 38, start-up: one call, not
        # one per GPU and one for the host), else GPU by GPU, each position its own verdict.
        v1 = [self._v1_gpu(g, None) for g in self._static_gpus]
        whole = self._check_all(v1)
        if whole is not None:
            host = whole.host
            self._gpu_base = [{k: getattr(s, k) for k in _STATIC_VALUES} | _GPU_PLACES
                              for s in whole.gpus]
            self._procs = [s.processes for s in whole.gpus]
        else:
            host = self._checked({"type": "sample", "ts": 1.0, "host": self._static_host}).host
            self._gpu_base, self._procs = [], []
            for g in v1:
                alone = self._checked({"type": "sample", "ts": 1.0, "gpus": [g]})
                s = alone.gpus[0] if alone.gpus else None  # None: v1 drops it (no index)
                self._gpu_base.append(None if s is None else
                                      {k: getattr(s, k) for k in _STATIC_VALUES} | _GPU_PLACES)
                self._procs.append(None if s is None else s.processes)
        self._host_base = {k: getattr(host, k) for k in HOST_STATIC} | _HOST_PLACES
        self._last_procs = [None] * len(self._procs)
        self._epoch = StaticEpoch(tuple(_static_gpu(b, p) for b, p in
                                        zip(self._gpu_base, self._procs, strict=True)),
                                  self._host_base)
        self._whole = all(b is not None for b in self._gpu_base) and \
            all(p is not None for p in self._procs)
        self._proc_counts = [len(p) for p in self._procs if p is not None]
        self._fit = [None if b is None or p is None else len(p)
                     for b, p in zip(self._gpu_base, self._procs, strict=True)]
        self._fit_all = None not in self._fit
        self._thin = not self._builds
        if self._thin:  # only the check's summary is kept; ``_built`` makes the rest again
            self._static_gpus, self._gpu_base, self._procs, self._last_procs = [], [], [], []
            self._host_base, self._proc_counts = {}, []
            self._epoch = StaticEpoch()

    def _take_thin(self, obj: dict[str, Any]) -> None:
        """``_take`` for a stream that does not build (a collector's): of the message only
        what ``readable`` checks a tick against, per GPU position how many process amounts
        the tick must give (``_fit``), read off the message as v1's decoder judges it
        (``_take`` runs that decoder over every GPU and keeps the same summary): a GPU whose
        ``index`` v1 refuses is dropped (None), one whose ``processes`` is no list has none
        (None), else its processes are the entries that are objects or rows of the process
        columns (``_v1_gpu`` makes a row an object; the decoder keeps the objects).  The
        decoder's other checks never refuse a static message, nor change this summary
        (issue 38, start-up: ~150 µs a host in a collector, for a few ints;
        tests/wire/test_start_decode_once.py checks it against the decoder's summary)."""
        index = self._gpu_index
        assert index is not None
        self._message = obj
        self._has_static = True
        gpus = obj.get("gpus")
        names = self.cols.get("gpu_static", ())
        fit: list[int | None] = []
        for row in gpus if isinstance(gpus, list) else ():
            g = dict(zip(names, row, strict=False)) if isinstance(row, list) else {}
            procs = g.get("processes")
            fit.append(None if index(g.get("index")) is None or not isinstance(procs, list)
                       else sum(1 for p in procs if isinstance(p, (list, dict))))
        self._fit = fit
        self._fit_all = self._whole = None not in fit
        self._thin = True
        self._static_gpus, self._gpu_base, self._procs, self._last_procs = [], [], [], []
        host = obj.get("host")  # kept as ``_take`` keeps it (no tick of a thin stream reads it)
        self._static_host = dict(zip(self.cols.get("host_static", ()), host, strict=False)) \
            if isinstance(host, list) else {}
        self._host_base, self._proc_counts = {}, []
        self._epoch = StaticEpoch()

    def _check_all(self, gpus: list[dict[str, Any]]) -> HostSample | None:
        """The static host and ``gpus`` (v1's shape) through v1's decoder in one call, where
        it keeps every GPU (so each is at its position); None where it drops one or refuses
        the whole (the caller then checks GPU by GPU, as the decoder judges each alone)."""
        try:
            whole = (self._checked_whole if self._finite else self._checked)(
                {"type": "sample", "ts": 1.0, "host": self._static_host, "gpus": gpus})
        except Exception:  # the GPU-by-GPU check raises where this did
            return None
        return whole if len(whole.gpus) == len(gpus) else None

    # --- ticks --------------------------------------------------------------------------

    def sample(self, line: bytes | None, parsed: Callable[[], Any]) -> HostSample:
        """Decode one tick; ``parsed`` gives the line parsed and sanitised (checked path).

        ``line`` is None where the raw line may hold text to sanitise: checked path only.

        Raises:
            ProtocolError: no static facts yet, or a tick that does not fit them.
        """
        if not self._has_static:
            raise ProtocolError("v2 sample before any static message")
        if self._thin:  # a collector's stream, at a tick its quick check did not take:
            # the fast path would refuse it too (``readable``), so the checked path alone
            # decides, from the kept message; nothing is built or kept (the stream stays
            # thin: a host whose ticks the quick check refuses pays a parse a tick, not
            # ~90 KB)
            return self._slow(parsed(), self._statics(self._kept()))
        if self.known and line is not None:
            try:
                return self._fast(line)
            except Exception:  # the checked path below decides
                pass
        return self._slow(parsed())

    def readable(self, line: bytes | None, parsed: Callable[[], Any]) -> SampleRow | None:
        """Whether ``sample`` would take this tick, without building the sample: its row
        where the fast path takes it whole (a collector relays it: ``from_row``), else None.

        A tick the fast path takes whole is judged by the typed decode alone (its other
        steps cannot fail); any other goes through ``sample``: the verdict is the same.

        Raises:
            ProtocolError: as ``sample``.
        """
        if line is not None:
            s = self.quick_row(line)
            if s is not None:
                return s
        self.sample(line, parsed)
        return None

    def quick_row(self, line: bytes) -> SampleRow | None:
        """``readable``'s fast step alone, for a line with nothing to sanitise: the tick's
        row where the fast path takes it whole, else None (the caller then asks
        ``readable``, which judges it).  Nothing is kept or counted: a collector's reader
        tries it first on a chunk that is one whole tick, newline and all: JSON's whitespace,
        the same decode and verdict as the line's (issue 38, the collector's CPU)."""
        if self._has_static and self.known:
            try:
                s = _DECODER.decode(line)
            except Exception:  # the checked path decides
                return None
            if self._fit_all:  # ``_procs_fit`` inline: the list's length is the GPU count's
                try:
                    if [len(g.processes) for g in s.gpus] != self._fit:  # type: ignore[arg-type]
                        return None
                except TypeError:  # a GPU's amounts are null
                    return None
            elif len(s.gpus) != len(self._fit) or not self._procs_fit(s):
                return None
            disks = s.disks  # one disk (or none) has no other to share its name with
            if len(disks) < 2 or len(set(map(_DISK_NAME, disks))) == len(disks):
                return s
        return None

    def from_row(self, s: SampleRow) -> HostSample:
        """The sample of a tick a collector's ``readable`` decoded, built and checked as on
        the fast path; ProtocolError where that path would refuse it."""
        if not self._has_static or self._thin or not self.known:
            raise ProtocolError("a tick's row without this stream's static facts")
        return self._fast_row(s)

    def _procs_fit(self, s: SampleRow) -> bool:
        """Every GPU's process amounts fit its static processes (``_processes`` accepts)."""
        if self._fit_all:  # every GPU's count is known: one comparison, no Python loop
            try:
                return list(map(len, map(_ROW_PROCS, s.gpus))) == self._fit
            except TypeError:  # a GPU's amounts are null
                return False
        for row, n in zip(s.gpus, self._fit, strict=True):
            if n is None:
                continue
            mib = row.processes
            if mib is None or len(mib) != n:
                return False
        return True

    def _fast(self, line: bytes) -> HostSample:
        return self._fast_row(_DECODER.decode(line))

    def _fast_row(self, s: SampleRow) -> HostSample:
        if len(s.gpus) != len(self._gpu_base):
            raise structs.Refused("GPU count")
        if self._whole:
            # The GPUs are built when read (``HostSample.gpus``); here only what could
            # refuse the tick: every GPU's process amounts fit its static processes.
            try:
                fits = list(map(len, map(_ROW_PROCS, s.gpus))) == self._proc_counts
            except TypeError:  # a GPU's amounts are null
                fits = False
            if not fits:
                raise structs.Refused("process count")
            return self._sample(s, None)
        gpus = []
        for i, (row, base) in enumerate(zip(s.gpus, self._gpu_base, strict=True)):
            if base is None:
                continue
            values = _fill_gpu(base, row)
            values["processes"] = self._processes(i, row.processes)
            obj = _new(GpuSample)
            _set(obj, "__dict__", values)
            gpus.append(obj)
        return self._sample(s, tuple(gpus))

    def _sample(self, s: SampleRow, gpus: tuple[GpuSample, ...] | None) -> HostSample:
        """The sample of tick ``s``: with ``gpus``, or (None) with its row kept and its GPUs,
        host and disks built when read (issue 38: no per-tick reader reads them; a
        ``HostStats`` and the ``DiskStats`` made and freed each tick cost ~3 µs)."""
        if len(set(map(_DISK_NAME, s.disks))) != len(s.disks):
            raise structs.Refused("a disk named twice")  # v1's object keeps the last
        pcie = None if s.pcie is None else structs.chains(s.pcie)
        if gpus is not None:
            stats = _new(HostStats)
            _set(stats, "__dict__", _fill_host(self._host_base, s.host))
            return structs.sample(s.seq or 0, s.ts, gpus, stats,
                                  tuple([_disk(d) for d in s.disks]), self._epoch, pcie=pcie)
        obj = _new(HostSample)  # no "gpus", "host", "disks": ``HostSample`` builds them
        _set(obj, "__dict__", {"ts": s.ts, "seq": s.seq or 0, "pcie": pcie,
                               "static_epoch": self._epoch, "wire_row": s})
        return obj

    def _processes(self, i: int, mib: list[float | None] | None
                   ) -> tuple[GpuProcess, ...] | None:
        """GPU ``i``'s static processes with this tick's memory (the last tuple while the
        amounts stay the same: the samples are frozen, so they can share it)."""
        procs = self._procs[i]
        if procs is None:
            return None
        last = self._last_procs[i]
        if last is not None and last[0] == mib:
            return last[1]
        if mib is None or len(mib) != len(procs):
            raise structs.Refused("process count")
        out = tuple([_proc(p, m) for p, m in zip(procs, mib, strict=True)])
        self._last_procs[i] = (mib, out)
        return out

    def _slow(self, row: Any, statics: tuple[list[dict[str, Any]], dict[str, Any]] | None = None
              ) -> HostSample:
        """Rebuild v1's object from the array and the static facts (``statics``: a thin
        stream's, read from its kept message); v1's decoder judges it."""
        if not isinstance(row, list) or len(row) < 5:
            raise ProtocolError("v2 sample is not [seq, ts, gpus, host, disks]")
        static_gpus, static_host = statics or self._raw_statics()
        gpus = row[2] if isinstance(row[2], list) else []
        if len(gpus) != len(static_gpus):
            raise ProtocolError("v2 sample's GPUs do not match its static facts")
        moving = self.cols.get("gpu", ())
        obj: dict[str, Any] = {
            "type": "sample", "seq": row[0], "ts": row[1],
            "gpus": [self._v1_gpu(s, dict(zip(moving, g, strict=False))
                                  if isinstance(g, list) else {})
                     for s, g in zip(static_gpus, gpus, strict=True)],
            "host": {**static_host,
                     **(dict(zip(self.cols.get("host", ()), row[3], strict=False))
                        if isinstance(row[3], list) else {})},
            "disks": {d[0]: dict(zip(self.cols.get("disk", ())[1:], d[1:], strict=False))
                      for d in (row[4] if isinstance(row[4], list) else [])
                      if isinstance(d, list) and d and isinstance(d[0], str)}}
        if len(row) > 5 and row[5] is not None:
            obj["pcie"] = row[5]
        return self._checked(obj)

    def _v1_gpu(self, static: dict[str, Any], moving: dict[str, Any] | None) -> dict[str, Any]:
        """One GPU as v1 sends it: the static fields, the moving ones, processes whole."""
        g = {**static, **(moving or {})}
        procs = static.get("processes")
        mib = (moving or {}).get("process_used_mib")
        if isinstance(procs, list):
            pcols = self.cols.get("process", ())
            g["processes"] = [
                {**dict(zip(pcols, p, strict=False)),
                 "used_mib": mib[i] if isinstance(mib, list) and i < len(mib) else None}
                if isinstance(p, list) else p for i, p in enumerate(procs)]
        g.pop("process_used_mib", None)
        return g


def static_gpus(sample: HostSample) -> tuple[GpuSample, ...]:
    """The sample's GPUs as a reader of their static fields (index, state, limits, the
    processes' pids) may take them: a sample kept as its row (``wire_row``) answers with its
    epoch's static halves (every one of them is there: the epoch is whole), so its GPUs are
    not built; any other sample with its GPUs."""
    epoch = sample.static_epoch
    if sample.wire_row is not None and isinstance(epoch, StaticEpoch):
        return epoch.gpus  # type: ignore[return-value]  # no None in a whole epoch
    return sample.gpus


def listed_gpus(sample: HostSample) -> int:
    """How many GPUs with a believable index the sample lists: a row sample's from its
    epoch, counted once (``static_gpus``), any other's counted."""
    epoch = sample.static_epoch
    if sample.wire_row is not None and isinstance(epoch, StaticEpoch):
        return epoch.listed
    return sum(1 for g in sample.gpus if g.index >= 0)


def _static_gpu(base: dict[str, Any] | None, procs: tuple[GpuProcess, ...] | None
                ) -> GpuSample | None:
    """GPU position's static half as a sample, over ``base`` itself (not a copy: a stream
    holds its static facts once, not once more per reader; issue 38, memory).  ``base``
    then lists the static processes where it held a placeholder: every filler that copies
    it sets the tick's own processes after, and the sample is frozen, so nothing writes it."""
    if base is None:
        return None
    base["processes"] = procs
    obj = _new(GpuSample)
    _set(obj, "__dict__", base)
    return obj


def _disk(d: DiskRow) -> DiskStats:
    obj = _new(DiskStats)
    _set(obj, "__dict__", asdict(d))
    return obj


def _proc(p: GpuProcess, mib: float | None) -> GpuProcess:
    values = p.__dict__.copy()
    values["used_mib"] = mib
    obj = _new(GpuProcess)
    _set(obj, "__dict__", values)
    return obj
