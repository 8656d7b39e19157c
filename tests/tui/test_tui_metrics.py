"""The running console's Prometheus exports: the scrape endpoint and the textfile."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.outputs.test_metrics_server import LagMeter, big_text, rss_mib, staller
from tests.support.tui_fakes import fake_fleet, settled
from tui.app import make_app
from tui.console_options import ConsoleOptions


async def test_console_serves_and_writes_the_fleet_metrics(tmp_path: Path) -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(metrics_port=0,
                                           metrics_textfile=tmp_path / "rigwatch.prom"),
                   clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        assert app._metrics_server is not None
        port = app._metrics_server.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = (await r.read()).decode()
        w.close()
        assert body.startswith("HTTP/1.1 200 OK")
        hosts = {line.split('Hostname="')[1].split('"')[0] for line in body.splitlines()
                 if line.startswith("DCGM_FI_DEV_GPU_UTIL{")}
        assert hosts == {"gpu-t01", "gpu-t02", "gpu-t03"}
        await app._write_metrics()
        text = app.metrics_textfile.read_text()
        assert 'rigwatch_host_up{Hostname="gpu-t02"} 1' in text
        assert text.count("# TYPE DCGM_FI_DEV_FB_USED gauge") == 1


async def test_clients_that_never_read_do_not_stall_the_console() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(metrics_port=0), clock=clock)
    big = big_text()
    app.metrics_text = lambda: big  # type: ignore[method-assign]  # a 1000-host fleet's size
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        assert app._metrics_server is not None
        port = app._metrics_server.port
        meter = LagMeter()
        await pilot.pause(0.5)
        base_lag, base_rss = meter.stop(), rss_mib()
        meter = LagMeter()
        clients = [staller(port) for _ in range(20)]
        peak = base_rss
        for _ in range(30):
            await pilot.pause(0.05)
            peak = max(peak, rss_mib())
        await pilot.press("j")  # the console still takes keys and redraws
        lag = meter.stop()
        print(f"\nconsole loop lag {base_lag * 1000:.1f} -> {lag * 1000:.1f} ms, "
              f"RSS {base_rss:.0f} -> {peak:.0f} MiB with 20 stalled clients")
        # one shared 20 MiB response (rendered once), not one copy per client
        assert peak - base_rss < 48 and app._metrics_server.renders == 1
        assert lag < base_lag + 0.3, (base_lag, lag)  # scheduling noise on shared cores
        for c in clients:
            c.close()
