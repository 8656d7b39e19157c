"""The fleet wall: glyphs that carry the level without colour, grouping, cursor, and cost."""

from __future__ import annotations

import math
import time
from pathlib import PurePath
from typing import ClassVar

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.color import Color

from probes.analysis.judge import GpuVerdict, TempLevel
from tests.support.paths import REPO
from themes import DEFAULT_THEME, THEMES, fallback_variables
from widgets._wall_layout import (
    HOST_GLYPH,
    RAMP,
    WallGpu,
    WallHost,
    WallView,
    build_layout,
    cell,
    group_label,
    legend_lines,
    legend_text,
    level,
    status_parts,
)
from widgets.fleet_wall import FleetWall


class WallApp(App[None]):
    """Just the wall, with the app's themes and both stylesheets."""

    CSS_PATH: ClassVar[list[str | PurePath]] = [
        REPO / "themes" / "rigwatch.tcss", REPO / "themes" / "fleet_wall.tcss"]

    def __init__(self) -> None:
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME
        self.selected: list[tuple[str, int | None]] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return fallback_variables()

    def compose(self) -> ComposeResult:
        yield FleetWall()

    def on_fleet_wall_host_selected(self, message: FleetWall.HostSelected) -> None:
        assert message.control is self.query_one(FleetWall)
        self.selected.append((message.host, message.gpu))


def gpus(*values: float | None, state: GpuVerdict = GpuVerdict.OK) -> tuple[WallGpu, ...]:
    return tuple(WallGpu(v, state) for v in values)


def host(name: str, tag: str = "rack-a", status: str = "streaming",
         values: tuple[float | None, ...] = (10, 20, 30, 40, 50, 60, 70, 80),
         worst: str | None = None) -> WallHost:
    return WallHost(name, tag, status, gpus(*values), worst)


def fleet(n: int, groups: int = 4, metric: str = "mem") -> WallView:
    hosts = []
    for i in range(n):
        status = "down" if i % 97 == 0 else "stale" if i % 89 == 0 else "streaming"
        cells = tuple(WallGpu(float((i * 7 + g * 13) % 101),
                              GpuVerdict.LOST if (i + g) % 53 == 0 else GpuVerdict.OK)
                      for g in range(8))
        hosts.append(WallHost(f"node-{i:04d}", f"rack-{chr(97 + i % groups)}", status, cells,
                              "critical" if i % 31 == 0 else None))
    return WallView(metric, tuple(hosts))


# ---- pure: glyphs, states, legend, grouping ----------------------------------------------


@pytest.mark.parametrize(("value", "glyph"), [
    (0, "▁"), (5, "▁"), (12.4, "▁"), (12.5, "▂"), (49, "▄"), (50, "▅"), (87.4, "▇"),
    (87.5, "█"), (100, "█"), (-3, "▁"), (140, "█"),
])
def test_memory_glyph_rises_with_the_value(value: float, glyph: str) -> None:
    assert cell("mem", "streaming", WallGpu(value))[0] == glyph


def test_temperature_uses_its_own_scale_and_marks_warm_and_hot() -> None:
    assert level("temp", 30) == 0 and level("temp", 20) == 0 and level("temp", 95) == 7
    assert cell("temp", "streaming", WallGpu(60))[1].startswith("level-")
    # hot and warm are the core's levels (near each board's own slowdown), not the value's
    assert cell("temp", "streaming", WallGpu(76, temp=TempLevel.WARM)) == ("▇", "warm")
    assert cell("temp", "streaming", WallGpu(88, temp=TempLevel.HOT)) == ("█", "hot")
    assert cell("temp", "streaming", WallGpu(88, temp=TempLevel.OK)) == ("█", "level-7")
    # 88 % memory is not hot; only its scale level shows
    assert cell("mem", "streaming", WallGpu(88)) == ("█", "level-7")
    # high memory is the core's verdict (``mem_high_pct``), not the value's
    assert cell("mem", "streaming", WallGpu(96, mem_high=True)) == ("█", "mem-high")
    assert cell("mem", "streaming", WallGpu(96)) == ("█", "level-7")
    assert cell("util", "streaming", WallGpu(96, mem_high=True)) == ("█", "level-7")


