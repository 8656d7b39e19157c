"""The fleet read from Prometheus: dcgm-exporter's series as the same typed samples an agent
sends, so history, detectors, findings and screens work unchanged.

One refresh is one instant query per collected metric for the whole fleet (never one per
host); at start-up the detectors' window is read once with ``query_range`` so a leak that
began yesterday is found the moment the console opens.  Hosts come from the ``Hostname``
label (``instance`` where an exporter has none), GPUs from ``gpu``/``UUID``/``pci_bus_id``/
``modelName``.  Label values are remote text: they are cleaned before they name anything.

A Prometheus that is down, erroring or slower than a refresh is a fault of the source, not
of the hosts it reports: each host of the shard gets ``SourceHealth`` (``source-down``,
``source-slow``) and reads "unknown" until a read comes back in time; the console makes it
one finding about ``prometheus``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from probes.errors import WatcherFault
from probes.sources.prometheus.client import (
    PromClient,
    PromEndpoint,
    PrometheusError,
    number,
)
from probes.sources.prometheus.columns import Column, SlotTable
from probes.sources.prometheus.fields import (
    FIELDS,
    SAMPLE_ATTRS,
    SLOWDOWN,
    Field,
    Kind,
    identity,
    matchers,
    per_gpu,
)
from probes.sources.prometheus.rows import MAX_GPU_INDEX, GpuId, RowDecoder, host_name
from probes.sources.prometheus.shards import Shard, plan, shard_count
from probes.sources.together import all_or_cancel, both
from probes.wire.events import Emit, SourceHealth, XidEvent
from probes.wire.samples import (
    KERNEL_SOURCE,
    GpuInfo,
    Hello,
    HostFacts,
    HostSample,
    LogSourceState,
    LogSourceStatus,
    ProbeStatus,
)
from probes.wire.sanitize import clean_text

AGENT_VERSION = "prometheus"
"""The hello's agent version: the numbers come from an exporter, not our agent."""
PROTOCOL = 0
DEFAULT_REFRESH_S = 15.0
"""Prometheus's default scrape interval: refreshing faster re-reads the same samples."""
DEFAULT_HISTORY_S = 3600.0
"""The leak detector's window: the longest any detector reads."""
DEFAULT_HISTORY_STEP_S = 60.0
MAX_POINTS = 11000
"""Prometheus refuses a range query of more points per series than this."""
CONCURRENT_QUERIES = 4
"""Queries in flight at once: enough to overlap Prometheus's work with decoding."""
TOTAL = "mem_total_mib"
LOOKBACK_S = 300.0
"""Prometheus's default lookback: an instant query sees a series this long after its last
sample."""
REDISCOVER_READS = 20
"""Full refreshes between two discoveries: a host's new scrape address (an exporter pod
moved) joins its shard within minutes."""
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SOURCE = "prometheus"
"""What the source's own faults are named (``SourceHealth.source``)."""


@dataclass(frozen=True)
class PromFleetOptions:
    """What to read from which Prometheus."""

    endpoint: PromEndpoint
    match: str = ""
    """Label matchers every query carries (``job="dcgm"``): one cluster of many."""
    host_label: str = "Hostname"
    refresh_s: float = DEFAULT_REFRESH_S
    history_s: float = DEFAULT_HISTORY_S
    """Read this far back at start-up (0: no history)."""
    history_step_s: float = DEFAULT_HISTORY_STEP_S


HISTORY_POINTS = 120
"""Points per series read at start-up: the leak detector's 40 bins three times over."""
HISTORY_BUDGET = 40_000
"""Host-samples read at start-up across the fleet: 120 a host up to 333 hosts, then fewer
(40 at 1,000, 12 at 10,000: the leak detector needs six points over half an hour).  Each
costs the console about 0.3 ms to fold (history and detectors; 1 ms when they are sparse),
so 120,000 took 40 s at 1,000 hosts (``tests/bench/RESULTS.md``)."""
MIN_HISTORY_POINTS = 12


def with_window(options: PromFleetOptions, window_s: float) -> PromFleetOptions:
    """Read ``window_s`` of history at start-up (the detectors' longest window), in
    ``HISTORY_POINTS`` steps of at least a second."""
    return replace(options, history_s=window_s,
                   history_step_s=max(1.0, window_s / HISTORY_POINTS))


