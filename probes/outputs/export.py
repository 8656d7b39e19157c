"""Export: Prometheus text for a live fleet, and JSON lines, CSV or OpenMetrics from a recording.

Metric names follow NVIDIA's dcgm-exporter (``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED``
…) with its labels (``gpu``, ``UUID``, ``modelName``, ``Hostname``), so the Grafana
dashboards a fleet already has for dcgm-exporter read rigwatch's numbers unchanged; what
dcgm-exporter does not have (findings, whether a host streams) is under ``rigwatch_``.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from probes.analysis.findings import Finding
from probes.outputs.private_file import private_file
from probes.wire import fields
from probes.wire.clock_reasons import mask_of
from probes.wire.fields import Type
from probes.wire.samples import GpuInfo, GpuSample, Hello, HostSample
from probes.wire.sanitize import clean_text


@dataclass(frozen=True)
class Metric:
    """One exported family: its name, help text and how to read it from a GPU sample."""

    name: str
    help: str
    read: Callable[[GpuSample], float | int | None]
    type: str = "gauge"
    """dcgm-exporter's type for the family (``counter`` for replays, ECC, remapped rows), so
    federating both sources gives one metadata.  The OpenMetrics export keeps ``gauge``:
    OpenMetrics wants a counter's samples named ``*_total``, and the names must stay
    dcgm-exporter's."""


def _reasons_mask(g: GpuSample) -> int | None:
    """The clock-event bitmask; None where the clocks were not read (no reasons known)."""
    return mask_of(g.clock_reasons) if g.sm_clock_mhz is not None or g.clock_reasons else None


def _flag(name: str) -> Callable[[GpuSample], int | None]:
    get = attrgetter(name)

    def read(g: GpuSample) -> int | None:
        v = get(g)
        return None if v is None else int(v)
    return read


def _reader(spec: fields.GpuFieldSpec) -> Callable[[GpuSample], float | int | None]:
    """How the export reads a table field from a GPU sample."""
    if spec.type is Type.REASONS:
        return _reasons_mask
    if spec.type is Type.FLAG:
        return _flag(spec.name)
    if spec.type in fields.NUMBERS:
        return attrgetter(spec.name)
    raise ValueError(f"GPU field {spec.name}: a {spec.type.value} has no exported number")


FB_FREE = Metric("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
                 lambda g: None if g.mem_total_mib is None or g.mem_used_mib is None
                 else g.mem_total_mib - g.mem_used_mib)
"""Not a field: the total less the used, as dcgm-exporter exports it."""


def gpu_metrics(table: tuple[fields.GpuFieldSpec, ...]) -> tuple[Metric, ...]:
    """Every table field with a dcgm-exporter name: the moving ones first, each part in
    table order (``FB_FREE`` after ``DCGM_FI_DEV_FB_USED``)."""
    out: list[Metric] = []
    for spec in (*fields.moving_specs(table), *fields.static_specs(table)):
        if spec.dcgm:
            out.append(Metric(spec.dcgm, spec.help, _reader(spec),
                              "counter" if spec.counter else "gauge"))
            if spec.dcgm == "DCGM_FI_DEV_FB_USED":
                out.append(FB_FREE)
    return tuple(out)


GPU_METRICS = gpu_metrics(fields.GPU_TABLE)
XID_METRIC = Metric("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
                    lambda g: None)
"""Read from the host's Xid findings (its kernel log), not from a sample."""
SLOWDOWN_METRIC = Metric("DCGM_FI_DEV_SLOWDOWN_TEMP", "Slowdown temperature (in C).",
                         lambda g: None)
"""DCGM field 158 (its name in NVIDIA's go-dcgm ``pkg/dcgm/const_fields.go``): where the
driver starts slowing the GPU for heat, from the hello (the temperature detectors judge
against it)."""


@dataclass(frozen=True)
class HostExport:
    """One host as the exporter sees it."""

    name: str
    hello: Hello | None
    sample: HostSample | None
    findings: tuple[Finding, ...] = ()
    streaming: bool = True


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, object]], clean: bool = False) -> str:
    if clean:  # text from a file: never a control character in what is written
        pairs = [(k, clean_text(str(v))) for k, v in pairs]
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in pairs) + "}"


def _gpu_labels(host: str, index: int, uuid: str | None, info: GpuInfo | None,
                clean: bool = False) -> str:
    """The same label names for every GPU, always (an unknown value is empty, which
    Prometheus drops), in dcgm-exporter's order.  ``clean``: the values are cleaned as
    the wire's text is (an export of a recording someone else made); a live fleet's text
    was cleaned when it arrived."""
    pairs: list[tuple[str, object]] = [
        ("gpu", index), ("UUID", uuid or (info.uuid if info else "") or ""),
        ("pci_bus_id", info.bus_id if info is not None and info.bus_id else ""),
        ("modelName", info.name if info and info.name else ""), ("Hostname", host)]
    return _labels(pairs, clean)


def _number(v: float | int) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