def test_glyphs_are_monotonic_in_the_value() -> None:
    seen = [RAMP.index(cell("util", "streaming", WallGpu(float(v)))[0]) for v in range(101)]
    assert seen == sorted(seen) and seen[0] == 0 and seen[-1] == len(RAMP) - 1
    assert len(set(seen)) == len(RAMP)


@pytest.mark.parametrize(("status", "gpu", "expected"), [
    ("streaming", WallGpu(50, GpuVerdict.LOST), ("✗", "lost")),
    ("streaming", WallGpu(None, GpuVerdict.UNRESPONSIVE), ("?", "unresponsive")),
    ("streaming", WallGpu(None), ("-", "none")),
    ("streaming", WallGpu(math.nan), ("-", "none")),
    ("stale", WallGpu(50), ("~", "stale")),
    ("down", WallGpu(50), ("×", "down")),
    ("connecting", WallGpu(None), ("·", "connecting")),
    ("down", WallGpu(50, GpuVerdict.LOST), ("×", "down")),
])
def test_special_states_have_their_own_glyph(status: str, gpu: WallGpu,
                                             expected: tuple[str, str]) -> None:
    assert cell("mem", status, gpu) == expected


def test_status_metric_shows_the_gpu_state_not_the_value() -> None:
    assert cell("status", "streaming", WallGpu(99, GpuVerdict.OK)) == ("•", "ok")
    assert cell("status", "streaming", WallGpu(99, GpuVerdict.THROTTLED)) == ("↓", "throttled")
    assert cell("status", "streaming", WallGpu(99, GpuVerdict.LEAKING)) == ("↑", "leaking")
    assert cell("status", "streaming", WallGpu(None, GpuVerdict.LOST)) == ("✗", "lost")
    assert cell("status", "streaming", WallGpu(None, GpuVerdict.HOT)) == ("▲", "hot")
    # throttling is not a missing reading: memory still shows the level
    assert cell("mem", "streaming", WallGpu(99, GpuVerdict.THROTTLED))[0] == "█"


def test_legend_explains_the_scale_and_every_glyph() -> None:
    mem = legend_text("mem")
    assert "memory used " + RAMP + " 0–100 %" in mem
    assert "≥95 % high" in mem
    assert "≥90 % high" in legend_text("mem", mem_high_pct=90.0)  # the operator's limit
    for text in ("✗ lost", "? unresponsive", "~ stale", "× down", "· connecting",
                 "! critical", "* warning", "i info", "- no data"):
        assert text in mem, text
    temp = legend_text("temp")
    assert "temperature " + RAMP + " 30–90 °C" in temp and "▇ warm ≤15" in temp
    assert "█ hot ≤5 °C below slowdown" in temp
    util = legend_text("util")
    assert "utilisation" in util and "high" not in util
    status = legend_text("status")
    assert RAMP not in status
    for text in ("• ok", "↓ throttled", "↑ leaking", "✗ lost", "? unresponsive", "× down"):
        assert text in status, text


def test_legend_wraps_by_whole_entries_at_80_columns() -> None:
    lines = ["".join(t for t, _ in line) for line in legend_lines("temp", 80)]
    assert 2 <= len(lines) <= 3
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith("temperature ▁") for line in lines)
    assert not any(line.startswith(" ") or line.endswith(" ") for line in lines)


def test_group_label_counts_hosts_down_and_stale() -> None:
    hosts = [host("a"), host("b", status="down"), host("c", status="down"),
             host("d", status="stale")]
    assert group_label("rack-a", hosts) == "rack-a (4 hosts, 2 down, 1 stale)"
    assert group_label("rack-b", [host("x")]) == "rack-b (1 host)"
    assert group_label("", [host("x", tag="")]) == "untagged (1 host)"


