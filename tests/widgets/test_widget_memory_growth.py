"""GPU memory growth panel: leak marks in words, time-to-full, layout at 80x24 and 160x48."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest
from rich.style import Style
from textual.app import ComposeResult
from textual.color import Color

from probes.triage import Severity
from tests.support.screens import line_with, screen_lines
from tests.support.widget_app import ThemedApp
from themes import THEMES
from widgets.memory_growth import (
    CHART_MIN_ROWS,
    AgoFormatter,
    GpuGrowthRow,
    GpuMemoryTrend,
    GrowthPlot,
    MemoryGrowth,
    MemoryGrowthView,
    ProcessMemory,
    bucket_means,
    chart_rows,
    fmt_full,
    fmt_slope,
    gpu_line,
    process_lines,
    reduce_points,
)
from widgets.thermal_panel import ScaledHistory

BRAILLE = {chr(c) for c in range(0x2801, 0x2900)}


class GrowthApp(ThemedApp):
    """Just the panel, styled and themed as the console styles it."""

    def __init__(self) -> None:
        super().__init__()
        self.picked: list[int] = []

    def compose(self) -> ComposeResult:
        yield MemoryGrowth()

    def on_memory_growth_gpu_picked(self, message: MemoryGrowth.GpuPicked) -> None:
        self.picked.append(message.index)


def trend(index: int, *, n: int = 3600, leak_mib_h: float = 0.0, base: float = 40_000,
          leaking: bool = False, hours_to_full: float | None = None) -> GpuMemoryTrend:
    rng = random.Random(index)
    pts = tuple((float(i), base + leak_mib_h * i / 3600 + rng.uniform(-20, 20))
                for i in range(n))
    return GpuMemoryTrend(index, pts, 81_559, pts[-1][1] if pts else None,
                          max((p[1] for p in pts), default=None),
                          leak_mib_h if leaking else 0.4, hours_to_full, leaking)


def soak(n_gpus: int = 8, leak_on: int = 3, selected: int | None = 3,
         procs: int = 2, n: int = 3600) -> MemoryGrowthView:
    gpus = tuple(
        trend(g, n=n, base=40_000 + 500 * g, leak_mib_h=1080.0, leaking=True, hours_to_full=11.2)
        if g == leak_on else trend(g, n=n, base=40_000 + 500 * g) for g in range(n_gpus))
    processes = (ProcessMemory(4242, "alice", "python train.py --config big.yaml", 38_000,
                               1070.0, leaking=True),
                 ProcessMemory(99, "bob", "nvidia-cuda-mps-server", 300, None))
    extra = tuple(ProcessMemory(5000 + i, "carol", f"worker-{i}", 100.0 + i, 0.0)
                  for i in range(max(0, procs - 2)))
    return MemoryGrowthView("1 h", gpus, selected, (processes + extra)[:procs])


# ---- pure ------------------------------------------------------------------------------


@pytest.mark.parametrize(("hours", "text"), [
    (None, "—"), (float("inf"), "—"), (float("nan"), "—"), (0.0, "now"), (-2.0, "now"),
    (0.5, "~30 min"), (0.001, "~1 min"), (11.2, "~11 h"), (47.4, "~47 h"), (72.0, "~3 d"),
])
def test_time_to_full(hours: float | None, text: str) -> None:
    assert fmt_full(hours) == text


@pytest.mark.parametrize(("slope", "text"), [
    (None, "–"), (1080.0, "+1,080/h"), (0.4, "+0.4/h"), (-25.0, "-25/h"), (0.0, "+0.0/h"),
    (12.6, "+13/h"),
])
def test_slope_keeps_a_slow_leak_visible(slope: float | None, text: str) -> None:
    assert fmt_slope(slope) == text


def test_leak_is_written_not_only_coloured() -> None:
    leak = gpu_line(trend(3, n=10, leak_mib_h=1080, leaking=True, hours_to_full=11.2), True)
    ok = gpu_line(trend(0, n=10), False)
    assert leak.plain.startswith("▶ ▲ LEAK GPU3")
    assert "+1,080/h" in leak.plain and "~11 h" in leak.plain
    assert ok.plain.startswith("  · ok   GPU0") and "—" in ok.plain
    assert "LEAK" not in ok.plain
    assert len(leak.plain) == len(ok.plain), "rows must line up under the header"


def test_leak_urgency_is_the_findings_severity() -> None:
    """Critical or warning as the leak finding says (the operator's leak_critical_hours),
    whatever the hours shown."""
    def spans(g: GpuMemoryTrend) -> str:
        return repr(gpu_line(g, False).spans)
    urgent = replace(trend(1, n=5, leaking=True, hours_to_full=10), urgency=Severity.CRITICAL)
    assert "sev-critical" in spans(urgent)
    calm = replace(trend(1, n=5, leaking=True, hours_to_full=3), urgency=Severity.WARNING)
    assert "sev-warning" in spans(calm) and "sev-critical" not in spans(calm)
    assert "sev-critical" not in spans(trend(1, n=5, hours_to_full=3))


def test_reduce_points_keeps_spikes_and_order() -> None:
    pts = [(float(i), 100.0) for i in range(3600)]
    pts[1234] = (1234.0, 9000.0)
    pts[2000] = (2000.0, -50.0)
    xs, ys = reduce_points(pts, 120)
    assert len(xs) <= 240
    assert 9000.0 in ys and -50.0 in ys
    assert xs == sorted(xs)
    short = [(0.0, 1.0), (1.0, 2.0)]
    assert reduce_points(short, 120) == ([0.0, 1.0], [1.0, 2.0])
    assert reduce_points([], 10) == ([], [])


def test_bucket_means() -> None:
    assert bucket_means([1.0, 3.0, 5.0, 7.0], 2) == [2.0, 6.0]
    assert bucket_means([1.0], 10) == [1.0]
    assert len(bucket_means([float(i) for i in range(3600)], 240)) == 240


def test_chart_rows_gives_gpu_rows_priority() -> None:
    # 78x14 with 8 GPUs: title + header + 8 rows leave 4, too few for a chart
    assert chart_rows(14, 8, 2) == (0, 4)
    chart, procs = chart_rows(46, 8, 2)
    assert chart >= CHART_MIN_ROWS and procs == 4 and chart + procs + 10 == 46
    chart, procs = chart_rows(22, 2, 20)
    assert chart >= CHART_MIN_ROWS and procs >= 3
    assert chart_rows(10, 0, 0) == (0, 9)


def test_process_lines_truncate_with_count() -> None:
    view = soak(procs=20)
    lines = [c.plain for c in process_lines(view, 6)]
    assert len(lines) == 6
    assert lines[0] == "Processes on GPU3"
    assert "pid" in lines[1] and "slope" in lines[1]
    assert "▲ rising" in lines[2] and "4242" in lines[2] and "+1,070/h" in lines[2]
    assert "python train.py --c…" in lines[2]
    assert lines[-1].strip() == "… +17 more"
    assert [c.plain for c in process_lines(soak(selected=None), 5)] == [
        "processes: click a GPU row to list them"]
    assert [c.plain for c in process_lines(soak(procs=0), 5)] == ["Processes on GPU3  none"]
    assert process_lines(view, 0) == []


def test_time_axis_ends_at_now() -> None:
    f = AgoFormatter()
    ticks, labels = f.get_ticks_and_labels(-3600.0, 0.0)
    assert ticks[-1] == 0.0 and labels[-1] == "now"
    assert labels[0] == "-1.0h"


# ---- mounted ---------------------------------------------------------------------------


async def test_empty_state() -> None:
    app = GrowthApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        assert "GPU memory growth" in lines[0]
        line_with(lines, "no memory history yet")
        assert not app.query_one(GrowthPlot).display


async def test_narrow_panel_keeps_every_gpu_row_and_drops_the_chart() -> None:
    app = GrowthApp()
    async with app.run_test(size=(78, 14)) as pilot:
        app.query_one(MemoryGrowth).view = soak()
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert "▲ LEAK: GPU3" in lines[0] and "1 h" in lines[0]
        leak = line_with(lines[1:], "GPU3 ")
        assert "▲ LEAK" in leak and "+1,080/h" in leak and "~11 h" in leak and "▶" in leak
        for g in range(8):
            line_with(lines[1:], f"GPU{g} ")
        assert sum("· ok" in line for line in lines) == 7
        assert not app.query_one(GrowthPlot).display
        line_with(lines, "Processes on GPU3")
        assert not any(ch in BRAILLE for line in lines for ch in line)


async def test_80x24_with_two_gpus_shows_the_chart() -> None:
    app = GrowthApp()
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one(MemoryGrowth).view = soak(n_gpus=2, leak_on=1, selected=1)
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert app.query_one(GrowthPlot).display
        assert sum(any(ch in BRAILLE for ch in line) for line in lines) >= 2
        line_with(lines, "now")
        line_with(lines, "▲ rising")


async def test_160x48_chart_rows_and_processes() -> None:
    app = GrowthApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.query_one(MemoryGrowth).view = soak(procs=6)
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        plot = app.query_one(GrowthPlot)
        assert plot.display and plot.size.height >= 20
        assert sum(any(ch in BRAILLE for ch in line) for line in lines) >= 5
        for g in range(8):
            line_with(lines[1:], f"GPU{g} ")
        line_with(lines, "worker-3")
        assert not any("more" in line for line in lines)


async def test_click_row_picks_gpu() -> None:
    app = GrowthApp()
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one(MemoryGrowth).view = soak(selected=None)
        await pilot.pause()
        await pilot.pause()
        rows = list(app.query(GpuGrowthRow))
        assert [r.index for r in rows] == list(range(8))
        await pilot.click(rows[5])
        await pilot.pause()
        assert app.picked == [5]


async def test_rows_follow_gpu_count_and_selection() -> None:
    app = GrowthApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(MemoryGrowth)
        panel.view = soak(n_gpus=4, n=60)
        await pilot.pause()
        panel.view = soak(n_gpus=2, n=60, leak_on=9, selected=0)
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert len(app.query(GpuGrowthRow)) == 2
        assert "no leak flagged" in lines[0]
        assert line_with(lines[1:], "GPU0 ").startswith("▶")
        assert not any("GPU3 " in line for line in lines)


async def test_equal_view_is_not_replotted() -> None:
    app = GrowthApp()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(MemoryGrowth)
        panel.view = soak(n=600)
        await pilot.pause()
        await pilot.pause()
        plot = app.query_one(GrowthPlot)
        calls = 0
        original = plot._replot

        def counting() -> None:
            nonlocal calls
            calls += 1
            original()

        plot._replot = counting  # type: ignore[method-assign]
        panel.view = soak(n=600)
        await pilot.pause()
        assert calls == 0
        panel.view = soak(n=600, leak_on=5)
        await pilot.pause()
        assert calls == 1


@pytest.mark.parametrize("theme", [t.name for t in THEMES])
async def test_line_colours_follow_every_theme(theme: str) -> None:
    app = GrowthApp()
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one(MemoryGrowth).view = soak(n=300)
        await pilot.pause()
        app.theme = theme
        await pilot.pause()
        await pilot.pause()
        plot = app.query_one(GrowthPlot)
        variables = app.theme_variables
        line, leak, selected = (Style.parse(s).color for s in plot._styles_key)
        for got, name in ((line, "chart-low"), (leak, "mem-rising"), (selected, "chart-high")):
            assert got is not None
            assert Color.from_rich_color(got) == Color.parse(variables[name]), name


async def test_render_time_8_gpus_3600_points() -> None:
    app = GrowthApp()
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(MemoryGrowth)
        views = [soak(n=3600, leak_on=k % 8) for k in range(3)]
        panel.view = views[0]
        await pilot.pause()
        plot = app.query_one(GrowthPlot)
        panel.styles.height = 30
        await pilot.pause()
        t0 = time.perf_counter()
        for v in views[1:]:
            plot.show(v.gpus, v.selected_gpu)
            plot._render_plot()
        ms = (time.perf_counter() - t0) * 1000 / (len(views) - 1)
        print(f"\nmemory growth chart, 8 GPUs x 3600 points at {plot.size}: {ms:.1f} ms/replot")
        assert plot.display


async def test_with_no_leak_flagged_the_panel_is_its_rows_not_a_screenful() -> None:
    """Nothing rising: no chart, the panel shrinks to title, header, eight rows and a few
    process lines (it took ~35 rows of a 50-row terminal before, issue #19)."""
    app = GrowthApp()
    async with app.run_test(size=(160, 48)) as pilot:
        panel = app.query_one(MemoryGrowth)
        panel.view = soak(leak_on=-1, procs=6)
        await pilot.pause()
        await pilot.pause()
        assert panel.has_class("-quiet")
        assert not app.query_one(GrowthPlot).display
        assert panel.outer_size.height <= 14, panel.outer_size
        lines = screen_lines(app)
        line_with(lines, "no leak flagged")
        for g in range(8):
            line_with(lines, f"GPU{g} ")
        # a leak flagged: the chart comes back and the panel takes its room
        panel.view = soak(procs=6)
        await pilot.pause()
        await pilot.pause()
        assert not panel.has_class("-quiet") and app.query_one(GrowthPlot).display
        assert panel.outer_size.height > 14


async def test_row_trends_share_one_scale_so_noise_stays_flat() -> None:
    """±20 MiB of noise on steady GPUs is drawn flat; the GPU growing 1,080 MiB/h rises
    to the top of the same scale (a row scaled to its own min/max drew noise as a cliff)."""
    view = soak(procs=2)
    assert view.trend_span >= 1080.0
    app = GrowthApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.query_one(MemoryGrowth).view = view
        await pilot.pause()
        await pilot.pause()
        for row in app.query(GpuGrowthRow):
            cells = str(row.query_one(ScaledHistory).render())
            assert cells, row.index
            if row.index == 3:
                assert cells[-1] in "▇█" and cells[0] in "▁▂", cells
            else:
                assert set(cells) <= set("▁▂"), (row.index, cells)
