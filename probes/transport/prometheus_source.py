"""The fleet read from Prometheus: dcgm-exporter's series as the same typed samples an agent
sends, so history, detectors, findings and screens work unchanged.

One refresh is one instant query per collected metric for the whole fleet (never one per
host); at start-up the detectors' window is read once with ``query_range`` so a leak that
began yesterday is found the moment the console opens.  Hosts come from the ``Hostname``
label (``instance`` where an exporter has none), GPUs from ``gpu``/``UUID``/``pci_bus_id``/
``modelName``.  Label values are remote text: they are cleaned before they name anything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from probes.transport.prometheus_client import (
    KeyedRow,
    PromClient,
    PromEndpoint,
    PrometheusError,
)
from probes.transport.prometheus_fields import (
    FIELDS,
    SAMPLE_ATTRS,
    Field,
    Kind,
    identity,
    matchers,
    per_gpu,
)
from probes.wire.clock_reasons import reasons_of
from probes.wire.events import Disconnected, Emit
from probes.wire.samples import (
    KERNEL_SOURCE,
    GpuInfo,
    GpuSample,
    Hello,
    HostFacts,
    HostSample,
    LogEvent,
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
TOTAL = "mem_total_mib"
MAX_IDS = 1 << 20
LOOKBACK_S = 300.0
"""Prometheus's default lookback: an instant query sees a series this long after its last
sample."""
"""Series keys remembered (a key per GPU: a 10,000-host fleet has 80,000)."""
"""Queries in flight at once: enough to overlap Prometheus's work with decoding."""


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
HISTORY_BUDGET = 120_000
"""Host-samples read at start-up across the fleet: 120 a host up to 1,000 hosts, then
fewer (12 at 10,000: the leak detector needs six points over half an hour)."""
MIN_HISTORY_POINTS = 12


def with_window(options: PromFleetOptions, window_s: float) -> PromFleetOptions:
    """Read ``window_s`` of history at start-up (the detectors' longest window), in
    ``HISTORY_POINTS`` steps of at least a second."""
    return replace(options, history_s=window_s,
                   history_step_s=max(1.0, window_s / HISTORY_POINTS))


GpuId = tuple[str, int]
"""(host name, GPU index)."""


def host_of(labels: dict[str, str], host_label: str) -> str | None:
    """The host a series belongs to: its host label, else its scrape address without port."""
    name = labels.get(host_label)
    if not name:
        inst = labels.get("instance", "")
        head, sep, port = inst.rpartition(":")
        name = head if sep and port.isdigit() and head else inst
    name = clean_text(name).strip()
    return name or None


def gpu_of(labels: dict[str, str]) -> int | None:
    text = labels.get("gpu", "")
    return int(text) if text.isdigit() else None