def host_of(labels: dict[str, str], host_label: str) -> str | None:
    """The host a series belongs to: its host label, else its scrape address without port."""
    return host_name(labels.get(host_label, ""), labels.get("instance", ""))


def gpu_of(labels: dict[str, str]) -> int | None:
    text = labels.get("gpu", "")
    if text.isascii() and text.isdigit() and len(text) <= 4 and int(text) <= MAX_GPU_INDEX:
        return int(text)
    return None


@dataclass
class Discovery:
    """The fleet as its series show it: hosts, their GPUs' identities, collected metrics."""

    gpus: dict[str, dict[int, GpuInfo]] = field(default_factory=dict)
    drivers: dict[str, str] = field(default_factory=dict)
    present: frozenset[str] = frozenset()
    """Metric names with at least one series under the match."""
    shard_label: str = "instance"
    """The label shards select hosts by: the host label where every series has it."""
    shard_values: dict[str, set[str]] = field(default_factory=dict)
    """Each host's raw values of ``shard_label`` (remote text: only ever quoted)."""

    @property
    def hosts(self) -> list[str]:
        return sorted(self.gpus)

    def missing(self) -> list[Field]:
        """Fields none of whose metrics has a series: not collected by the exporters."""
        return [f for f in FIELDS if not any(m in self.present for m in f.metrics)]

    def hello(self, host: str, ts: float, total_mib: dict[int, float]) -> Hello:
        """The host's hello: its GPUs as listed, and one probe line per metric not collected
        (``ProbeStatus`` is how a hello already says what cannot be read, and why)."""
        gpus = tuple(replace(i, mem_total_mib=total_mib.get(i.index))
                     for _, i in sorted(self.gpus.get(host, {}).items()))
        probes = [ProbeStatus("prometheus", True)]
        probes += [ProbeStatus(f.metrics[0], False, not_collected_text(f))
                   for f in self.missing()]
        facts = HostFacts(hostname=host, kernel=None, os_name=None, python=None,
                          driver_version=self.drivers.get(host), cuda_version=None,
                          cpu_model=None, cpu_cores_logical=None, cpu_cores_physical=None,
                          mem_total_bytes=None, swap_total_bytes=None, gpus=gpus,
                          probes=tuple(probes))
        return Hello(ts, PROTOCOL, AGENT_VERSION, facts)


def not_collected_text(f: Field) -> str:
    """What the operator reads where a metric is absent."""
    return f"not collected — add {f.metrics[0]} to the exporter's counters"


