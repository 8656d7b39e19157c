"""How ``recording_before25.sqlite3`` was made: the code of main just before issue 25
(schema 1, every item a deflated JSON row), through the live console's recording tee.

Kept for the record; run with that code (``git checkout`` the commit before issue 25):
``python tests/data/make_recording_before25.py tests/data/recording_before25.sqlite3``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

from probes.config.fleet import demo_fleet
from probes.fleet_state import FleetState
from probes.sources.recording import RecordingBackend
from probes.store.recording import Recorder
from probes.triage import Severity
from tests.support.tui_fakes import T0, FakeBackend, sim_items

HOSTS = ("gpu-a01", "gpu-a03", "gpu-a04", "gpu-b02")


async def record(path: Path) -> None:
    specs = [s for s in demo_fleet() if s.name in HOSTS]
    items = [(s.name, i) for s in specs
             for i in sim_items(s.name, ",".join(s.simulate), seed=s.seed, minutes=20)]
    fleet = FleetState(specs)
    for host, item in items:
        fleet.apply(host, item, T0)
    marks = [f for h in fleet.hosts.values() for f in h.findings()
             if f.severity is not Severity.INFO and f.ts is not None]
    live = FakeBackend(specs, items)
    rec = Recorder(path, "demo-before25", [s.name for s in specs])
    backend = RecordingBackend(live, rec)
    rec.describe_hosts(specs)
    task = asyncio.create_task(backend.run(lambda _h, _i: None))
    await live.started.wait()
    for f in marks:
        backend.record_alert(f, f.ts or T0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


if __name__ == "__main__":
    asyncio.run(record(Path(sys.argv[1])))
