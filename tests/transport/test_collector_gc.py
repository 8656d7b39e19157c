"""A collector process's garbage collector at start-up (#38 item 5): off while it reads
its job, then what it built frozen and the streaming thresholds set, on before its sessions
are served (``collector_worker.tune_collection``).  Order of events in a real process, not
time.  Negative control: ``main`` as it was is told apart (on throughout, CPython's
thresholds, nothing frozen)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

from probes.config.fleet import demo_fleet
from probes.transport.collector_wire import CollectorJob, frame
from probes.transport.collector_worker import STREAMING_THRESHOLDS
from tests.conftest import REPO


def _events(order: str) -> list[dict]:
    spec = demo_fleet(speed=60)[0]
    specs = tuple(dataclasses.replace(spec, name=f"h{k:04d}") for k in range(200))
    proc = subprocess.run([sys.executable, "-m", "tests.transport.collector_gc_child", order],
                          input=frame(CollectorJob(specs, 8, 0.05, "collector 1")),
                          cwd=REPO, capture_output=True, timeout=60)
    lines = [ln for ln in proc.stdout.decode().splitlines() if ln.startswith("[")]
    assert lines, proc.stderr.decode()
    events: list[dict] = json.loads(lines[-1])
    return events


def _tuned(events: list[dict]) -> bool:
    read, served = events
    return read["at"] == "job read" and not read["gc_enabled"] and \
        served["at"] == "serve" and served["gc_enabled"] and \
        tuple(served["thresholds"]) == STREAMING_THRESHOLDS and served["frozen"] > 10_000


def test_the_collector_is_off_while_the_job_is_read_and_tuned_before_the_sessions() -> None:
    assert _tuned(_events("now"))


def test_negative_control_main_as_it_was() -> None:
    events = _events("before")
    assert not _tuned(events)
    assert events[0]["gc_enabled"] and events[1]["frozen"] == 0