class PromFleetSource:
    """Reads the fleet; ``run`` emits hellos, the history window, then a sample per host
    every refresh (a shard at a time on a large fleet: ``prometheus_shards``)."""

    def __init__(self, options: PromFleetOptions, client: PromClient | None = None) -> None:
        if not _LABEL_NAME.fullmatch(options.host_label):
            raise PrometheusError(f"host label {options.host_label[:40]!r} is not a "
                                  "Prometheus label name")
        self.options = options
        self.client = client or PromClient(options.endpoint)
        self.discovery = Discovery()
        self._decoder = RowDecoder(options.host_label)
        self._seq: dict[str, int] = {}
        self._xid: dict[GpuId, int] = {}
        self._uuids: dict[str, dict[int, str | None]] = {}
        self.shards: list[Shard] = [Shard(frozenset(), "")]
        self._tables: list[SlotTable] = [SlotTable(self._decoder)]
        self.refreshes = 0
        """Shard reads done (a whole-fleet refresh is one read per shard)."""
        self.last_refresh_s = 0.0
        """Wall seconds of the newest read (queries, decoding and building samples)."""
        self.last_queries = 0
        """HTTP queries the newest read sent."""
        self._health: dict[int, tuple[WatcherFault | None, str]] = {}
        """Each shard's last told health, so a change is told once to its hosts."""
        self.history_errors: list[str] = []
        """Why fields of the newest history read are missing (each field is read alone)."""

    async def discover(self, at: float | None = None) -> Discovery:
        """Hosts, GPUs and which metrics exist (two queries); the shards follow from them.

        Raises:
            PrometheusError: Prometheus cannot answer.
        """
        opts = self.options
        names = sorted({m for f in FIELDS for m in f.metrics})
        extra = matchers(opts.match)
        every = "{" + f'__name__=~"{"|".join(names)}"' + (f",{extra}" if extra else "") + "}"
        now = time.time() if at is None else at
        # which metrics exist (a series that ended in the window still tells of it): from
        # the index, as a query over a million series would take seconds
        ids, present = await both(
            self.client.query(identity(opts.match, opts.host_label, opts.history_s), at),
            self.client.label_values("__name__", every,
                                     now - max(opts.history_s, LOOKBACK_S), now))
        found = Discovery(present=frozenset(present))
        limits = await self._slowdowns(found.present, at)
        by_host: dict[str, set[str]] = {}
        by_instance: dict[str, set[str]] = {}
        for item in ids:
            labels = item.metric
            host, idx = host_of(labels, opts.host_label), gpu_of(labels)
            if host is None or idx is None:
                continue
            found.gpus.setdefault(host, {})[idx] = GpuInfo(
                idx, _label(labels, "UUID"), _label(labels, "pci_bus_id"),
                _label(labels, "modelName"), None, temp_slowdown_c=limits.get((host, idx)))
            driver = _label(labels, "DCGM_FI_DRIVER_VERSION")
            if driver:
                found.drivers[host] = driver
            by_host.setdefault(host, set()).add(labels.get(opts.host_label, ""))
            by_instance.setdefault(host, set()).add(labels.get("instance", ""))
        if by_host and all("" not in v for v in by_host.values()):
            found.shard_label, found.shard_values = opts.host_label, by_host
        else:
            found.shard_label, found.shard_values = "instance", by_instance
        self.discovery = found
        self._uuids = {h: {i: g.uuid for i, g in gpus.items()} for h, gpus in found.gpus.items()}
        # answers are capped at what this fleet needs (a series per GPU and scrape address)
        self.client.expect(sum(len(v) for v in by_instance.values())
                           * max(1, max(map(len, found.gpus.values()), default=1)))
        self._reshard()
        return found

    async def _slowdowns(self, present: frozenset[str], at: float | None
                         ) -> dict[tuple[str, int], float]:
        """Each GPU's slowdown temperature where it is exported (a setting: one query at
        discovery, none where no exporter has it)."""
        if not any(m in present for m in SLOWDOWN.metrics):
            return {}
        opts = self.options
        out: dict[tuple[str, int], float] = {}
        for item in await self.client.query(per_gpu(SLOWDOWN.metrics, opts.match,
                                                    opts.host_label), at):
            host, idx = host_of(item.metric, opts.host_label), gpu_of(item.metric)
            value = number(item.value[1])
            if host is not None and idx is not None and value is not None and value < 200:
                out[(host, idx)] = value
        return out

    def _reshard(self) -> None:
        """Shards for the discovered fleet; a shard whose hosts did not change keeps its
        slots and the values it keeps between reads."""
        disc = self.discovery
        gpus = sum(len(g) for g in disc.gpus.values())
        fast = sum(1 for f in self._fields() if f.every == 1)
        shards = plan(disc.shard_values, disc.shard_label, shard_count(gpus, fast))
        old = {s.matcher: t for s, t in zip(self.shards, self._tables, strict=True)}
        self._tables = [old.get(s.matcher) or SlotTable(self._decoder) for s in shards]
        self.shards = shards

    def _fields(self) -> list[Field]:
        present = self.discovery.present
        return [f for f in FIELDS if (f.attr in SAMPLE_ATTRS or f.kind not in (
                    Kind.FLOAT, Kind.GPU_FACT))
                and f.attr not in ("power_violation_us", "thermal_violation_us")
                and any(m in present for m in f.metrics)]

    def _due(self, fields: list[Field], reads: int) -> list[Field]:
        """Every field at a shard's first read; then those read every refresh, and the
        slower ones in turn (each every ``f.every`` reads, spread so that no read carries
        them all)."""
        if reads == 0:
            return fields
        slow = [f for f in fields if f.every > 1]
        return [f for f in fields if f.every == 1
                or (reads + slow.index(f)) % f.every == 0]

    async def read_now(self, at: float | None = None) -> tuple[float, dict[str, HostSample],
                                                               list[tuple[str, XidEvent]]]:
        """The whole fleet now: every shard read once (as ``snapshot`` needs).

        Returns the evaluation time, the samples by host, and Xid events (host, event).
        """
        ts = time.time() if at is None else at
        started, before = time.perf_counter(), self.client.queries
        samples: dict[str, HostSample] = {}
        events: list[tuple[str, XidEvent]] = []
        for k in range(len(self.shards)):
            _, got, found = await self.read_shard(k, ts)
            samples.update(got)
            events += found
        self.last_queries = self.client.queries - before
        self.last_refresh_s = time.perf_counter() - started
        return ts, samples, events

    async def read_shard(self, k: int, at: float | None = None
                         ) -> tuple[float, dict[str, HostSample], list[tuple[str, XidEvent]]]:
        """One read of shard ``k``: each due field's instant query over its hosts, as one
        sample per host.  A field read every few reads keeps its last values between."""
        started, before = time.perf_counter(), self.client.queries
        ts = time.time() if at is None else at
        shard, table = self.shards[k], self._tables[k]
        due = self._due(self._fields(), table.reads)
        gate = asyncio.Semaphore(CONCURRENT_QUERIES)
        opts = self.options

        async def one(f: Field) -> Column:
            promql = per_gpu(f.metrics, opts.match, opts.host_label, shard.matcher)
            async with gate:
                body = await self.client.query_body(promql, ts)
            return table.column(self._decoder.instant(body, promql), f.kind)

        answers = await all_or_cancel(one(f) for f in due)
        now: list[tuple[str, Column]] = []
        xid: Column | None = None
        cols = dict(zip((f.attr for f in due), answers, strict=True))
        for f in due:
            col = cols[f.attr]
            if f.kind is Kind.XID:
                xid = col
            elif f.every == 1:
                now.append((f.attr, col))
            elif f.kind is Kind.FREE:  # kept as the total: used moves, the total does not
                used = table.padded(cols.get("mem_used_mib") or [])
                table.kept[TOTAL] = [v + u if v is not None and u is not None else None
                                     for v, u in zip(table.padded(col), used, strict=True)]
            else:
                table.kept[f.attr] = col
        kept = list(table.kept.items())
        table.reads += 1
        samples, events = self._samples(ts, table, now, kept, xid)
        self.refreshes += 1
        self.last_queries = self.client.queries - before
        self.last_refresh_s = time.perf_counter() - started
        return ts, samples, events

    def _samples(self, ts: float, table: SlotTable, now: list[tuple[str, Column]],
                 kept: list[tuple[str, Column]], xid: Column | None
                 ) -> tuple[dict[str, HostSample], list[tuple[str, XidEvent]]]:
        by_host, changed = table.build(now, kept, xid, self._uuids, self._xid)
        out = {}
        for host, gpus in by_host.items():
            seq = self._seq.get(host, 0)
            self._seq[host] = seq + 1
            out[host] = HostSample(ts, seq, tuple(gpus))
        return out, [self._xid_event(host, idx, code, ts) for (host, idx), code in changed
                     if code > 0]

    def _xid_event(self, host: str, idx: int, xid: int, ts: float) -> tuple[str, XidEvent]:
        """A change of the last Xid's code is an Xid event (the metric is sticky: the same
        code again later is not seen, a limit of the metric that kernel-log triage covers),
        passed as it came: the GPU, its code and the labels that name the GPU."""
        info = self.discovery.gpus.get(host, {}).get(idx)
        return host, XidEvent(ts, idx, xid, info.bus_id if info else None,
                              info.uuid if info else None)

    async def read_history(self, end: float) -> tuple[dict[str, list[HostSample]],
                                                      list[tuple[str, XidEvent]]]:
        """The detectors' window before ``end``: a sample per host per step, oldest first,
        from one ``query_range`` per history field; and the Xids that changed in it."""
        opts = self.options
        if opts.history_s <= 0:
            return {}, []
        # a large fleet reads fewer points: the console folds every one of them at start
        hosts = max(1, len(self.discovery.gpus))
        points = max(MIN_HISTORY_POINTS, min(MAX_POINTS, HISTORY_BUDGET // hosts))
        step = max(opts.history_step_s, opts.history_s / points)
        start = end - opts.history_s
        stop = end - step
        if stop <= start:
            return {}, []
        fields = [f for f in self._fields() if f.history]
        table = SlotTable(self._decoder)
        at: dict[float, dict[str, Column]] = {}
        gate = asyncio.Semaphore(CONCURRENT_QUERIES)

        async def one(f: Field) -> None:
            promql = per_gpu(f.metrics, opts.match, opts.host_label)
            try:
                async with gate:
                    body = await self.client.query_range_body(promql, start, stop, step)
                series = self._decoder.range(body, promql)
            except PrometheusError as exc:  # that field has no history; the rest does
                self.history_errors.append(f"{f.metrics[0]}: {exc}")
                return
            table.columns_over_time(series, f.kind, f.attr, at)

        self.history_errors = []
        await all_or_cancel(one(f) for f in fields)
        out: dict[str, list[HostSample]] = {}
        events: list[tuple[str, XidEvent]] = []
        for ts in sorted(at):
            cols = at[ts]
            xid = cols.pop("xid", None)
            if "mem_free_mib" in cols:
                free, used = table.padded(cols.pop("mem_free_mib")), \
                    table.padded(cols.get("mem_used_mib") or [])
                cols[TOTAL] = [v + u if v is not None and u is not None else None
                               for v, u in zip(free, used, strict=True)]
            now = [(a, c) for a, c in cols.items() if a != TOTAL]
            kept = [(TOTAL, cols[TOTAL])] if TOTAL in cols else []
            samples, found = self._samples(ts, table, now, kept, xid)
            events += found
            for host, s in samples.items():
                out.setdefault(host, []).append(s)
        return out, events

    async def run(self, emit: Emit, hosts: Iterable[str] | None = None) -> None:
        """Discover, emit each host's hello and history, then read a shard every
        ``refresh_s / shards`` until cancelled (every host once a refresh).  A host with no
        series in a read gets no sample: it goes stale, as a silent agent does.  A failed
        read is retried at the next one; while Prometheus cannot answer, its hosts are told
        (``SourceHealth``), once per change."""
        wanted = set(hosts) if hosts is not None else None
        await self._discover_until_read(emit, wanted)
        now = time.time()
        try:
            history, past_events = await self.read_history(now)
        except PrometheusError:  # the live reads say so; start without the past
            history, past_events = {}, []
        listed = [h for h in self.discovery.hosts if wanted is None or h in wanted]
        # every hello first: the table lists the whole fleet while the history folds
        for host in listed:
            emit(host, self.discovery.hello(host, now - self.options.history_s,
                                            totals_of(history.get(host, []))))
            emit(host, no_kernel_log(now))
        for host in listed:
            for s in history.get(host, []):
                emit(host, s)
        for host, ev in past_events:
            if wanted is None or host in wanted:
                emit(host, ev)
        cycles = 0
        while True:
            for k in range(len(self.shards)):
                started = time.monotonic()
                await self._read_and_emit(k, emit, wanted)
                _honour_cancel()
                period = self.options.refresh_s / len(self.shards)
                await asyncio.sleep(max(0.0, period - (time.monotonic() - started)))
            cycles += 1
            if cycles % REDISCOVER_READS == 0:
                with contextlib.suppress(PrometheusError):  # the old shards serve on
                    await self.discover()

    async def read_once(self, emit: Emit, hosts: Iterable[str] | None = None,
                        at: float | None = None) -> None:
        """One read at ``at`` (None: now): each host's hello, its detectors' window, the
        events in it, then the values at ``at``, emitted in that order.

        Raises:
            PrometheusError: Prometheus cannot answer.
        """
        ts = time.time() if at is None else at
        wanted = set(hosts) if hosts is not None else None
        # the fleet was discovered when the source was built: asked again only for a past
        disc = self.discovery if at is None and self.discovery.hosts else await self.discover(ts)
        history, events = await self.read_history(ts)
        _, samples, now_events = await self.read_now(ts)
        listed = [h for h in disc.hosts if wanted is None or h in wanted]
        for host in listed:
            past = history.get(host, [])
            emit(host, disc.hello(host, ts - self.options.history_s, totals_of(past)))
            emit(host, no_kernel_log(ts))
            for s in past:
                emit(host, s)
        for host, ev in events + now_events:
            if wanted is None or host in wanted:
                emit(host, ev)
        for host in listed:
            if host in samples:
                emit(host, samples[host])

    async def _discover_until_read(self, emit: Emit, wanted: set[str] | None) -> None:
        """Discover, trying again every refresh while Prometheus cannot answer."""
        while True:
            try:
                await self.discover()
            except PrometheusError as exc:
                _honour_cancel()
                self._tell(-1, sorted(wanted or ()), emit, WatcherFault.SOURCE_DOWN, str(exc))
                await asyncio.sleep(self.options.refresh_s)
                continue
            self._tell(-1, sorted(wanted or ()), emit, None)
            return

    def _tell(self, k: int, hosts: list[str], emit: Emit, fault: WatcherFault | None,
              reason: str = "") -> None:
        """Tell shard ``k``'s hosts its health when it changed (a new fault, or a down
        source's new reason)."""
        told = self._health.get(k, (None, ""))
        if told[0] is fault and (fault is not WatcherFault.SOURCE_DOWN or told[1] == reason):
            return
        self._health[k] = (fault, reason)
        now = time.time()
        for host in hosts:
            emit(host, SourceHealth(now, SOURCE, fault, reason))

    async def _read_and_emit(self, k: int, emit: Emit, wanted: set[str] | None) -> None:
        opts = self.options
        hosts = sorted(h for h in self.shards[k].hosts if wanted is None or h in wanted)
        loop = asyncio.get_running_loop()
        slow = loop.call_later(opts.refresh_s, self._tell, k, hosts, emit,
                               WatcherFault.SOURCE_SLOW, f"no answer after {opts.refresh_s:g} s "
                               f"(a read per {opts.refresh_s:g} s is due)")
        started = time.monotonic()
        try:
            _ts, samples, events = await self.read_shard(k)
        except (PrometheusError, ValueError, TypeError, KeyError, IndexError,
                OverflowError) as exc:  # that shard's read failed; the others go on
            # every host of the shard is unseen for the same reason: say it once, retry
            self._tell(k, hosts, emit, WatcherFault.SOURCE_DOWN, clean_text(str(exc)))
            return
        finally:
            slow.cancel()
        took = time.monotonic() - started
        if took <= opts.refresh_s:
            self._tell(k, hosts, emit, None)
        else:  # data, but late: still slow until a read comes back in time
            self._tell(k, hosts, emit, WatcherFault.SOURCE_SLOW,
                       f"a read took {took:.0f} s (a read per {opts.refresh_s:g} s is due)")
        for host, ev in events:
            if wanted is None or host in wanted:
                emit(host, ev)
        for host, s in samples.items():
            if wanted is None or host in wanted:
                emit(host, s)


def _honour_cancel() -> None:
    """End the source on a cancel that ``asyncio.wait_for`` swallowed (Python < 3.12: the
    query finished as the cancel came); a source that retries forever would otherwise never
    stop (a test hung on it, waiting for the cancelled source)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    if cancelling is not None and cancelling():
        raise asyncio.CancelledError


def no_kernel_log(ts: float) -> LogSourceState:
    """What the log steps say of a Prometheus-read host: its kernel log is not there."""
    return LogSourceState(ts, KERNEL_SOURCE, LogSourceStatus.OFF,
                          detail="Prometheus holds no kernel log; watch this host over SSH "
                                 "(--inventory) to read its Xid, AER and OOM lines")


def totals_of(past: list[HostSample]) -> dict[int, float]:
    """Each GPU's newest memory total in its history (a GPU lost since keeps its own)."""
    out: dict[int, float] = {}
    for s in past:
        for g in s.gpus:
            if g.mem_total_mib:
                out[g.index] = g.mem_total_mib
    return out


def _label(labels: dict[str, str], name: str) -> str | None:
    v = labels.get(name)
    return clean_text(v) if v else None
