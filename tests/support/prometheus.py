"""A real Prometheus for tests: Debian's ``/usr/bin/prometheus`` (2.42) started directly with
a config and a TSDB in a temp dir, listening on 127.0.0.1 (no systemd; recipe after
``shared/reviews/ecosystem.md`` §2b).  Missing or refusing to start raises
``PrometheusUnavailable`` with the reason: the test fails with it, never skips quietly.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.sshd import free_port

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"


class PrometheusUnavailable(RuntimeError):
    """Prometheus could not be started; the message says why."""


@dataclass
class RunningPrometheus:
    url: str
    root: Path
    log: Path
    pid: int = 0
    """The server's process (a test freezes it with SIGSTOP, or kills it)."""

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "(no log)"


def backfill(openmetrics: Path, tsdb: Path) -> str:
    """``promtool tsdb create-blocks-from openmetrics``: blocks Prometheus reads at start."""
    out = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics",
                          str(openmetrics), str(tsdb)], capture_output=True, text=True,
                         timeout=300, check=False)
    if out.returncode != 0:
        raise PrometheusUnavailable(f"promtool failed: {out.stderr.strip()[-500:]}")
    return out.stdout


@contextlib.contextmanager
def prometheus(root: Path, scrape_port: int | None = None, interval_s: float = 1.0,
               extra_args: tuple[str, ...] = (), port: int | None = None
               ) -> Iterator[RunningPrometheus]:
    """Run Prometheus on a free port (or ``port``: a restart where it was); with
    ``scrape_port`` it scrapes ``127.0.0.1:scrape_port/metrics`` every ``interval_s``."""
    if not Path(PROMETHEUS).exists():
        raise PrometheusUnavailable(f"{PROMETHEUS} not installed (apt-get install prometheus)")
    root.mkdir(parents=True, exist_ok=True)
    config = root / "prometheus.yml"
    scrape = "[]"
    if scrape_port is not None:
        scrape = (f"\n  - job_name: rigwatch\n    scrape_interval: {interval_s:g}s\n"
                  f"    static_configs: [{{targets: ['127.0.0.1:{scrape_port}']}}]")
    config.write_text(f"global: {{scrape_interval: {interval_s:g}s, "
                      f"evaluation_interval: {interval_s:g}s}}\nscrape_configs: {scrape}\n")
    port = port or free_port()
    log = root / "prometheus.log"
    tsdb = root / "tsdb"
    tsdb.mkdir(exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
             "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{port}",
             "--log.level=warn", *extra_args], stdout=out, stderr=subprocess.STDOUT, cwd=root)
    running = RunningPrometheus(f"http://127.0.0.1:{port}", root, log, proc.pid)
    try:
        deadline = time.monotonic() + 60.0
        while True:
            if proc.poll() is not None:
                raise PrometheusUnavailable(f"prometheus exited {proc.returncode}: "
                                            f"{running.log_tail()}")
            try:
                with urllib.request.urlopen(running.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise PrometheusUnavailable(f"not ready in 60 s: {running.log_tail()}")
            time.sleep(0.2)
        yield running
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
