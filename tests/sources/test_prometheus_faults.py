"""A Prometheus that is down, erroring or slow is a fault of the source, not of its hosts
(faults review S7a–S7d): a real Prometheus killed, restarted and frozen (SIGSTOP), and
behind a small proxy that answers 503 or late.

Before, each was every host "down · Prometheus: …" and a critical ``fleet-down: 8 of 8
hosts down`` page (S7a, S7d), or stale warnings that never went critical (S7c).  Now each
is one ``source-down``/``source-slow`` finding about ``prometheus``, paged once per outage
with a recovery after; its hosts read "unknown", and no host pages at any point.

The series are dcgm-exporter's OpenMetrics (labels as in NVIDIA's dcgm-exporter README),
backfilled with ``promtool``; a one-hour lookback keeps them readable for the whole test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.sources.prometheus.backend import PrometheusBackend, prometheus_specs
from probes.sources.prometheus.client import PromEndpoint
from probes.sources.prometheus.source import PromFleetOptions, PromFleetSource
from tests.support.http_proxy import http_proxy
from tests.support.prometheus import RunningPrometheus, backfill, prometheus
from tests.support.watched import Watched, until

HOSTS = ("node-1", "node-2", "node-3")
REFRESH_S = 2.0
TIMEOUT_S = 6.0
LOOKBACK = ("--query.lookback-delta=1h",)
FAMILIES = {"DCGM_FI_DEV_FB_USED": 1000.0, "DCGM_FI_DEV_FB_FREE": 80000.0,
            "DCGM_FI_DEV_GPU_UTIL": 97.0, "DCGM_FI_DEV_GPU_TEMP": 61.0,
            "DCGM_FI_DEV_POWER_USAGE": 612.5, "DCGM_FI_DEV_XID_ERRORS": 0.0}


def _openmetrics(end: float) -> str:
    lines = []
    for name, value in FAMILIES.items():
        lines.append(f"# TYPE {name} gauge")
        for h, host in enumerate(HOSTS):
            for g in range(2):
                labels = (f'gpu="{g}",UUID="GPU-{h:08x}-0000-4000-8000-{g:012x}",'
                          f'pci_bus_id="00000000:{0x18 + 16 * g:02X}:00.0",device="nvidia{g}",'
                          f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",'
                          f'instance="10.0.0.{h}:9400",job="dcgm"')
                lines += [f"{name}{{{labels}}} {value} {t:.3f}" for t in (end - 60.0, end)]
    return "\n".join(lines) + "\n# EOF\n"


def _tsdb(root: Path) -> Path:
    om = root / "fleet.om"
    om.write_text(_openmetrics(time.time() - 30.0))
    tsdb = root / "prom" / "tsdb"
    tsdb.mkdir(parents=True)
    backfill(om, tsdb)
    return root / "prom"


@contextlib.contextmanager
def _started(root: Path, port: int | None = None) -> Iterator[RunningPrometheus]:
    with prometheus(root, extra_args=LOOKBACK, port=port) as prom:
        yield prom


async def _start(stack: contextlib.ExitStack, root: Path,
                 port: int | None = None) -> RunningPrometheus:
    """Start Prometheus off the loop (it takes seconds): the console keeps running."""
    cm = _started(root, port)
    prom = await asyncio.to_thread(cm.__enter__)
    stack.push(cm.__exit__)
    return prom


async def _backend(url: str) -> PrometheusBackend:
    opts = PromFleetOptions(PromEndpoint(url, timeout_s=TIMEOUT_S), refresh_s=REFRESH_S,
                            history_s=0.0)
    source = PromFleetSource(opts)
    found = await source.discover()
    assert found.hosts == list(HOSTS)
    return PrometheusBackend(opts, prometheus_specs(found.hosts, REFRESH_S), source)


def _all(w: Watched, status: str, words: str = "") -> bool:
    return all(w.status(h) == status and words in w.row_reason(h) for h in HOSTS)


def _only_the_source_paged(w: Watched) -> None:
    assert {host for host, _ in w.pages() + w.pages("recovery")} <= {"prometheus"}, w.pages()
    assert not any(f.host in HOSTS and f.severity.value != "info"
                   for a in w.alerts for f in [a.finding])


async def test_prometheus_frozen_then_killed_and_restarted(tmp_path: Path) -> None:
    """S7a (killed, restarted) and a frozen Prometheus (SIGSTOP), for real."""
    root = _tsdb(tmp_path)
    with contextlib.ExitStack() as stack:
        prom = await _start(stack, root)
        port = int(prom.url.rsplit(":", 1)[1])
        async with Watched(await _backend(prom.url)) as w:
            await until(lambda: _all(w, "streaming"), 20.0, "streaming")
            # frozen: it accepts connections and never answers
            os.kill(prom.pid, signal.SIGSTOP)
            try:
                took = await until(lambda: _all(w, "unknown", "prometheus slow"), 10.0, "slow")
                assert took < 2 * REFRESH_S + 1.0  # before any host could read stale
                await until(lambda: _all(w, "unknown", f"no answer within {TIMEOUT_S:g} s"),
                            15.0, "down after the timeout")
                await until(lambda: bool(w.pages()), 2.0, "the page")
            finally:
                os.kill(prom.pid, signal.SIGCONT)
            await until(lambda: _all(w, "streaming"), 20.0, "streaming after SIGCONT")
            await until(lambda: bool(w.pages("recovery")), 3.0, "the recovery")
            assert w.pages() == [("prometheus", "source-slow")]  # slow, then down: one outage
            assert [f for f in w.fleet.hosts["node-1"].findings() if f.severity.value != "info"
                    ] == []
            # killed: connection refused; restarted on the same port and data
            os.kill(prom.pid, signal.SIGKILL)
            await until(lambda: _all(w, "unknown", "prometheus down"), 10.0, "down")
            await until(lambda: len(w.pages()) == 2, 3.0, "the second page")
            assert w.pages()[1] == ("prometheus", "source-down")
            [finding] = [f for f in w.fleet.all_findings() if f.code == "source-down"]
            assert finding.host == "prometheus" and finding.extra["hosts"] == list(HOSTS)
            assert "3 hosts not watched (unknown, not down)" in finding.summary
            await _start(stack, root, port)
            await until(lambda: _all(w, "streaming"), 30.0, "streaming after the restart")
            await until(lambda: len(w.pages("recovery")) == 2, 3.0, "the second recovery")
            assert w.running
    _only_the_source_paged(w)
    assert w.pages("recovery") == [("prometheus", "source-slow"), ("prometheus", "source-down")]


async def test_prometheus_answering_503_slow_or_past_the_timeout(tmp_path: Path) -> None:
    """S7b (503), S7c (every answer late, under the timeout), S7d (past it), through a
    proxy in front of a real Prometheus."""
    root = _tsdb(tmp_path)
    with contextlib.ExitStack() as stack:
        prom = await _start(stack, root)
        async with http_proxy(int(prom.url.rsplit(":", 1)[1])) as proxy, \
                Watched(await _backend(proxy.url)) as w:
            await until(lambda: _all(w, "streaming"), 20.0, "streaming")
            proxy.mode = "503"  # S7b
            await until(lambda: _all(w, "unknown", "HTTP 503"), 10.0, "503")
            proxy.mode = "pass"
            await until(lambda: _all(w, "streaming"), 10.0, "back from 503")
            proxy.mode, proxy.delay_s = "delay", 1.5 * REFRESH_S  # S7c: late, not lost
            t0 = time.monotonic()
            took = await until(lambda: _all(w, "unknown", "prometheus slow"), 10.0, "slow")
            assert took < 2 * REFRESH_S + 1.0
            while time.monotonic() - t0 < 4 * proxy.delay_s:  # never stale, never down
                assert all(w.status(h) == "unknown" for h in HOSTS), \
                    [w.status(h) for h in HOSTS]
                await asyncio.sleep(0.2)
            proxy.mode = "pass"
            await until(lambda: _all(w, "streaming"), 15.0, "back from slow")
            proxy.mode, proxy.delay_s = "delay", TIMEOUT_S + 2.0  # S7d: past the timeout
            await until(lambda: _all(w, "unknown", f"no answer within {TIMEOUT_S:g} s"),
                        15.0, "down after the timeout")
            proxy.mode = "pass"
            await until(lambda: _all(w, "streaming"), 20.0, "back from the timeout")
            await until(lambda: len(w.pages("recovery")) == 3, 3.0, "three recoveries")
            assert w.running
    assert w.pages() == [("prometheus", "source-down"), ("prometheus", "source-slow"),
                         ("prometheus", "source-slow")]
    _only_the_source_paged(w)


def test_a_prometheus_console_session_records_and_replays_by_its_listed_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """S7e: ``--prometheus`` sessions were never recorded (no ``● rec``, ``--record-dir``
    ignored); ``rigwatch replay`` had no ``--record-dir`` and took only a path."""
    from probes.sources.prometheus.options import prometheus_options
    from probes.sources.replay import ReplayBackend
    from probes.store.catalog import find_recording, record_dir
    from probes.store.recording import RecordingReader
    from probes.wire.samples import HostSample
    from tui.app import make_app
    from tui.cli import build_parser, main
    from tui.cli_record import console_backend
    from tui.console_options import ConsoleOptions
    from tui.settings import Settings

    root = _tsdb(tmp_path)
    rec = tmp_path / "recordings"
    with _started(root) as prom:
        args = build_parser().parse_args(["--prometheus", prom.url, "--refresh", "1",
                                          "--record-dir", str(rec)])
        options = prometheus_options(args)
        assert options is not None
        _source, backend = console_backend(args, Settings())

        async def watch() -> str:
            app = make_app(backend, ConsoleOptions(demo=False))
            async with app.run_test(size=(120, 30)) as pilot:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not all(
                        h.last is not None and h.last.seq >= 2 for h in app.fleet.hosts.values()):
                    await pilot.pause(0.1)
                note = app.mode_text()
                await app.action_quit()
            return note

        note = asyncio.run(watch())
    assert note == f"Prometheus {prom.url} · ● rec", note
    [path] = list(rec.glob("*.sqlite3"))
    assert (path.stat().st_mode & 0o777) == 0o600
    with RecordingReader(path) as reader:
        hosts = {h for h, _, item in reader.items() if isinstance(item, HostSample)}
    assert hosts == set(HOSTS)
    # the listing names it; that name (and its start) finds it, in --record-dir
    assert main(["replay", "--record-dir", str(rec)]) == 0
    out = capsys.readouterr()
    assert path.name in out.out, out
    for name in (path.name, path.stem, path.name[:15]):
        replay = build_parser().parse_args(["replay", "--record-dir", str(rec), name])
        assert find_recording(replay.file, record_dir(replay)) == path
    again = ReplayBackend(str(find_recording(path.stem, rec)))
    assert [s.name for s in again.specs] == list(HOSTS)
    again.reader.close()
    with pytest.raises(Exception, match="no recording 'nope'"):
        find_recording("nope", rec)
