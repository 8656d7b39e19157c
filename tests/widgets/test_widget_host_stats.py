"""The host panel: CPU, load, memory, swap (swapping marked), cores per GPU, findings."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.color import Color
from textual.app import ComposeResult

from probes.analysis.findings import Finding
from probes.analysis.judge import host_health
from probes.triage import Severity, Step
from probes.wire.samples import HostStats
from tests.support.screens import panel_lines
from tests.support.widget_app import ThemedApp
from widgets import host_stats
from widgets.host_stats import (
    HostStatsPanel,
    HostView,
    render_host,
    used_pct,
)

GIB = 1024 ** 3


class PanelApp(ThemedApp):
    """The panel alone, styled as the console styles it."""

    def compose(self) -> ComposeResult:
        yield HostStatsPanel(id="host")


SWAP_FINDING = Finding(Step.GPU, "host-swapping", Severity.WARNING,
                       "host swapping in 900 pages/s", "gpu-a1")
INFO_FINDING = Finding(Step.GPU, "topology-cross-numa", Severity.INFO, "GPU0–NIC3 path is SYS",
                       "gpu-a1")


def busy_view() -> HostView:
    stats = HostStats(cpu_pct=37.4, load1=12.5, load5=10.25, load15=9.0,
                      mem_used_bytes=412 * GIB, mem_total_bytes=1024 * GIB,
                      swap_used_bytes=3 * GIB, swap_total_bytes=8 * GIB,
                      swap_in_pages_s=900.0, swap_out_pages_s=12.0)
    return HostView.from_stats(stats, cores_physical=96, cores_logical=192, gpu_count=8,
                               findings=(SWAP_FINDING, INFO_FINDING),
                               health=host_health(stats, 96, 192, 8))


def judged(view: HostView) -> HostView:
    """``view`` with the marks the core would give it (the widget only renders them)."""
    stats = HostStats(cpu_pct=view.cpu_pct, load1=view.load1, mem_used_bytes=view.mem_used_bytes,
                      mem_total_bytes=view.mem_total_bytes,
                      swap_in_pages_s=view.swap_in_pages_s)
    return replace(view, health=host_health(stats, view.cores_physical, view.cores_logical,
                                            view.gpu_count))


def line(lines: list[str], label: str) -> str:
    (found,) = [x for x in lines if x.split()[:1] == [label]]
    return found


def test_pure_helpers() -> None:
    assert used_pct(1, 4) == 25.0 and used_pct(None, 4) is None and used_pct(1, 0) is None


async def test_busy_host_at_160_and_80_columns() -> None:
    for size in ((160, 30), (80, 24)):
        app = PanelApp()
        async with app.run_test(size=size) as pilot:
            panel = app.query_one(HostStatsPanel)
            panel.host = busy_view()
            await pilot.pause()
            lines = panel_lines(panel)
            assert lines[0].strip() == "Host"
            cpu = line(lines, "CPU")
            assert "37 %" in cpu and "12.50 / 10.25 / 9.00" in cpu and "192 logical" in cpu
            assert "overloaded" not in cpu
            mem = line(lines, "Memory")
            assert "412.0 / 1,024.0 GiB" in mem and "40 %" in mem and "high" not in mem
            swap = line(lines, "Swap")
            assert "3.0 / 8.0 GiB" in swap and "in 900" in swap and "out 12" in swap
            assert "▲ swapping" in swap
            cores = line(lines, "Cores")
            assert "12.0 per GPU" in cores and "96 physical / 8 GPUs" in cores
            assert "few" not in cores
            assert any(x.strip() == "Findings" for x in lines)
            (crit,) = [x for x in lines if "host swapping in 900 pages/s" in x]
            assert crit.split()[:2] == ["warning", "gpu"]
            assert any("GPU0–NIC3 path is SYS" in x for x in lines)
            assert all(len(x.rstrip()) <= size[0] for x in lines)


async def test_marks_are_coloured_from_the_theme() -> None:
    view = judged(HostView(cpu_pct=100.0, load1=300.0, cores_logical=192,
                           mem_used_bytes=1000 * GIB, mem_total_bytes=1024 * GIB,
                           swap_in_pages_s=5000.0, cores_physical=16, gpu_count=8))
    app = PanelApp()
    async with app.run_test(size=(100, 24)) as pilot:
        panel = app.query_one(HostStatsPanel)
        panel.host = view
        await pilot.pause()
        lines = panel_lines(panel)
        assert "▲ overloaded" in line(lines, "CPU")
        assert "98 %" in line(lines, "Memory") and "▲ high" in line(lines, "Memory")
        assert "2.0 per GPU" in line(lines, "Cores") and "▼ few" in line(lines, "Cores")
        for theme in ("rigwatch-dark", "rigwatch-high-contrast"):
            app.theme = theme
            await pilot.pause()
            warn = Color.parse(app.get_css_variables()["sev-warning"])
            segs = [seg for s in panel.render_lines(panel.region.reset_offset) for seg in s
                    if seg.text.strip() in ("▲ swapping", "▲ overloaded", "▼ few")]
            assert len(segs) == 3
            assert all(seg.style and seg.style.color == warn for seg in segs)


async def test_none_values_and_empty_states() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(HostStatsPanel)
        await pilot.pause()
        assert [x.strip() for x in panel_lines(panel)] == [
            "Host", "no host statistics reported"]
        panel.host = HostView()
        await pilot.pause()
        lines = panel_lines(panel)
        assert line(lines, "CPU").split() == ["CPU", "–", "load", "–", "/", "–", "/", "–"]
        assert line(lines, "Memory").split() == ["Memory", "–"]
        assert line(lines, "Swap").split() == ["Swap", "–", "in", "–", "out", "–", "pages/s"]
        assert line(lines, "Cores").split()[:4] == ["Cores", "–", "per", "GPU"]
        assert "– physical / – GPUs" in line(lines, "Cores")
        assert any(x.strip() == "no host findings" for x in lines)
        assert "▲" not in "".join(lines) and "▼" not in "".join(lines)


async def test_equal_view_is_not_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = host_stats.render_host

    def counting(view: HostView | None) -> object:
        calls.append(view)
        return real(view)

    monkeypatch.setattr(host_stats, "render_host", counting)
    app = PanelApp()
    async with app.run_test(size=(100, 24)) as pilot:
        panel = app.query_one(HostStatsPanel)
        panel.host = busy_view()
        await pilot.pause()
        before = len(calls)
        for _ in range(3):
            panel.host = busy_view()
            await pilot.pause()
        assert len(calls) == before
        text = str(render_host(busy_view()))
        assert "host swapping" in text


def test_training_throughput_shows_beside_the_host_with_the_cores_drop_verdict() -> None:
    from probes.analysis.throughput import JobSpeed

    slow = JobSpeed("job:/var/log/train/rank0.log", "tokens/s", 2716.0, 3869.0, dropped=True)
    fine = JobSpeed("job:/scratch/eval.log", "it/s", 3.3, 3.31, dropped=False)
    text = render_host(replace(busy_view(), speeds=(slow, fine))).plain
    lines = [line for line in text.splitlines() if line.startswith("Training")]
    assert lines[0].split() == ["Training", "2,716", "tokens/s", "70%", "of", "the", "run's",
                                "median", "3,869", "▼", "drop", "rank0.log"]
    assert "▼" not in lines[1] and "3.3 it/s" in lines[1] and "eval.log" in lines[1]
    assert "Training" not in render_host(busy_view()).plain  # no progress lines: no row