def test_layout_sorts_by_tag_then_name_and_packs_rows() -> None:
    view = WallView("mem", (host("n3", "rack-b"), host("n2", "rack-a"), host("n1", "rack-b"),
                            host("n9", "rack-a", status="down"), host("n0", "rack-a")))
    lay = build_layout(view, 9 * 2)
    assert [h.name for h in lay.hosts] == ["n0", "n2", "n9", "n1", "n3"]
    assert lay.per_row == 2 and lay.slots == 8 and lay.host_width == 9
    labels = [r.label for r in lay.rows]
    assert labels == ["rack-a (3 hosts, 1 down)", None, None, "rack-b (2 hosts)", None]
    assert [(r.start, r.stop) for r in lay.rows if r.label is None] == [(0, 2), (2, 3), (3, 5)]
    assert lay.host_row == (1, 1, 2, 4, 4)
    assert lay.host_at(1, 0) == (0, None)
    assert lay.host_at(1, 9 + 1) == (1, 0)
    assert lay.host_at(1, 9 + 8) == (1, 7)
    assert lay.host_at(2, 9) is None
    assert lay.host_at(0, 0) is None


def test_slots_follow_the_largest_host() -> None:
    view = WallView("mem", (host("a", values=(1, 2)), host("b", values=(1, 2, 3, 4))))
    lay = build_layout(view, 40)
    assert lay.slots == 4 and lay.per_row == 8
    assert build_layout(WallView(), 40).slots == 8


def test_status_line_names_the_host_and_its_figures() -> None:
    h = WallHost("gpu-07", "rack-a", "streaming",
                 (WallGpu(40), WallGpu(90), WallGpu(None, GpuVerdict.LOST),
                  WallGpu(50, GpuVerdict.THROTTLED)),
                 "critical")
    text = "".join(t for t, _ in status_parts("mem", h, 1, "host 3/9"))
    assert "gpu-07" in text and "rack-a" in text and "streaming" in text
    assert "! critical" in text and "GPU 1: mem 90 %" in text
    assert "4 GPUs, mem max 90 % avg 60 %, 1 lost, 1 throttled" in text
    assert "host 3/9" in text
    text = "".join(t for t, _ in status_parts("temp", h, 3))
    assert "GPU 3: temp 50 °C (throttled)" in text
    down = WallHost("gpu-08", "rack-a", "down", (WallGpu(40),))
    text = "".join(t for t, _ in status_parts("mem", down, 0))
    assert "down" in text and "GPU 0: × down" in text and "max" not in text
    assert "".join(t for t, _ in status_parts("mem", None, None)) == "no host selected"


# ---- mounted: rendering, cursor, messages ------------------------------------------------


async def test_rendered_wall_shows_labels_glyphs_marks_and_status() -> None:
    app = WallApp()
    view = WallView("mem", (
        host("b-1", "rack-b", values=(0, 100, None, 50)),
        host("a-2", "rack-a", status="down", values=(1, 1, 1, 1)),
        host("a-1", "rack-a", worst="critical", values=(96, 5, 5, 5)),
        WallHost("a-3", "rack-a", "connecting"),
        host("a-4", "rack-a", status="stale", worst="warning", values=(1, 1, 1, 1)),
    ))
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = view
        await pilot.pause()
        lines = wall.text_lines()
        assert lines[0].startswith("memory used ▁▂▃▄▅▆▇█ 0–100 %")
        header = wall._header_height()
        assert header == len(legend_lines("mem", 79)) == 2
        grid = [line.rstrip() for line in lines[header:-1]]
        assert "rack-a (4 hosts, 1 down, 1 stale)" in grid
        assert "rack-b (1 host)" in grid
        rows = [line for line in grid if line and not line.startswith("rack-")]
        # each host is its mark (worst finding, or a blank) then its cells
        assert rows[0] == "!█▁▁▁ ×××× ····*~~~~"
        assert rows[1] == " ▁█-▅"
        assert lines[-1].startswith("▶ a-1  rack-a  streaming  ! critical")
        # the screen itself shows the same thing
        svg = app.export_screenshot()
        assert "rack-b" in svg and "a-1" in svg


