"""The console's Prometheus exports: a textfile for node_exporter and a ``/metrics`` endpoint.

Apart from ``tui.app`` because exporting is a side job of the console with its own I/O and
its own failures (a textfile that cannot be written stops, a port that cannot be bound is
said once); both read the same fold the screens draw.
"""

from __future__ import annotations

import asyncio

from probes.fleet_state import HostStatus
from probes.outputs.export import HostExport, prometheus_text, write_textfile
from probes.outputs.metrics_server import serve_metrics
from tui.app_base import ConsoleMixin

METRICS_EVERY_S = 15.0
"""Textfile refresh: node_exporter reads it on its own scrape interval (15 s typical)."""


class MetricsExport(ConsoleMixin):
    """Write the textfile every ``METRICS_EVERY_S`` and serve ``/metrics``, if asked."""

    async def _start_metrics(self) -> None:
        """Start the exports that were asked for (on mount)."""
        if self.metrics_textfile is not None:
            self.set_interval(METRICS_EVERY_S, self._write_metrics)
        if self.metrics_port is not None:
            try:
                self._metrics_server = await serve_metrics(self.metrics_port,
                                                           self.metrics_text)
            except OSError as exc:
                text = f"cannot serve metrics on 127.0.0.1:{self.metrics_port}: " \
                    f"{exc.strerror or exc}"
                self.notify(text, markup=False, severity="error", timeout=30)

    def metrics_text(self) -> str:
        """The fleet now, in Prometheus text format (dcgm-exporter names)."""
        return prometheus_text(
            HostExport(s.name, s.hello, s.last, tuple(s.findings()),
                       s.status is HostStatus.STREAMING) for s in self.fleet.hosts.values())

    async def _write_metrics(self) -> None:
        path = self.metrics_textfile
        if path is None:
            return
        try:
            await asyncio.to_thread(write_textfile, path, self.metrics_text())
        except OSError as exc:
            self.metrics_textfile = None
            text = f"stopped writing {path}: {exc.strerror or exc}"
            self.notify(text, markup=False, severity="error", timeout=30)
