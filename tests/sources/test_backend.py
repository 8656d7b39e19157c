"""Backends answer for themselves: header note, alerts, where alerts are kept, replay controls.

The app asks the backend instead of asking which class it is, so a new backend (a Slurm
feed, a test fake) needs no edit to ``tui/app.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.sources.agents import AgentFleetBackend
from probes.sources.base import Backend, BackendBase
from probes.sources.recording import RecordingBackend
from probes.sources.replay import ReplayBackend
from probes.store.recording import Recorder
from probes.store.recording_reader import RecordingReader
from probes.triage import Code, Severity, Step
from probes.wire.events import Connected, Emit
from tests.conftest import REPO

SPECS = [HostSpec("gpu-b01")]


def _finding(ts: float) -> Finding:
    return Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL, "GPU 6 lost", "gpu-b01", gpu=6,
                   ts=ts)


def test_a_live_backend_has_no_note_raises_alerts_and_records_nothing() -> None:
    backend: Backend = AgentFleetBackend(SPECS)
    assert backend.mode_text() == "" and backend.raises_alerts and backend.replay is None
    backend.record_alert(_finding(1.0), 1.0)  # nowhere to keep it, and no error


def test_a_recording_backend_notes_recording_and_keeps_alerts(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    rec = Recorder(path, "k", ["gpu-b01"])
    backend: Backend = RecordingBackend(AgentFleetBackend(SPECS), rec)
    assert backend.mode_text() == "● rec" and backend.raises_alerts and backend.replay is None
    rec.record("gpu-b01", 1.0, Connected(1.0))
    backend.record_alert(_finding(2.0), 2.0)
    rec.close()
    assert backend.mode_text() == "not recording"
    with RecordingReader(path) as r:
        assert [type(i).__name__ for _, _, i in r.items()] == ["Connected", "Finding"]


def test_recording_does_not_change_how_hosts_are_reached(tmp_path: Path) -> None:
    """``R`` (retry now) and the drill-down go to the live backend under the recorder: the
    console records by default, and a retry that said "nothing to retry" was a lie."""

    class Live(AgentFleetBackend):
        def __init__(self) -> None:
            super().__init__(SPECS)
            self.asked: list[str] = []

        def retry_now(self, host: str) -> bool:
            self.asked.append(f"retry {host}")
            return host == "gpu-b01"

        def drill_down(self, host: str) -> bool:
            self.asked.append(f"drill {host}")
            return True

    inner = Live()
    rec = Recorder(tmp_path / "r.sqlite3", "k", ["gpu-b01"])
    backend: Backend = RecordingBackend(inner, rec)
    assert backend.retry_now("gpu-b01") and not backend.retry_now("nope")
    assert backend.drill_down("gpu-b01")
    assert inner.asked == ["retry gpu-b01", "retry nope", "drill gpu-b01"]
    assert not AgentFleetBackend(SPECS).drill_down("gpu-b01")  # agents send everything
    rec.close()


def test_a_replay_raises_no_alerts_and_is_its_own_controls(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    rec = Recorder(path, "k", ["gpu-b01"])
    for t in (100.0, 160.0):
        rec.record("gpu-b01", t, Connected(t))
    rec.close()
    backend: Backend = ReplayBackend(str(path))
    assert not backend.raises_alerts
    controls = backend.replay
    assert controls is not None and controls.start == 100.0 and controls.now() == 100.0
    assert backend.mode_text().startswith("replay ")
    controls.seek(130.0)
    controls.toggle_pause()
    assert "paused" in backend.mode_text()


def test_every_backend_the_console_runs_has_the_capabilities() -> None:
    for cls in (AgentFleetBackend, RecordingBackend, ReplayBackend):
        assert issubclass(cls, BackendBase)


def test_the_app_never_asks_which_backend_it_has() -> None:
    tree = ast.parse((REPO / "tui" / "app.py").read_text(encoding="utf-8"))
    checks = [ast.unparse(n) for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id == "isinstance" and "backend" in ast.unparse(n.args[0])]
    assert checks == []


async def test_a_session_that_raises_is_its_hosts_state_and_never_stops_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug past a session's own supervision: before, the fleet's gather raised it and
    cancelled every other host.  Now it is that host's agent-failed state, and it restarts."""
    import asyncio

    from probes.errors import DisconnectKind
    from probes.transport import session
    from probes.wire.events import Disconnected, SessionItem

    real = session.run_session
    starts: list[str] = []

    async def flaky(spec: HostSpec, emit: Emit, *args: object) -> None:
        starts.append(spec.name)
        if spec.name == "bad":
            raise RuntimeError("bug in supervision")
        await real(spec, emit, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(session, "run_session", flaky)
    got: list[tuple[str, SessionItem]] = []
    specs = [HostSpec("bad"), HostSpec("good", simulate=("healthy",), interval_s=0.1)]
    task = asyncio.create_task(AgentFleetBackend(specs, crash_retry_s=0.2).run(
        lambda h, i: got.append((h, i))))
    await asyncio.sleep(1.5)
    try:
        assert not task.done()
        drops = [i for h, i in got if h == "bad" and isinstance(i, Disconnected)]
        assert drops and drops[0].kind is DisconnectKind.AGENT_FAILED
        assert drops[0].reason == "session crashed: RuntimeError: bug in supervision"
        assert starts.count("bad") >= 3
        n = sum(1 for h, _i in got if h == "good")
        await asyncio.sleep(0.5)
        assert sum(1 for h, _i in got if h == "good") > n
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