async def test_cursor_is_drawn_reversed_and_the_host_underlined() -> None:
    app = WallApp()
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = WallView("util", (host("a"), host("b")))
        await pilot.pause()
        wall.move_cursor("b", 2)
        await pilot.pause()
        row = wall._grid_strip(1)
        cells = [(seg.text, seg.style) for seg in row for _ in seg.text]
        b_cell = cells[9 + 1 + 2]
        assert b_cell[0] == "▃"
        assert b_cell[1] is not None and b_cell[1].reverse
        others = [style for i, (_, style) in enumerate(cells[:18]) if i != 12]
        assert not any(s is not None and s.reverse for s in others)
        underlined = [c[1] for c in cells[10:18] if c[1] != b_cell[1]]
        assert all(s is not None and s.underline for s in underlined)
        assert not any(s is not None and s.underline for s in [c[1] for c in cells[:9]])


async def test_keys_move_by_gpu_host_and_row_and_enter_posts_selected() -> None:
    app = WallApp()
    # 80 columns less the scrollbar: 8 hosts of 9 cells per row
    view = WallView("mem", tuple(host(f"n{i:02d}") for i in range(20)))
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = view
        wall.focus()
        await pilot.pause()
        assert wall.wall_layout.per_row == 8
        assert cursor_of(wall) == ("n00", None)
        await pilot.press("right")
        assert cursor_of(wall) == ("n00", 0)
        await pilot.press("l", "l")
        assert cursor_of(wall) == ("n00", 2)
        await pilot.press("left", "h", "h")
        assert cursor_of(wall) == ("n00", None)
        await pilot.press("h")
        assert cursor_of(wall) == ("n00", None), "stays at the first host's mark"
        for _ in range(9):
            await pilot.press("right")
        assert cursor_of(wall) == ("n01", None), "past the last GPU into the next host"
        await pilot.press("left")
        assert cursor_of(wall) == ("n00", 7)
        await pilot.press("j")
        assert cursor_of(wall) == ("n08", 7)
        await pilot.press(*["L"] * 7)
        assert cursor_of(wall) == ("n15", 7)
        await pilot.press("down")
        assert cursor_of(wall) == ("n19", 7), "short last row: the last host in it"
        await pilot.press("down")
        assert cursor_of(wall) == ("n19", 7)
        await pilot.press("up", "k")
        assert cursor_of(wall) == ("n03", 7)
        await pilot.press("L", "L")
        assert cursor_of(wall) == ("n05", 7)
        await pilot.press("H")
        assert cursor_of(wall) == ("n04", 7)
        await pilot.press("end")
        assert cursor_of(wall) == ("n19", 7)
        await pilot.press("home")
        assert cursor_of(wall) == ("n00", 7)
        assert "n00" in wall.text_lines()[-1] and "GPU 7: mem 80 %" in wall.text_lines()[-1]
        await pilot.press("enter")
        await pilot.press("right")  # into n01's mark
        await pilot.press("enter")
        await pilot.pause()
        assert app.selected == [("n00", 7), ("n01", None)]


async def test_click_selects_the_cell_and_a_second_click_opens_it() -> None:
    app = WallApp()
    view = WallView("mem", tuple(host(f"n{i:02d}") for i in range(20)))
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = view
        await pilot.pause()
        header = len(legend_lines("mem", wall.wall_layout.per_row * 9 + 8))
        assert wall._header_height() == header
        # grid row 0 is the label; row 1 holds n00..n07; x = host 2, GPU 3
        await pilot.click(FleetWall, offset=(2 * 9 + 1 + 3, header + 1))
        assert cursor_of(wall) == ("n02", 3)
        assert app.selected == []
        await pilot.click(FleetWall, offset=(2 * 9 + 1 + 3, header + 1))
        await pilot.pause()
        assert app.selected == [("n02", 3)]
        await pilot.click(FleetWall, offset=(9, header + 2))
        assert cursor_of(wall) == ("n09", None)
        await pilot.click(FleetWall, offset=(3, header))  # the group label: nothing
        assert cursor_of(wall) == ("n09", None)


