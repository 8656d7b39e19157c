"""Export: dcgm-exporter-named Prometheus text, the textfile, CSV, JSON lines, OpenMetrics."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import stat
from pathlib import Path

import pytest

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.outputs.export import (
    GPU_METRICS,
    HostExport,
    export_csv,
    export_jsonl,
    export_openmetrics,
    prometheus_text,
    write_textfile,
)
from probes.transport.session import OnceResult, collect_once
from probes.triage import Severity, Step

SAMPLE_LINE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>(?:[A-Za-z_]\w*="'
                         r'(?:[^"\\]|\\.)*",?)*)\} (?P<value>-?[0-9.e+-]+)(?: (?P<ts>\d+))?$')
OM_LINE = re.compile(SAMPLE_LINE.pattern.replace(r"(?P<ts>\d+)", r"(?P<ts>\d+\.\d{3})"))
"""OpenMetrics stamps samples in seconds (milliseconds as decimals)."""


@pytest.fixture(scope="module")
def host() -> OnceResult:
    r = asyncio.run(collect_once(HostSpec(name="gpu-a01", simulate=("healthy",), seed=1)))
    assert r.hello is not None and r.sample is not None
    return r


def _export(r: OnceResult, **kw: object) -> HostExport:
    return HostExport(r.spec.name, r.hello, r.sample, **kw)  # type: ignore[arg-type]


def test_prometheus_text_uses_dcgm_names_and_labels(host: OnceResult) -> None:
    xid = Finding(Step.SYSLOG, "xid", Severity.CRITICAL, "Xid 79", "gpu-a01", gpu=3, xid=79)
    text = prometheus_text([_export(host, findings=(xid,)),
                            HostExport('odd"host\\', None, None, streaming=False)])
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]
    for line in lines:
        assert SAMPLE_LINE.match(line), line
    util = [x for x in lines if x.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(util) == 8
    assert util[0].startswith('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-')
    assert 'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-a01"}' in util[0]
    assert float(util[0].rsplit(" ", 1)[1]) == host.sample.gpus[0].util_pct  # type: ignore[union-attr]
    # every family is announced once, before its samples
    for m in GPU_METRICS:
        if any(x.startswith(m.name + "{") for x in lines):
            assert text.count(f"# TYPE {m.name} {m.type}") == 1
            assert text.index(f"# TYPE {m.name} {m.type}") < text.index(m.name + "{")
    assert 'rigwatch_host_up{Hostname="odd\\"host\\\\"} 0' in lines
    assert ('rigwatch_findings{Hostname="gpu-a01",step="syslog",code="xid",severity="critical"}'
            ' 1') in lines


def test_the_textfile_is_replaced_atomically(tmp_path: Path, host: OnceResult) -> None:
    path = tmp_path / "rigwatch.prom"
    path.write_text("old\n")
    write_textfile(path, prometheus_text([_export(host)]))
    assert path.read_text().startswith(f"# HELP {GPU_METRICS[0].name} ")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["rigwatch.prom"]


def test_csv_has_a_row_per_gpu_per_sample(host: OnceResult) -> None:
    assert host.sample is not None and host.hello is not None
    items = [("gpu-a01", 0.0, host.hello), ("gpu-a01", 1.0, host.sample),
             ("gpu-a01", 2.0, host.sample)]
    rows = list(csv.DictReader(io.StringIO("".join(export_csv(items)))))
    assert len(rows) == 16
    assert rows[0]["host"] == "gpu-a01" and rows[0]["gpu"] == "0"
    assert float(rows[3]["mem_used_mib"]) == host.sample.gpus[3].mem_used_mib


def test_jsonl_and_openmetrics(host: OnceResult) -> None:
    assert host.sample is not None and host.hello is not None
    items = [("gpu-a01", 0.0, host.hello), ("gpu-a01", 1.0, host.sample)]
    lines = list(export_jsonl(items, lambda i: {"t": type(i).__name__}))
    assert [json.loads(x)["item"]["t"] for x in lines] == ["Hello", "HostSample"]
    om = "".join(export_openmetrics(items))
    assert om.endswith("# EOF\n")
    body = [x for x in om.splitlines() if x and not x.startswith("#")]
    assert all(x.endswith(f" {host.sample.ts:.3f}") for x in body)
    names = [x.split("{")[0] for x in body]
    assert names == sorted(names, key=[m.name for m in GPU_METRICS].index)  # grouped


async def test_the_scrape_endpoint_serves_metrics_on_localhost_only() -> None:
    from probes.outputs.metrics_server import serve_metrics

    server = await serve_metrics(0, lambda: "rigwatch_host_up{Hostname=\"h\"} 1\n")
    port = server.sockets[0].getsockname()[1]
    assert server.sockets[0].getsockname()[0] == "127.0.0.1"
    try:
        async def get(path: str) -> bytes:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            data = await r.read()
            w.close()
            return data
        ok = await get("/metrics")
        assert ok.startswith(b"HTTP/1.1 200 OK") and b"version=0.0.4" in ok
        assert ok.endswith(b'rigwatch_host_up{Hostname="h"} 1\n')
        assert (await get("/")).startswith(b"HTTP/1.1 404")
    finally:
        server.close()
        await server.wait_closed()


async def test_a_demo_recording_exports_one_series_per_gpu_per_metric(tmp_path: Path) -> None:
    """A recording made by the recorder from the demo's agents holds each host's simulated
    history before its hello (time order): every GPU must still be one series."""
    from probes.config.fleet import demo_fleet
    from probes.sources.agents import AgentFleetBackend
    from probes.sources.recording import RecordingBackend
    from probes.store.recording import Recorder
    from probes.store.recording_reader import RecordingReader
    from probes.wire.samples import HostSample

    specs = [s for s in demo_fleet() if s.name in ("gpu-a01", "gpu-b02")]
    path = tmp_path / "demo.sqlite3"
    backend = RecordingBackend(AgentFleetBackend(specs),
                               Recorder(path, "demo", [s.name for s in specs]))
    samples = {s.name: 0 for s in specs}
    done = asyncio.Event()

    def emit(host: str, item: object) -> None:
        if isinstance(item, HostSample):
            samples[host] += 1
            if min(samples.values()) >= 47:  # the 45 of the history, then live ones
                done.set()

    task = asyncio.create_task(backend.run(emit))
    try:
        await asyncio.wait_for(done.wait(), 20.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    with RecordingReader(path) as reader:
        kinds = [type(i).__name__ for host, _, i in reader.items() if host == "gpu-a01"]
        assert kinds.index("Hello") > kinds.index("HostSample")  # the case that split series
        om = "".join(export_openmetrics(reader.items()))
    series: dict[tuple[str, str, str], set[str]] = {}
    for line in om.splitlines():
        if line.startswith("#"):
            continue
        m = OM_LINE.match(line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m["labels"]))
        series.setdefault((m["name"], labels["Hostname"], labels["gpu"]), set()).add(m["labels"])
        assert labels["pci_bus_id"].startswith("0000:") and labels["modelName"] == \
            "NVIDIA H100 80GB HBM3", line
    assert all(len(sets) == 1 for sets in series.values()), {
        k: v for k, v in series.items() if len(v) > 1}
    util = {(h, g) for (name, h, g) in series if name == "DCGM_FI_DEV_GPU_UTIL"}
    assert {g for h, g in util if h == "gpu-a01"} == {str(i) for i in range(8)}
    assert {g for h, g in util if h == "gpu-b02"} == {str(i) for i in range(8)}  # 6 until lost
