"""The iostat panel: per-disk figures, the %util bar and saturated mark, and the GPUs'
utilisation strips aligned with the disks' on one time axis."""

from __future__ import annotations

import math

import pytest
from rich.color import Color
from textual.app import App, ComposeResult

from tests.support.screens import panel_lines
from tests.support.widget_app import ThemedApp
from widgets import iostat_panel
from widgets.iostat_panel import (
    COLUMNS,
    RAMP,
    DiskRow,
    IostatPanel,
    IostatView,
    layout,
    number,
    resample,
    resample_marks,
    strip,
    util_bar,
)

WINDOW = 48
"""Points per series in these tests: one a second, fewer than the strip is wide at 160 columns."""


class PanelApp(ThemedApp):
    """The panel alone, styled as the console styles it."""

    def compose(self) -> ComposeResult:
        yield IostatPanel(id="iostat")


def saw(high: float, low: float, period: int = 6, n: int = WINDOW) -> tuple[float, ...]:
    """A data-loading saw-tooth: busy for half a period, then waiting."""
    return tuple(high if i % period < period // 2 else low for i in range(n))


def loader_bound_view() -> IostatView:
    disks = (
        DiskRow("nvme0n1", 3_210.0, 12.0, 410_880.0, 96.0, 2.4, 0.8, 7.9, 99.2,
                saw(100.0, 97.0), saturated=True, util_saturated=(True,) * WINDOW),
        DiskRow("nvme1n1", 1.0, 250.0, 4.0, 32_000.0, 0.1, 3.5, 0.9, 14.0, saw(20.0, 5.0)),
        DiskRow("sda"),
    )
    gpus = tuple((i, saw(98.0, 3.0)) for i in range(8))
    return IostatView(disks, gpus, "1 min")


def row(lines: list[str], name: str) -> str:
    (found,) = [line for line in lines if line.split()[:1] == [name]]
    return found


def theme_colour(app: App[None], name: str) -> Color:
    return Color.parse(app.get_css_variables()[name])


# ---- pure parts ------------------------------------------------------------------------


def test_numbers() -> None:
    assert number(None) == "–" and number(math.nan) == "–"
    assert number(410_880.0) == "410,880" and number(2.44) == "2.4" and number(0.0) == "0.0"


def test_resample_keeps_short_series_and_averages_long_ones() -> None:
    assert resample([1.0, 2.0], 5) == [1.0, 2.0]
    assert resample([0.0, 10.0, 20.0, 30.0], 2) == [5.0, 25.0]
    out = resample([math.nan, math.nan, 50.0, math.nan], 2)
    assert math.isnan(out[0]) and out[1] == 50.0
    assert resample([1.0], 0) == []


def test_marks_follow_the_cells_of_resample() -> None:
    """The core's per-point verdicts, bucketed as the strip buckets the points: a cell is
    marked when at least half of its readings are; a gap is never marked."""
    assert resample_marks([1.0, 2.0], [True, False], 5) == [True, False]
    assert resample_marks([95.0, 50.0, 50.0, 50.0, 99.0, 98.0], [True, False, False, False,
                                                               True, True], 3) \
        == [True, False, True]
    assert resample_marks([math.nan, 95.0], [True, True], 1) == [True]
    assert resample_marks([math.nan], [True], 4) == [False]
    assert resample_marks([95.0, 95.0], [], 4) == [False, False]  # no verdicts: none marked


def test_strip_is_right_aligned_with_gaps_and_full_height_when_saturated() -> None:
    s = strip((0.0, 50.0, math.nan, 100.0), 6, (False, False, False, True))
    assert s.plain == "  ▁▅·█"
    (crit,) = [span for span in s.spans if "sev-critical" in str(span.style)]
    assert s.plain[crit.start:crit.end] == "█"
    assert "sev-critical" not in str(strip((100.0,), 3).spans)


def test_util_bar() -> None:
    assert util_bar(None).plain == "░" * 10
    assert util_bar(42.0).plain == "████░░░░░░"
    assert util_bar(100.0).plain == "█" * 10
    assert "sev-critical" in str(util_bar(95.0, saturated=True).spans)
    assert "sev-critical" not in str(util_bar(95.0).spans)  # only the core's verdict colours


def test_narrow_layout_drops_optional_columns_in_order() -> None:
    wide, wide_strip = layout(158)
    assert [c.key for c in wide] == [c.key for c in COLUMNS]
    assert wide_strip >= 40
    narrow, narrow_strip = layout(78)
    keys = [c.key for c in narrow]
    assert {"name", "r_s", "util", "mark"} <= set(keys)
    assert "wkb_s" not in keys and "rkb_s" not in keys and "bar" not in keys
    assert narrow_strip >= iostat_panel.STRIP_MIN
    assert sum(c.width + 1 for c in narrow) + narrow_strip <= 78


# ---- mounted -------------------------------------------------------------------------


async def test_disks_and_gpu_strips_at_160_columns() -> None:
    app = PanelApp()
    async with app.run_test(size=(160, 30)) as pilot:
        panel = app.query_one(IostatPanel)
        panel.iostat = loader_bound_view()
        await pilot.pause()
        lines = panel_lines(panel)
        assert lines[0].strip() == "iostat · last 1 min"
        for head in ("Device", "r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "aqu-sz",
                     "%util", "GPU util, over 1 min"):
            assert head in lines[1]
        nvme = row(lines, "nvme0n1")
        assert nvme.split()[1:8] == ["3,210", "12.0", "410,880", "96.0", "2.4", "0.8", "7.9"]
        assert "██████████  99 % ▲ saturated" in nvme
        other = row(lines, "nvme1n1")
        assert "14 %" in other and "saturated" not in other and "32,000" in other
        assert row(lines, "sda").split()[1:] == ["–"] * 7 + ["░" * 10, "–"]
        strips = {name: row(lines, name).rstrip()[-WINDOW:]
                  for name in ("nvme0n1", "GPU0", "GPU7")}
        assert strips["nvme0n1"] == "█" * WINDOW  # 97–100 %: pinned
        assert strips["GPU0"] == ("█" * 3 + "▁" * 3) * (WINDOW // 6)  # saw-tooth
        assert strips["GPU7"] == strips["GPU0"]
        start = {name: row(lines, name).rstrip().rindex(strips[name])
                 for name in ("nvme0n1", "GPU0")}
        assert start["nvme0n1"] == start["GPU0"], "disk and GPU strips share the time axis"
        assert "3 %" in row(lines, "GPU0")
        axis = lines[-1]
        assert axis.strip().startswith("−1 min") and axis.rstrip().endswith("now")


async def test_saturation_is_coloured_from_the_theme() -> None:
    app = PanelApp()
    async with app.run_test(size=(160, 30)) as pilot:
        panel = app.query_one(IostatPanel)
        panel.iostat = loader_bound_view()
        await pilot.pause()
        for theme in ("rigwatch-dark", "rigwatch-light"):
            app.theme = theme
            await pilot.pause()
            crit = theme_colour(app, "sev-critical")
            (strip_line,) = [s for s in panel.render_lines(panel.region.reset_offset)
                             if s.text.split()[:1] == ["nvme0n1"]]
            marks = [seg for seg in strip_line if "saturated" in seg.text]
            assert marks and all(seg.style and seg.style.color == crit for seg in marks)
            (gpu_line,) = [s for s in panel.render_lines(panel.region.reset_offset)
                           if s.text.split()[:1] == ["GPU0"]]
            bars = [seg for seg in gpu_line if seg.text and seg.text[0] in RAMP]
            assert bars and all(seg.style and seg.style.color == theme_colour(app, "chart-high")
                                for seg in bars)


async def test_80_columns_keep_the_saturated_word_and_the_strips() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(IostatPanel)
        panel.iostat = loader_bound_view()
        await pilot.pause()
        lines = panel_lines(panel)
        assert "rkB/s" not in lines[1] and "wkB/s" not in lines[1]
        nvme = row(lines, "nvme0n1")
        assert "99 % ▲ saturated" in nvme
        assert nvme.rstrip()[-10:] == "█" * 10
        gpu0 = row(lines, "GPU0").rstrip()
        assert set(gpu0.split()[-1]) <= set(RAMP)
        assert len(gpu0.split()[-1]) >= iostat_panel.STRIP_MIN
        assert all(len(line.rstrip()) <= panel.content_size.width + 1 for line in lines)
        assert len(lines) == 2 + 3 + 8 + 1


async def test_empty_states() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(IostatPanel)
        await pilot.pause()
        assert [line.strip() for line in panel_lines(panel)] == [
            "iostat", "no disk statistics reported"]
        panel.iostat = IostatView((), ((0, (50.0, 60.0)),), "10 min")
        await pilot.pause()
        lines = panel_lines(panel)
        assert any("no block devices reported" in line for line in lines)
        assert row(lines, "GPU0").rstrip().endswith("▅▅")
        panel.iostat = IostatView((DiskRow("md0", util_points=()),), ((1, ()),), "")
        await pilot.pause()
        lines = panel_lines(panel)
        assert row(lines, "GPU1").split() == ["GPU1", "–"]
        assert lines[-1].strip().startswith("older")


async def test_equal_view_is_not_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = iostat_panel.render_iostat

    def counting(view: IostatView | None, width: int) -> object:
        calls.append(width)
        return real(view, width)

    monkeypatch.setattr(iostat_panel, "render_iostat", counting)
    app = PanelApp()
    async with app.run_test(size=(160, 30)) as pilot:
        panel = app.query_one(IostatPanel)
        panel.iostat = loader_bound_view()
        await pilot.pause()
        before = len(calls)
        for _ in range(3):
            panel.iostat = loader_bound_view()
            await pilot.pause()
        assert len(calls) == before
        panel.iostat = IostatView(loader_bound_view().disks[:1], (), "1 min")
        await pilot.pause()
        assert len(calls) > before