def prometheus_text(hosts: Iterable[HostExport], timestamps: bool = False) -> str:
    """The text exposition format (version 0.0.4) for every host's newest sample.

    With ``timestamps`` each sample line carries its agent time in milliseconds (for
    backfilling; a live scrape should leave them off and let Prometheus stamp them).
    """
    hosts = list(hosts)
    out = io.StringIO()
    for metric in GPU_METRICS:
        lines = []
        for h in hosts:
            if h.sample is None:
                continue
            infos = {i.index: i for i in h.hello.facts.gpus} if h.hello else {}
            ts = f" {int(h.sample.ts * 1000)}" if timestamps else ""
            for g in h.sample.gpus:
                v = metric.read(g)
                if v is not None and g.index >= 0:
                    lines.append(f"{metric.name}"
                                 f"{_gpu_labels(h.name, g.index, g.uuid, infos.get(g.index))} "
                                 f"{_number(v)}{ts}\n")
        if lines:
            out.write(f"# HELP {metric.name} {metric.help}\n"
                      f"# TYPE {metric.name} {metric.type}\n")
            out.writelines(lines)
    _write_xids(out, hosts, timestamps)
    _write_slowdown(out, hosts, timestamps)
    out.write("# HELP rigwatch_host_up Whether the host's agent is streaming (1) or not (0).\n"
              "# TYPE rigwatch_host_up gauge\n")
    for h in hosts:
        out.write(f"rigwatch_host_up{_labels([('Hostname', h.name)])} {int(h.streaming)}\n")
    out.write("# HELP rigwatch_findings Open findings by step, code and severity.\n"
              "# TYPE rigwatch_findings gauge\n")
    for h in hosts:
        counts: dict[tuple[str, str, str], int] = {}
        for f in h.findings:
            k = (f.step.value, f.code, f.severity.value)
            counts[k] = counts.get(k, 0) + 1
        for (step, code, sev), n in sorted(counts.items()):
            out.write(f"rigwatch_findings{_labels([('Hostname', h.name), ('step', step), ('code', code), ('severity', sev)])} {n}\n")  # noqa: E501
    return out.getvalue()


def _write_xids(out: io.StringIO, hosts: list[HostExport], timestamps: bool) -> None:
    """``DCGM_FI_DEV_XID_ERRORS``: each GPU's last Xid code, as dcgm-exporter reports it
    (0 on a GPU that has had none), from the host's Xid findings.

    Every GPU the host listed has this series, also one that no longer answers (its other
    series stopped): its last Xid is what happened to it, and its series keeps its bus id
    and UUID where a reader of Prometheus alone can see the GPU is lost."""
    lines = []
    for h in hosts:
        if h.sample is None:
            continue
        last: dict[int, tuple[float, int]] = {}
        for f in h.findings:
            if f.xid is not None and f.gpu is not None:
                ts = f.ts or 0.0
                if f.gpu not in last or ts >= last[f.gpu][0]:
                    last[f.gpu] = (ts, f.xid)
        infos = {i.index: i for i in h.hello.facts.gpus} if h.hello else {}
        stamp = f" {int(h.sample.ts * 1000)}" if timestamps else ""
        uuids = {i.index: i.uuid for i in infos.values()}
        uuids.update((g.index, g.uuid or uuids.get(g.index)) for g in h.sample.gpus)
        for index in sorted(i for i in uuids if i >= 0):
            code = last.get(index, (0.0, 0))[1]
            lines.append(f"{XID_METRIC.name}"
                         f"{_gpu_labels(h.name, index, uuids[index], infos.get(index))} "
                         f"{code}{stamp}\n")
    if lines:
        out.write(f"# HELP {XID_METRIC.name} {XID_METRIC.help}\n"
                  f"# TYPE {XID_METRIC.name} gauge\n")
        out.writelines(lines)


def _write_slowdown(out: io.StringIO, hosts: list[HostExport], timestamps: bool) -> None:
    """``DCGM_FI_DEV_SLOWDOWN_TEMP`` of every GPU the host's hello gives one for."""
    lines = []
    for h in hosts:
        if h.sample is None or h.hello is None:
            continue
        stamp = f" {int(h.sample.ts * 1000)}" if timestamps else ""
        for i in h.hello.facts.gpus:
            if i.index >= 0 and i.temp_slowdown_c is not None:
                lines.append(f"{SLOWDOWN_METRIC.name}{_gpu_labels(h.name, i.index, i.uuid, i)} "
                             f"{_number(i.temp_slowdown_c)}{stamp}\n")
    if lines:
        out.write(f"# HELP {SLOWDOWN_METRIC.name} {SLOWDOWN_METRIC.help}\n"
                  f"# TYPE {SLOWDOWN_METRIC.name} gauge\n")
        out.writelines(lines)


