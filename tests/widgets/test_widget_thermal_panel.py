"""Thermals and power panel: throttled GPUs say so in words, bars against each board's limit."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.app import ComposeResult

from probes.analysis.judge import TempLevel, temp_level
from tests.support.screens import line_with, screen_lines
from tests.support.widget_app import ThemedApp
from themes import THEMES
from widgets.thermal_panel import (
    BAR_CELLS,
    GpuThermal,
    TempHistory,
    ThermalPanel,
    ThermalRow,
    ThermalView,
    bar,
    gpu_line,
    history_colour,
    history_text,
    reasons_line,
    summary,
)


class ThermalApp(ThemedApp):
    """Just the panel, styled and themed as the console styles it."""

    def compose(self) -> ComposeResult:
        yield ThermalPanel()


def gpu(index: int, *, temp: float | None = 61.0, reasons: tuple[str, ...] = (),
        power: float | None = 412.0, clock: float | None = 1980.0,
        slowdown: float | None = 90.0) -> GpuThermal:
    # what the view builder hands over: the core's verdicts (here: every listed reason
    # but idle and application clocks throttles, as the core counts the NVML names)
    slowing = tuple(r for r in reasons if r not in ("GPU idle", "Applications clocks setting"))
    return GpuThermal(index, temp, slowdown, 70.0, power, 700.0, clock, 1980.0, reasons,
                      tuple(55.0 + (i % 9) for i in range(120)), throttled=bool(slowing),
                      throttling_reasons=slowing, temp_level=temp_level(temp, slowdown),
                      mem_temp_level=temp_level(70.0, None))


HOT = ("SW thermal slowdown", "HW power brake")


def rack(n: int = 8, throttled: tuple[int, ...] = (2, 5)) -> ThermalView:
    return ThermalView(tuple(
        gpu(g, temp=88.0, reasons=HOT, power=699.0, clock=1410.0) if g in throttled
        else gpu(g, temp=60.0 + g) for g in range(n)))


# ---- pure ------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "top", "text"), [
    (0.0, 100.0, "·" * 8), (100.0, 100.0, "█" * 8), (150.0, 100.0, "█" * 8),
    (50.0, 100.0, "████····"), (-5.0, 100.0, "·" * 8), (1.0, 0.0, "·" * 8),
])
def test_bar(value: float, top: float, text: str) -> None:
    assert bar(value, top) == text
    assert len(bar(value, top)) == BAR_CELLS


def test_bar_has_eighths() -> None:
    assert bar(53.0, 100.0) == "████▎···"


def test_temperature_colour_is_the_cores_level() -> None:
    hot = gpu(0, temp=86.0, slowdown=90.0)
    assert hot.temp_level is TempLevel.HOT and "gpu-hot" in repr(gpu_line(hot).spans)
    cool = gpu(1, temp=80.0, slowdown=105.0)
    assert cool.temp_level is TempLevel.OK and "gpu-hot" not in repr(gpu_line(cool).spans)


def test_the_mark_is_the_cores_verdict() -> None:
    """The panel shows what it is given: no reason is judged here."""
    told = GpuThermal(0, 60.0, 90.0, None, None, None, None, None,
                      reasons=("SW power cap",), throttled=False)
    assert "THROTTLED" not in gpu_line(told).plain
    line = reasons_line(told)
    assert line is not None and "clock-throttled" not in repr(line.spans)


def test_throttled_line_has_glyph_word_and_numbers() -> None:
    g = gpu(2, temp=88.0, reasons=HOT, power=699.0, clock=1410.0)
    text = gpu_line(g).plain
    assert text.startswith("GPU2 ↓ THROTTLED")
    assert "88°C" in text and " 90 " in text
    assert "699/700 W" in text and "1410/1980 MHz" in text
    assert "clock-throttled" in repr(gpu_line(g).spans)
    ok = gpu_line(gpu(0)).plain
    assert ok.startswith("GPU0 ✓ ok") and "THROTTLED" not in ok
    assert len(ok) == len(text) <= 78
    assert "fan" not in ok  # the agent samples no fan: data-centre GPUs are chassis-cooled


def test_missing_readings_show_dashes() -> None:
    g = GpuThermal(0, None, None, None, None, None, None, None)
    text = gpu_line(g).plain
    assert "–/– W" in text and "–/– MHz" in text and "mem     –" in text
    assert reasons_line(g) is None


def test_reasons_line_names_them() -> None:
    line = reasons_line(gpu(1, reasons=("GPU idle", "SW thermal slowdown")))
    assert line is not None
    assert line.plain.strip() == "└ GPU idle, SW thermal slowdown"


def test_summary() -> None:
    assert summary(ThermalView()).plain == "Thermals and power"
    assert "✓ no throttling" in summary(rack(throttled=())).plain
    assert "↓ 2 throttled: GPU2, GPU5" in summary(rack()).plain


# ---- mounted ---------------------------------------------------------------------------


async def test_empty_state() -> None:
    app = ThermalApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        assert "Thermals and power" in lines[0]
        line_with(lines, "no thermal data yet")


async def test_80x24_every_gpu_and_reasons_visible() -> None:
    app = ThermalApp()
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one(ThermalPanel).view = rack()
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert "↓ 2 throttled: GPU2, GPU5" in lines[0]
        for g in range(8):
            line_with(lines, f"GPU{g} ")
        hot = line_with(lines[1:], "GPU2 ")
        assert "↓ THROTTLED" in hot and "1410/1980 MHz" in hot
        below = lines[lines.index(hot) + 1]
        assert "SW thermal slowdown, HW power brake" in below
        assert sum("THROTTLED" in line for line in lines) == 2
        assert app.query_one(ThermalPanel).has_class("-narrow")
        assert not any(s.display for s in app.query(TempHistory))


async def test_78x14_scrolls_rather_than_squashes() -> None:
    app = ThermalApp()
    async with app.run_test(size=(78, 14)) as pilot:
        app.query_one(ThermalPanel).view = rack(throttled=(0, 1, 2, 3, 4, 5, 6, 7))
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert "↓ 8 throttled" in lines[0]
        assert line_with(lines, "GPU0 ").startswith(" GPU0 ↓ THROTTLED")
        assert len(lines) == 14


async def test_160x48_has_history_sparklines() -> None:
    app = ThermalApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.query_one(ThermalPanel).view = rack()
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert not app.query_one(ThermalPanel).has_class("-narrow")
        sparks = list(app.query(TempHistory))
        assert len(sparks) == 8 and all(s.display and s.size.width > 40 for s in sparks)
        row = line_with(lines[1:], "GPU0 ")
        assert any(ch in "▁▂▃▄▅▆▇█" for ch in row[75:])
        starts = {s.region.x for s in sparks}
        assert len(starts) == 1, "history columns line up"


async def test_rows_update_in_place_and_follow_count() -> None:
    app = ThermalApp()
    async with app.run_test(size=(120, 24)) as pilot:
        panel = app.query_one(ThermalPanel)
        panel.view = rack(4, throttled=())
        await pilot.pause()
        first = list(app.query(ThermalRow))
        panel.view = rack(4, throttled=(1,))
        await pilot.pause()
        assert list(app.query(ThermalRow)) == first
        assert first[1].has_class("-throttled") and not first[0].has_class("-throttled")
        panel.view = rack(2, throttled=())
        await pilot.pause()
        await pilot.pause()
        assert len(app.query(ThermalRow)) == 2
        assert not any("THROTTLED" in line for line in screen_lines(app))


@pytest.mark.parametrize("theme", [t.name for t in THEMES])
async def test_every_theme_renders(theme: str) -> None:
    app = ThermalApp()
    async with app.run_test(size=(120, 24)) as pilot:
        app.theme = theme
        app.query_one(ThermalPanel).view = rack()
        await pilot.pause()
        await pilot.pause()
        line_with(screen_lines(app), "↓ THROTTLED")


def test_histories_share_one_scale_and_take_the_verdicts_colour() -> None:
    """A 64-66 °C wobble on healthy GPUs stays a low line in the calm colour; only the
    throttled 90 °C GPU reaches full height, in the throttled colour (review item 10)."""
    wobble = tuple(64.0 + (i % 3) for i in range(60))
    healthy = replace(gpu(0, temp=65.0), temp_points=wobble)
    hot = replace(gpu(5, temp=90.0, reasons=HOT), temp_points=(90.0,) * 60)
    view = ThermalView((healthy, hot))
    lo, hi = view.temp_scale
    assert lo == 64.0 and hi == 90.0
    calm = history_text(healthy.temp_points, view.temp_scale, 30)
    assert calm and set(calm) <= set("▁▂"), calm
    assert set(history_text(hot.temp_points, view.temp_scale, 30)) == {"█"}
    assert history_colour(healthy) == "$chart-low"
    assert history_colour(hot) == "$clock-throttled"
    warm = replace(gpu(1, temp=84.0), temp_level=TempLevel.HOT)
    assert history_colour(warm) == "$gpu-hot"
    # one GPU alone still gets a 10 °C scale: sensor noise is not drawn as a cliff
    alone = ThermalView((healthy,)).temp_scale
    assert alone[1] - alone[0] >= 10.0


async def test_columns_have_headers_and_the_scale_is_named() -> None:
    app = ThermalApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.query_one(ThermalPanel).view = rack()
        await pilot.pause()
        await pilot.pause()
        head = line_with(screen_lines(app), "→ slowdown")
        assert "HBM temp" in head and "power" in head and "SM clock" in head
        assert "temp history, all GPUs" in head
