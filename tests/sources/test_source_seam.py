"""One source seam (issue #37): every source is built once by the registry and read, folded
and judged by one path, so the same fleet judges the same whichever source carries it; and
the CLI has no branch per source."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec, demo_fleet
from probes.outputs.read_once import read_once
from probes.sources import registry
from probes.sources.agents import AgentFleetBackend
from probes.sources.base import BackendBase
from probes.sources.replay import ReplayBackend
from probes.store.recording import Recorder
from probes.wire.events import Emit, SessionItem
from probes.wire.samples import HostSample
from tests.conftest import REPO
from tui.cli import build_parser
from tui.settings import Settings

SOURCE_NAMES = frozenset({
    "AgentFleetBackend", "CollectorBackend", "PrometheusBackend", "PromFleetSource",
    "PromFleetOptions", "ReplayBackend", "JobWatchBackend", "prometheus_options",
    "run_prometheus", "console_backend_prometheus", "prometheus_snapshot", "read_fleet",
    "collect_now", "collect_all_now", "findings_now"})
"""What a per-source branch in the CLI would have to name."""
SOURCE_MODULES = ("probes.sources.agents", "probes.sources.collectors",
                  "probes.sources.prometheus", "probes.sources.replay",
                  "probes.sources.job_watch")
"""A source's own modules: the CLI reaches them only through ``probes.sources.registry``.
(``probes.sources.hosts``, the agents' host list, stays open to the agent-only commands:
``manifest`` and ``check-inventory`` ask hosts for their hello over SSH.)"""


def _demo_codes(snap: dict) -> dict[str, set[tuple[str, str]]]:
    """Each host's critical and warning findings as (severity, code)."""
    return {h["name"]: {(f["severity"], f["code"]) for f in h["findings"]
                        if f["severity"] in ("critical", "warning")} for h in snap["hosts"]}