async def test_cursor_scrolls_into_view_and_survives_new_views() -> None:
    app = WallApp()
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = fleet(400)
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        assert cursor_of(wall) == ("node-0399", None)
        row = wall.wall_layout.host_row[len(wall.wall_layout.hosts) - 1]
        top = round(wall.scroll_y)
        assert top <= row < top + wall._visible_rows()
        visible = [wall.render_line(y).text for y in range(wall.size.height)]
        assert any("!" in line or "▁" in line for line in visible[wall._header_height():-1])
        assert visible[-1].startswith("▶ node-0399")
        # a new view where the cursor's host moved keeps the cursor on it
        hosts = wall.view.hosts
        wall.view = WallView("temp", (WallHost("aaa", "rack-0", "streaming", gpus(50)), *hosts))
        await pilot.pause()
        assert cursor_of(wall) == ("node-0399", None)
        assert wall.text_lines()[0].startswith("temperature")
        # and when its host disappears it stays nearby rather than jumping to the top
        wall.view = WallView("temp", tuple(h for h in wall.view.hosts if h.name != "node-0399"))
        await pilot.pause()
        cursor = wall.cursor
        assert cursor is not None and cursor[0] == "node-0395"  # the previous host of rack-d


async def test_empty_wall_says_so_and_enter_posts_nothing() -> None:
    app = WallApp()
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        await pilot.pause()
        lines = wall.text_lines()
        assert lines[-2].strip() == "no hosts yet"
        assert lines[-1].strip() == "no host selected"
        assert wall.cursor is None
        await pilot.press("enter", "down", "right", "end")
        await pilot.click(FleetWall, offset=(2, wall._header_height()))
        await pilot.pause()
        assert app.selected == []
        wall.view = WallView("mem", (host("a"),))
        await pilot.pause()
        assert cursor_of(wall) == ("a", None)
        wall.view = WallView("mem", ())
        await pilot.pause()
        assert wall.cursor is None and "no hosts yet" in wall.text_lines()[-2]