@dataclass
class Discovery:
    """The fleet as its series show it: hosts, their GPUs' identities, collected metrics."""

    gpus: dict[str, dict[int, GpuInfo]] = field(default_factory=dict)
    drivers: dict[str, str] = field(default_factory=dict)
    present: frozenset[str] = frozenset()
    """Metric names with at least one series under the match."""

    @property
    def hosts(self) -> list[str]:
        return sorted(self.gpus)

    def missing(self) -> list[Field]:
        """Fields none of whose metrics has a series: not collected by the exporters."""
        return [f for f in FIELDS if not any(m in self.present for m in f.metrics)]

    def hello(self, host: str, ts: float, total_mib: dict[int, float]) -> Hello:
        """The host's hello: its GPUs as listed, and one probe line per metric not collected
        (``ProbeStatus`` is how a hello already says what cannot be read, and why)."""
        gpus = tuple(GpuInfo(i.index, i.uuid, i.bus_id, i.name, total_mib.get(i.index))
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
    """Reads the fleet; ``run`` emits hellos, the history window, then a sample per refresh."""

    def __init__(self, options: PromFleetOptions, client: PromClient | None = None) -> None:
        self.options = options
        self.client = client or PromClient(options.endpoint)
        self.discovery = Discovery()
        self._seq: dict[str, int] = {}
        self._xid: dict[GpuId, int] = {}
        self._ids: dict[str, GpuId | None] = {}
        self._kept: dict[str, dict[GpuId, object]] = {}
        """The last values of fields read every few refreshes, by field."""
        self.refreshes = 0
        self.last_refresh_s = 0.0
        """Wall seconds of the newest refresh (queries, decoding and building samples)."""
        self.last_queries = 0
        """HTTP queries the newest refresh sent."""

    async def discover(self, at: float | None = None) -> Discovery:
        """Hosts, GPUs and which metrics exist (two queries).

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
        ids, present = await asyncio.gather(
            self.client.query(identity(opts.match, opts.host_label, opts.history_s), at),
            self.client.label_values("__name__", every,
                                     now - max(opts.history_s, LOOKBACK_S), now))
        found = Discovery(present=frozenset(present))
        for item in ids:
            labels = item.metric
            host, idx = host_of(labels, opts.host_label), gpu_of(labels)
            if host is None or idx is None:
                continue
            found.gpus.setdefault(host, {})[idx] = GpuInfo(
                idx, _label(labels, "UUID"), _label(labels, "pci_bus_id"),
                _label(labels, "modelName"), None)
            driver = _label(labels, "DCGM_FI_DRIVER_VERSION")
            if driver:
                found.drivers[host] = driver
        self.discovery = found
        return found

    def _fields(self) -> list[Field]:
        present = self.discovery.present
        return [f for f in FIELDS if (f.attr in SAMPLE_ATTRS or f.kind is not Kind.FLOAT)
                and f.attr not in ("power_violation_us", "thermal_violation_us")
                and any(m in present for m in f.metrics)]

    async def read_now(self, at: float | None = None) -> tuple[float, dict[str, HostSample],
                                                               list[tuple[str, LogEvent]]]:
        """One refresh: each due field's instant query, as one sample per host.  A field
        read every few refreshes keeps its last values between.

        Returns the evaluation time, the samples by host, and Xid events (host, event).
        """
        started = time.perf_counter()
        before = self.client.queries
        ts = time.time() if at is None else at
        n = self.refreshes
        fields = self._fields()
        due = [f for f in fields if n % f.every == 0]
        gate = asyncio.Semaphore(CONCURRENT_QUERIES)

        async def one(f: Field) -> list[KeyedRow]:
            async with gate:
                return await self.client.query_keyed(
                    per_gpu(f.metrics, self.options.match, self.options.host_label), ts)

        answers = await asyncio.gather(*(one(f) for f in due))
        values: dict[GpuId, dict[str, object]] = {}
        for f, rows in zip(due, answers, strict=True):
            if f.every == 1:
                self._fold_into(f, rows, values)
        for f, rows in zip(due, answers, strict=True):
            if f.every > 1:
                kept: dict[GpuId, object] = {}
                self._fold(f, rows, kept)
                if f.kind is Kind.FREE:  # kept as the total: used moves, the total does not
                    kept = {gid: v + used for gid, v in kept.items() if isinstance(v, float)
                            and isinstance(used := values.get(gid, {}).get("mem_used_mib"),
                                           float)}
                self._kept[TOTAL if f.kind is Kind.FREE else f.attr] = kept
        for attr, kept_values in self._kept.items():
            for gid, v in kept_values.items():
                got = values.get(gid)
                if got is not None:  # a GPU with no reading now gets no old ones either
                    got[attr] = v
        samples, events = self._samples(ts, values)
        self.refreshes += 1
        self.last_queries = self.client.queries - before
        self.last_refresh_s = time.perf_counter() - started
        return ts, samples, events

    def _gpu_id(self, key: str) -> GpuId | None:
        """``host|instance|gpu`` as (host, index); remembered, as keys repeat every refresh."""
        got = self._ids.get(key, False)
        if got is not False:
            return got  # type: ignore[return-value]
        host_v, _, rest = key.rpartition("|")
        host_v, _, inst = host_v.rpartition("|")
        labels = {"instance": inst}
        if host_v:
            labels[self.options.host_label] = host_v
        host = host_of(labels, self.options.host_label)
        gid = (host, int(rest)) if host is not None and rest.isdigit() else None
        if len(self._ids) < MAX_IDS:
            self._ids[key] = gid
        return gid

    def _fold(self, f: Field, rows: list[KeyedRow], into: dict[GpuId, object]) -> None:
        kind = f.kind
        for row in rows:
            v = row.value[1]
            if v != v:  # NaN: no reading
                continue
            gid = self._gpu_id(row.metric.rw_gpu)
            if gid is not None:
                into[gid] = v if kind is Kind.FLOAT else _typed(kind, v)

    def _fold_into(self, f: Field, rows: list[KeyedRow],
                   into: dict[GpuId, dict[str, object]]) -> None:
        attr, kind = f.attr, f.kind
        ids = self._ids
        for row in rows:
            v = row.value[1]
            if v != v:  # NaN: no reading
                continue
            key = row.metric.rw_gpu
            gid = ids[key] if key in ids else self._gpu_id(key)
            if gid is None:
                continue
            got = into.get(gid)
            if got is None:
                got = into[gid] = {}
            got[attr] = v if kind is Kind.FLOAT else _typed(kind, v)

    def _samples(self, ts: float, values: dict[GpuId, dict[str, object]]
                 ) -> tuple[dict[str, HostSample], list[tuple[str, LogEvent]]]:
        per_host: dict[str, list[GpuSample]] = {}
        events: list[tuple[str, LogEvent]] = []
        for (host, idx), got in sorted(values.items()):
            per_host.setdefault(host, []).append(self._gpu(host, idx, got, ts, events))
        out = {}
        for host, gpus in per_host.items():
            seq = self._seq.get(host, 0)
            self._seq[host] = seq + 1
            out[host] = HostSample(ts, seq, tuple(gpus))
        return out, events

    def _gpu(self, host: str, idx: int, got: dict[str, object], ts: float,
             events: list[tuple[str, LogEvent]]) -> GpuSample:
        info = self.discovery.gpus.get(host, {}).get(idx)
        kw = {k: v for k, v in got.items() if k in SAMPLE_ATTRS}
        total, free, used = got.get(TOTAL), got.get("mem_free_mib"), got.get("mem_used_mib")
        if isinstance(total, float):
            kw[TOTAL] = total
        elif isinstance(free, float) and isinstance(used, float):
            kw[TOTAL] = free + used
        mask = got.get("clock_reasons")
        if isinstance(mask, int):
            kw["clock_reasons"] = reasons_of(mask)
        xid = got.get("xid")
        if isinstance(xid, int):
            self._xid_event(host, idx, xid, info, ts, events)
        return GpuSample(index=idx, uuid=info.uuid if info else None, **kw)  # type: ignore[arg-type]

    def _xid_event(self, host: str, idx: int, xid: int, info: GpuInfo | None, ts: float,
                   events: list[tuple[str, LogEvent]]) -> None:
        """A change of the last Xid's code is an Xid event (the metric is sticky: the same
        code again later is not seen, a limit of the metric that kernel-log triage covers).
        It is written as the kernel line the driver prints, saying where it came from, so
        the same Xid rules and catalog read it."""
        before = self._xid.get((host, idx))
        self._xid[(host, idx)] = xid
        if xid <= 0 or xid == before:
            return
        bus = info.bus_id if info and info.bus_id else f"GPU{idx}"
        line = (f"NVRM: Xid (PCI:{bus}): {xid}, reported by dcgm-exporter "
                f"(DCGM_FI_DEV_XID_ERRORS on GPU {idx})")
        events.append((host, LogEvent(ts, KERNEL_SOURCE, line)))

    async def read_history(self, end: float) -> tuple[dict[str, list[HostSample]],
                                                      list[tuple[str, LogEvent]]]:
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
        answers = await asyncio.gather(*(self.client.query_range_keyed(
            per_gpu(f.metrics, opts.match, opts.host_label), start, stop, step)
            for f in fields))
        at: dict[float, dict[GpuId, dict[str, object]]] = {}
        for f, series in zip(fields, answers, strict=True):
            self._fold_range(f, series, at)
        out: dict[str, list[HostSample]] = {}
        events: list[tuple[str, LogEvent]] = []
        for ts in sorted(at):
            samples, found = self._samples(ts, at[ts])
            events += found
            for host, s in samples.items():
                out.setdefault(host, []).append(s)
        return out, events

    def _fold_range(self, f: Field, series: list[tuple[str, list[tuple[float, float]]]],
                    at: dict[float, dict[GpuId, dict[str, object]]]) -> None:
        for key, points in series:
            gid = self._gpu_id(key)
            if gid is None:
                continue
            for t, v in points:
                at.setdefault(t, {}).setdefault(gid, {})[f.attr] = _typed(f.kind, v)

    async def run(self, emit: Emit, hosts: Iterable[str] | None = None) -> None:
        """Discover, emit each host's hello and history, then a sample per refresh until
        cancelled.  A host with no series in a refresh gets none: it goes stale, as a
        silent agent does.  A failed refresh is retried at the next one."""
        await self.discover()
        now = time.time()
        history, past_events = await self.read_history(now)
        wanted = set(hosts) if hosts is not None else None
        for host in self.discovery.hosts:
            if wanted is not None and host not in wanted:
                continue
            past = history.get(host, [])
            emit(host, self.discovery.hello(host, now - self.options.history_s,
                                            totals_of(past)))
            emit(host, no_kernel_log(now))
            for s in past:
                emit(host, s)
        for host, ev in past_events:
            if wanted is None or host in wanted:
                emit(host, ev)
        while True:
            started = time.monotonic()
            try:
                _ts, samples, events = await self.read_now()
            except PrometheusError as exc:
                # every host is unwatchable for the same reason: say it on each, retry
                samples, events = {}, []
                for host in self.discovery.hosts:
                    if wanted is None or host in wanted:
                        emit(host, Disconnected(time.time(), f"Prometheus: {exc}",
                                                self.options.refresh_s))
            for host, ev in events:
                emit(host, ev)
            for host, s in samples.items():
                if wanted is None or host in wanted:
                    emit(host, s)
            await asyncio.sleep(max(0.0, self.options.refresh_s - (time.monotonic() - started)))


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


def _typed(kind: Kind, v: float) -> object:
    if kind in (Kind.INT, Kind.REASONS, Kind.XID):
        return int(v)
    if kind is Kind.FLAG:
        return v != 0
    return v
