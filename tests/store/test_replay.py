"""Replay: a real agent's stream recorded, then played back with pause, speed and seeks; and
the console resuming its recording after a restart."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.sources.recording import RecordingBackend
from probes.sources.replay import ReplayBackend, ReplayError, parse_seek
from probes.store.recording import Recorder, RecordingReader
from probes.triage import Severity, Step
from probes.wire.events import SessionItem
from probes.wire.protocol import decode_line
from probes.wire.samples import FabricSample, Hello, HostSample
from tests.conftest import AGENT_SOURCE
from tests.support.tui_fakes import wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions

DROP_AT = 1800
"""Simulated seconds into the run when gpu-r02's GPU 6 falls off the bus."""


def _agent(host: str, scenario: str, count: int) -> list[SessionItem]:
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--simulate", scenario, "--fast", "--count", str(count),
         "--interval", "10", "--seed", "4", "--hostname", host],
        input=AGENT_SOURCE, capture_output=True, timeout=60, check=True)
    # the simulated host's fabric messages are no part of what these recordings test
    return [m for x in proc.stdout.splitlines()
            if not isinstance(m := decode_line(x), FabricSample)]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two hosts, 1 h at 10 s: one healthy, one losing a GPU at 30 min; the finding marked."""
    path = tmp_path_factory.mktemp("rec") / "soak.sqlite3"
    streams = {"gpu-r01": _agent("gpu-r01", "healthy", 360),
               "gpu-r02": _agent("gpu-r02", f"xid79:6@{DROP_AT}", 360)}
    rec = Recorder(path, "k", list(streams))
    merged = sorted(((getattr(i, "ts", 0.0), h, i) for h, items in streams.items()
                     for i in items), key=lambda x: x[0])
    t0 = merged[0][0]
    for ts, host, item in merged:
        rec.record(host, ts, item)
    rec.record("gpu-r02", t0 + DROP_AT, Finding(Step.GPU, "gpu-lost", Severity.CRITICAL,
                                                "GPU 6 lost", "gpu-r02", gpu=6, ts=t0 + DROP_AT))
    rec.close()
    return path


def _collect(backend: ReplayBackend) -> tuple[list[tuple[str, SessionItem]], asyncio.Task[None]]:
    got: list[tuple[str, SessionItem]] = []
    task = asyncio.get_running_loop().create_task(backend.run(lambda h, i: got.append((h, i))))
    return got, task


async def test_replay_paces_pauses_and_speeds(recording: Path) -> None:
    backend = ReplayBackend(str(recording), speed=600.0)
    # no specs stored (the recorder was driven by hand): bare names, at the recorded pace
    assert backend.specs == [HostSpec("gpu-r01", interval_s=10.0),
                             HostSpec("gpu-r02", interval_s=10.0)]
    got, task = _collect(backend)
    try:
        await asyncio.sleep(1.0)
        t1 = backend.clock.t
        assert backend.start + 300 < t1 < backend.start + 900  # ≈ 600 recording s per s
        samples = [i for _, i in got if isinstance(i, HostSample)]
        assert all(s.ts <= t1 for s in samples) and len(samples) >= 50
        assert not any(isinstance(i, Finding) for _, i in got)  # derived again, not replayed
        backend.toggle_pause()
        await asyncio.sleep(0.1)  # the step in flight when the key came still counts
        paused_at, n = backend.clock.t, len(got)
        await asyncio.sleep(0.5)
        assert backend.clock.t == paused_at and len(got) == n
        assert "paused" in backend.position.describe()
        backend.toggle_pause()
        backend.faster(-8)
        assert backend.speed == 1.0
        backend.faster(3)
        assert backend.speed == 10.0
    finally:
        task.cancel()


async def test_next_finding_plays_on_and_a_seek_back_starts_over(recording: Path) -> None:
    """A jump forward plays the items in between on top of the screen's state (no rewind);
    a seek back starts over from the first item, so nothing from after the target stays."""
    backend = ReplayBackend(str(recording), speed=1.0)
    rewinds: list[float] = []
    backend.on_rewind = lambda: rewinds.append(backend.clock.t)
    got, task = _collect(backend)
    try:
        await asyncio.sleep(0.2)
        t = backend.next_finding()
        assert t == pytest.approx(backend.start + DROP_AT, abs=0.01)
        def lost_gpu_shown() -> list[HostSample]:
            return [s for h, s in got if isinstance(s, HostSample) and h == "gpu-r02"
                    and s.ts >= t and (len(s.gpus) < 8
                                       or any(g.state.value != "ok" for g in s.gpus))]

        # at 1x the drop-out's samples come within half a second; a loaded machine may
        # take longer to play them, so look until a deadline rather than once
        deadline = asyncio.get_running_loop().time() + 5.0
        await asyncio.sleep(0.5)
        while not lost_gpu_shown() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        assert rewinds == [] and backend.clock.t >= t
        samples = [s.ts for _, s in got if isinstance(s, HostSample)]
        assert samples == sorted(samples), "every item once, in order, up to the target"
        assert lost_gpu_shown(), "the samples after the drop-out show the lost GPU"
        n = len(got)
        backend.seek(backend.start + 600)
        await asyncio.sleep(0.3)
        assert len(rewinds) == 1 and backend.rewinds == 1
        again = got[n:]
        assert again[:5] == got[:5], "from the recording's first item"
        assert max(getattr(i, "ts", 0.0) for _, i in again) < backend.start + 600 + 2.0
    finally:
        task.cancel()


async def test_replay_in_the_console_seeks_to_the_drop_out(recording: Path) -> None:
    backend = ReplayBackend(str(recording), speed=60.0)
    app = make_app(backend, ConsoleOptions(demo=False, title="soak.sqlite3"))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: "gpu-r02" in app.fleet.hosts
                         and app.fleet.hosts["gpu-r02"].hello is not None)
        await pilot.press("greater_than_sign")
        await wait_until(pilot, lambda: any(
            f.code == "gpu-lost" for f in app.fleet.hosts["gpu-r02"].findings()), timeout_s=10)
        assert app._clock() >= backend.start + DROP_AT
        assert app.mode_text().startswith("replay ")
        assert not any(f.code == "gpu-lost" for f in app.fleet.hosts["gpu-r01"].findings())
        # seek back before it: the fleet state starts over without the lost GPU
        backend.seek(backend.start + 600)
        await wait_until(pilot, lambda: backend.clock.t < backend.start + DROP_AT
                         and not any(f.code == "gpu-lost"
                                     for f in app.fleet.hosts["gpu-r02"].findings()))


def test_parse_seek() -> None:
    start = 1_764_700_000.0  # 2025-12-02 18:26:40 UTC
    assert parse_seek("+10m", start + 5, start) == start + 605
    assert parse_seek("-1h", start + 7200, start) == start + 3600
    assert parse_seek("18:30", start, start) == start + 200
    day = start - start % 86400
    assert parse_seek("03:00", start, start) == day + 86400 + 3 * 3600  # the next morning
    assert parse_seek("2025-12-02T18:27:00Z", start, start) == start + 20
    with pytest.raises(ReplayError, match="cannot read 'soon' as a time"):
        parse_seek("soon", start, start)


def test_an_empty_recording_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    Recorder(path, "k", ["h"]).close()
    with pytest.raises(ReplayError, match="holds no items"):
        ReplayBackend(str(path))


async def test_the_console_resumes_its_recording(recording: Path, tmp_path: Path) -> None:
    """A restarted console plays back the recent past, then appends the live items."""
    path = tmp_path / "resume.sqlite3"
    path.write_bytes(recording.read_bytes())

    class Live:
        def __init__(self) -> None:
            self.specs = [HostSpec("gpu-r01"), HostSpec("gpu-r02")]

        async def run(self, emit: object) -> None:
            last = _agent("gpu-r01", "healthy", 1)
            for item in last:
                emit("gpu-r01", item)  # type: ignore[operator]

    with RecordingReader(path) as r:
        before = r.count()
    backend = RecordingBackend(Live(), Recorder(path, "k", ["gpu-r01", "gpu-r02"]),
                               resume_from=RecordingReader(path), resume_window_s=10 * 3600)
    fleet = FleetState(backend.specs)
    await backend.run(lambda h, i: fleet.apply(h, i, 0.0))
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    assert backend.resumed_items == before - 1  # every item but the recorded finding
    # the history from before the restart is back on screen: the drop-out included
    assert any(f.code == "gpu-lost" for f in fleet.hosts["gpu-r02"].findings())
    assert isinstance(fleet.hosts["gpu-r01"].hello, Hello)
    with RecordingReader(path) as r:
        assert r.count() == before + 2  # the live hello and sample were appended


def test_export_command_reads_the_recording(recording: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    out = tmp_path / "soak.csv"
    assert main(["export", str(recording), "--format", "csv", "-o", str(out)]) == 0
    rows = out.read_text().splitlines()
    with RecordingReader(recording) as r:
        samples = [i for _, _, i in r.items(kinds=["sample"])]
    assert len(rows) == 1 + sum(len(s.gpus) for s in samples)  # type: ignore[union-attr]
    assert main(["export", str(recording), "--format", "prometheus"]) == 0
    text = capsys.readouterr().out
    assert text.endswith("# EOF\n") and 'Hostname="gpu-r02"' in text
    assert main(["export", str(recording)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert '"host":"gpu-r01"' in first or '"host":"gpu-r02"' in first
    assert main(["export", str(tmp_path / "none.sqlite3")]) == 2
    assert "none.sqlite3" in capsys.readouterr().err