async def test_equal_view_does_no_work_and_unchanged_hosts_reuse_their_cells() -> None:
    app = WallApp()
    async with app.run_test(size=(120, 40)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = fleet(200)
        await pilot.pause()
        for y in range(wall.size.height):
            wall.render_line(y)
        builds, strips = wall.layout_builds, dict(wall._strips)
        wall.view = fleet(200)  # a new but equal object, as the screen makes every second
        await pilot.pause()
        assert wall.layout_builds == builds
        assert wall._strips == strips and all(wall._strips[k] is v for k, v in strips.items())
        # one host changes: a relayout, but only its row and its group's label (one more
        # down) are drawn again; every other row on screen keeps its strip (issue 38)
        old = wall.view.hosts
        changed = (WallHost(old[5].name, old[5].tag, "down", old[5].gpus), *old[:5], *old[6:])
        wall.view = WallView("mem", changed)
        await pilot.pause()
        assert wall.layout_builds == builds + 1
        lay = wall.wall_layout
        row = lay.host_row[next(i for i, h in enumerate(lay.hosts) if h.name == old[5].name)]
        label = max(r for r in range(row) if lay.rows[r].label is not None)
        for y in range(wall.size.height):
            wall.render_line(y)
        redrawn = {r for r in strips if wall._strips.get(r) is not strips[r]}
        assert redrawn == {row, label} and len(strips) > 30, (redrawn, row, label)
        # a metric change draws every row again
        strips = {r: v for r, v in wall._strips.items() if r < len(lay.rows)}
        wall.view = WallView("util", changed)
        await pilot.pause()
        assert strips and not any(wall._strips.get(r) is v for r, v in strips.items())


def cursor_of(wall: FleetWall) -> tuple[str, int | None] | None:
    """Read through a call so the type checker does not narrow between key presses."""
    return wall.cursor


def _colour(style: Style | None) -> Color:
    assert style is not None and style.color is not None
    return Color.from_rich_color(style.color)


async def test_colours_come_from_the_theme_and_follow_a_theme_switch() -> None:
    app = WallApp()
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        hot = (WallGpu(30, temp=TempLevel.OK), WallGpu(89, temp=TempLevel.HOT))
        wall.view = WallView("temp", (WallHost("a", "rack-a", "streaming", hot),
                                      WallHost("b", "rack-a", "streaming", hot)))
        wall.move_cursor("b")
        await pilot.pause()
        for theme in ("rigwatch-dark", "rigwatch-light"):
            app.theme = theme
            await pilot.pause()
            variables = app.theme_variables
            segs = [s for s in wall._grid_strip(1) if s.text.strip()]
            low, hot = segs[0], segs[1]
            assert low.text == "▁" and hot.text == "█"
            assert _colour(low.style) == Color.parse(variables["chart-low"])
            assert _colour(hot.style) == Color.parse(variables["gpu-hot"])
            assert _colour(wall._style("level-7")) == Color.parse(variables["chart-high"])


async def test_narrow_terminal_still_shows_legend_rows_and_status() -> None:
    app = WallApp()
    async with app.run_test(size=(40, 12)) as pilot:
        wall = app.query_one(FleetWall)
        wall.view = fleet(30)
        await pilot.pause()
        assert wall.wall_layout.per_row == 4  # 39 usable columns
        visible = [wall.render_line(y).text for y in range(wall.size.height)]
        assert visible[0].startswith("memory used")
        assert all(len(line) == 39 for line in visible)
        assert visible[-1].startswith("▶ node-0000")
        assert any(line.startswith("rack-a (") for line in visible)


async def test_full_screen_render_of_1000_hosts_by_8_gpus() -> None:
    app = WallApp()
    async with app.run_test(size=(200, 50)) as pilot:
        wall = app.query_one(FleetWall)
        view = fleet(1000, groups=2)
        start = time.perf_counter()
        wall.view = view
        await pilot.pause()
        first = time.perf_counter() - start
        lay = wall.wall_layout
        assert lay.per_row == 22 and len(lay.hosts) == 1000
        grid_rows = len(lay.rows)
        wall._drop_strips()
        start = time.perf_counter()
        lines = [wall.render_line(y) for y in range(wall.size.height)]
        cold = time.perf_counter() - start
        start = time.perf_counter()
        for y in range(wall.size.height):
            wall.render_line(y)
        warm = time.perf_counter() - start
        start = time.perf_counter()
        changed = WallView("mem", (*view.hosts[:-1], host("node-0999", "rack-b", "down")))
        wall.view = changed
        for y in range(wall.size.height):
            wall.render_line(y)
        recompute = time.perf_counter() - start
        print(f"\nfleet wall 1000x8 at 200x50: {grid_rows} grid rows; "
              f"set+paint {first * 1e3:.1f} ms, "
              f"cold full-screen render {cold * 1e3:.1f} ms, cached {warm * 1e3:.2f} ms, "
              f"one host changed {recompute * 1e3:.1f} ms")
        texts = [s.text for s in lines]
        assert texts[0].startswith("memory used")
        assert texts[1].startswith("rack-a (500 hosts")
        assert sum(t.count("▁") + t.count("×") for t in texts) > 1000
        assert all(s.cell_length == 199 for s in lines)
        # every host is somewhere on the wall
        assert sum(r.stop - r.start for r in lay.rows if r.label is None) == 1000
        assert HOST_GLYPH["down"] * 8 in "".join(wall.text_lines())


class PresetApp(WallApp):
    """The screen may hand the wall its first view before it is mounted."""

    def compose(self) -> ComposeResult:
        wall = FleetWall()
        wall.view = WallView("util", (host("early", values=(99,)),))
        yield wall


async def test_a_view_set_before_mount_is_drawn() -> None:
    app = PresetApp()
    async with app.run_test(size=(80, 24)) as pilot:
        wall = app.query_one(FleetWall)
        await pilot.pause()
        lines = wall.text_lines()
        assert lines[0].startswith("utilisation")
        assert "rack-a (1 host)" in lines[wall._header_height()]
        assert lines[wall._header_height() + 1].startswith(" █")
        assert cursor_of(wall) == ("early", None)