def write_textfile(path: Path, text: str) -> None:
    """Replace ``path`` atomically, as node_exporter's textfile collector requires.

    Mode 0644: node_exporter runs as its own user and must read it; it holds readings,
    not secrets.
    """
    fd, tmp = tempfile.mkstemp(prefix=".rigwatch-", suffix=".prom.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_private(chunks: Iterable[str], path: Path) -> None:
    """Write an export to ``path`` with mode 0600, as the recording it comes from is: it
    holds host names, log lines and process owners.  A symlink at ``path`` is replaced,
    not followed, and a failure half-way leaves ``path`` as it was (``private_file``)."""
    with private_file(path) as out:
        out.writelines(chunks)


# --- from a recording ------------------------------------------------------------------------

RecordedItem = tuple[str, float, object]
"""(host, ts, item) as a recording reader yields them."""

CSV_FIELDS = ("ts", "host", "gpu", "uuid", "state",
              *(spec.name for spec in sorted((s for s in fields.GPU_TABLE if s.csv),
                                             key=attrgetter("csv"))), "clock_reasons")
"""The table's CSV fields (in their ``csv`` order) between the GPU's name and its clock
reasons."""
_CSV_VALUES = attrgetter(*CSV_FIELDS[5:-1])


_clean = functools.lru_cache(maxsize=4096)(clean_text)
"""``clean_text`` for the few distinct strings an export repeats (hosts, UUIDs, reasons)."""


def export_csv(items: Iterable[RecordedItem]) -> Iterator[str]:
    """One CSV row per GPU per sample (header first): what a spreadsheet or pandas wants.
    Its text passes ``clean_text``: a recording may be someone else's, and the CSV goes to
    a terminal as often as to a file."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    yield _take(buf)
    for host, _ts, item in items:
        if not isinstance(item, HostSample):
            continue
        for g in item.gpus:
            writer.writerow([
                f"{item.ts:.3f}", _clean(host), g.index, _clean(g.uuid or ""), g.state.value,
                *("" if v is None else v for v in _CSV_VALUES(g)),
                _clean(" ".join(g.clock_reasons))])
            yield _take(buf)


def _take(buf: io.StringIO) -> str:
    text = buf.getvalue()
    buf.seek(0)
    buf.truncate()
    return text


def export_jsonl(items: Iterable[RecordedItem],
                 encode: Callable[[object], dict[str, object]]) -> Iterator[str]:
    """One JSON object per recorded item: ``{"host", "ts", "item": <codec form>}``; ASCII
    (every control or invisible character escaped), the host name cleaned."""
    for host, ts, item in items:
        yield json.dumps({"host": _clean(host), "ts": ts, "item": encode(item)},
                         separators=(",", ":")) + "\n"


def export_openmetrics(items: Iterable[RecordedItem]) -> Iterator[str]:
    """Every sample as timestamped OpenMetrics lines, ending ``# EOF``: the input of
    ``promtool tsdb create-blocks-from openmetrics`` to backfill Prometheus.

    OpenMetrics wants each family's samples together, so lines are spooled per family to
    temporary files: memory stays flat however long the recording.  A GPU keeps one label
    set for the whole recording (one series per GPU per metric): its labels are written
    when the spool is read back, from every hello of the recording, because a recording
    holds a simulated host's history (and any sample that beat its hello) *before* the
    hello that names the GPU's bus id and model.
    """
    hellos: dict[str, list[Hello]] = {}
    series: dict[tuple[str, int, str], int] = {}
    """(host, GPU index, UUID) → its number in the spool; the labels come at the end."""
    with contextlib.ExitStack() as stack:
        spool = {m.name: stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
                 for m in GPU_METRICS}
        used: set[str] = set()
        for host, _ts, item in items:
            if isinstance(item, Hello):
                hellos.setdefault(host, []).append(item)
            elif isinstance(item, HostSample):
                stamp = f"{item.ts:.3f}"
                for g in item.gpus:
                    if g.index < 0:
                        continue
                    key = series.setdefault((host, g.index, g.uuid or ""), len(series))
                    for metric in GPU_METRICS:
                        v = metric.read(g)
                        if v is not None:
                            spool[metric.name].write(f"{key} {_number(v)} {stamp}\n")
                            used.add(metric.name)
        labels = [""] * len(series)
        for (host, index, uuid), key in series.items():
            info = _info_for(hellos.get(host, ()), index, uuid)
            labels[key] = _gpu_labels(host, index, uuid or None, info, clean=True)
        for metric in GPU_METRICS:
            if metric.name not in used:
                continue
            yield f"# HELP {metric.name} {metric.help}\n# TYPE {metric.name} gauge\n"
            f = spool[metric.name]
            f.seek(0)
            for line in f:
                number, rest = line.split(" ", 1)
                yield f"{metric.name}{labels[int(number)]} {rest}"
    yield "# EOF\n"


def _info_for(hellos: Sequence[Hello], index: int, uuid: str) -> GpuInfo | None:
    """The GPU's facts from the host's hellos: the one with its UUID (a board swapped under
    the same index is another series), else the newest at that index."""
    at_index = [i for h in hellos for i in h.facts.gpus if i.index == index]
    same = [i for i in at_index if uuid and i.uuid == uuid]
    found = same or at_index
    return found[-1] if found else None