def _rigwatch(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def demo_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo fleet read once through its agents, every item it emitted recorded as the
    console's recorder records a live session's."""
    path = tmp_path_factory.mktemp("seam") / "demo.sqlite3"
    specs = demo_fleet()
    got: list[tuple[str, SessionItem]] = []
    asyncio.run(AgentFleetBackend(specs).run_once(lambda h, i: got.append((h, i))))
    assert {h for h, i in got if isinstance(i, HostSample)} == {s.name for s in specs}
    with Recorder(path, "demo", [s.name for s in specs]) as rec:
        for host, item in got:
            rec.record(host, float(getattr(item, "ts", 0.0)), item)  # type: ignore[arg-type]
    return path


def test_the_demo_judges_the_same_through_agents_and_through_its_recording(
        demo_recording: Path) -> None:
    """``snapshot --json`` of the demo fleet read by its agents, and of a recording of that
    read, name the same critical and warning findings on every host: the recording is
    played to its end into the same fold and the same detectors."""
    live = _demo_codes(_rigwatch("snapshot", "--demo", "--json"))
    played = _demo_codes(_rigwatch("snapshot", "--recording", str(demo_recording), "--json"))
    assert sorted(played) == sorted(live) == sorted(s.name for s in demo_fleet())
    assert played == live
    # and the judgement is the console's, not a sample's: the lost GPU and the soak
    # detectors' findings are there on both sides
    assert ("critical", "gpu-lost") in live["gpu-b02"]
    assert ("warning", "memory-leak") in live["gpu-a02"]


def test_preflight_reads_a_recording_like_any_source(demo_recording: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "preflight", "--json",
                           "--recording", str(demo_recording)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr  # the demo fails its checks, as live
    hosts = {h["name"] for h in json.loads(proc.stdout)["hosts"]}
    assert hosts == {s.name for s in demo_fleet()}


def test_the_registry_builds_each_source_from_the_arguments(demo_recording: Path) -> None:
    def built(*argv: str) -> object:
        return registry.build_source(build_parser().parse_args(list(argv)), Settings()).backend

    assert isinstance(built("snapshot", "--demo"), AgentFleetBackend)
    played = built("snapshot", "--recording", str(demo_recording))
    assert isinstance(played, ReplayBackend)
    played.reader.close()
    assert [name for name, _ in registry.SOURCES][-1] == "agents"  # the default, last
    for _name, module in registry.SOURCES:
        assert callable(registry.factory(module))


def test_a_source_with_only_a_stream_is_read_until_each_host_has_a_sample() -> None:
    """The default ``run_once``: the stream until every host has sent a sample; a host
    silent at the deadline is a failure of the read, and the read still ends."""
    import time

    class Streaming(BackendBase):
        def __init__(self) -> None:
            self.specs = [HostSpec("quick"), HostSpec("silent")]
            self.stopped = False

        async def run(self, emit: Emit) -> None:
            try:
                emit("quick", HostSample(time.time(), 1))
                await asyncio.sleep(3600)
            finally:
                self.stopped = True

    backend = Streaming()
    start = time.monotonic()
    read = asyncio.run(read_once(backend, deadline_s=0.5))
    assert time.monotonic() - start < 5
    assert backend.stopped
    by = {r.spec.name: r for r in read.results}
    assert by["quick"].sample is not None and by["quick"].failure is None
    assert by["silent"].sample is None and "no sample within" in (by["silent"].failure or "")
    assert "quick" in read.fleet.hosts and read.fleet.hosts["quick"].last is not None


def _cli_modules() -> list[Path]:
    return sorted((REPO / "tui").glob("cli*.py"))


def test_the_cli_has_no_branch_per_source() -> None:
    """No ``tui/cli*.py`` names a source's class or a per-source path, nor imports a
    source's own modules: it builds whatever ``probes.sources.registry`` returns."""
    found = []
    for path in _cli_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            name = (node.id if isinstance(node, ast.Name) else node.attr
                    if isinstance(node, ast.Attribute) else None)
            if isinstance(node, ast.alias):
                name = node.name
            if isinstance(node, ast.FunctionDef):
                name = node.name
            if name in SOURCE_NAMES:
                found.append(f"{path.name}:{getattr(node, 'lineno', '?')}: {name}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    SOURCE_MODULES):
                found.append(f"{path.name}:{node.lineno}: imports {node.module}")
    assert found == []


def test_the_checker_sees_a_planted_branch(tmp_path: Path) -> None:
    """The check above can fail: a planted fork is named."""
    planted = ast.parse("from probes.sources.prometheus.options import prometheus_options\n"
                        "if prometheus_options(args):\n    pass\n")
    names = {n.id for n in ast.walk(planted) if isinstance(n, ast.Name)}
    modules = [n.module for n in ast.walk(planted) if isinstance(n, ast.ImportFrom)]
    assert "prometheus_options" in names & SOURCE_NAMES
    assert modules[0] is not None and modules[0].startswith(SOURCE_MODULES)


def test_a_command_that_reads_no_source_refuses_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    assert main(["--prometheus", "http://127.0.0.1:9", "manifest", "--demo"]) == 2
    assert "--prometheus does not apply to 'manifest'" in capsys.readouterr().err
    # and two sources at once are one line, not one silently chosen
    assert main(["snapshot", "--demo", "--recording", "x"]) == 2
    assert "cannot be read with --demo" in capsys.readouterr().err


def test_a_long_read_keeps_its_newest_past_and_stays_bounded() -> None:
    """A day-long recording read to its end: each host's read keeps a bounded past, the
    newest, so the detectors' windows are whole and memory is not the recording's size."""
    from probes.transport.session import MAX_HISTORY, OnceResult, file_item

    r = OnceResult(HostSpec("h"))
    n = MAX_HISTORY * 2 + 7
    for k in range(n):
        file_item(r, HostSample(float(k), k))
    assert r.sample is not None and r.sample.seq == n - 1
    assert MAX_HISTORY // 2 <= len(r.history) <= MAX_HISTORY
    assert [s.seq for s in r.history[-3:]] == [n - 4, n - 3, n - 2]


def test_one_read_files_back_as_it_was_emitted() -> None:
    """An agent's read, emitted as items and filed again, is the same read: a healthy host
    with its garbled-line count, a failed one with its reason."""
    from probes.sources.agents import once_items
    from probes.transport.session import OnceResult, file_item

    ok = OnceResult(HostSpec("ok"), sample=HostSample(5.0, 1), garbled=3)
    failed = OnceResult(HostSpec("failed"), failure="no route to host")
    for r in (ok, failed):
        again = OnceResult(r.spec)
        for item in once_items(r):
            file_item(again, item)
        assert (again.sample, again.failure, again.garbled) == (r.sample, r.failure,
                                                                r.garbled)
