"""Plain glyphs for terminals without braille or box drawing, and NO_COLOR."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from probes.analysis.alerts import AlertPolicy
from tests.support.tui_fakes import sim_fleet, wait_until
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.glyphs import ASCII_TABLE, plain_text, wants_ascii
from tui.messages import HostChosen
from tui.screens.host import HostScreen
from widgets.memory_growth import GpuGrowthRow
from widgets.thermal_panel import ThermalPanel

ALLOWED: set[str] = set()
"""Nothing: ``--ascii`` is ASCII (``°`` too: ``91 °C`` reads ``  91C``)."""


@pytest.mark.parametrize(("env", "expected"), [
    ({"LANG": "en_US.UTF-8", "TERM": "xterm-256color"}, False),
    ({"LANG": "C.UTF-8"}, False),
    ({"LC_ALL": "de_DE.utf8", "LANG": "C"}, False),
    ({}, False),
    ({"TERM": "linux", "LANG": "en_US.UTF-8"}, True),
    ({"LANG": "C"}, True),
    ({"LANG": "POSIX"}, True),
    ({"LC_CTYPE": "en_US.ISO-8859-1"}, True),
    ({"RIGWATCH_ASCII": "1", "LANG": "en_US.UTF-8"}, True),
    ({"RIGWATCH_ASCII": "0", "TERM": "linux"}, False),
])
def test_plain_glyphs_when_asked_or_when_the_terminal_lacks_them(
        env: dict[str, str], expected: bool) -> None:
    assert wants_ascii(env) is expected


def test_every_mapped_glyph_keeps_its_width() -> None:
    for code, plain in ASCII_TABLE.items():
        assert cell_len(chr(code)) == cell_len(plain) == 1, hex(code)
        assert plain.isascii()
    # a box corner, a braille chart dot, a bar block and a status mark
    assert "┏━┫⠉█✓▶".translate(ASCII_TABLE) == "+-+.#+>"


@pytest.mark.parametrize(("fancy", "plain"), [
    ("91 °C", "  91C"),  # right-aligned columns stay aligned
    ("81°C ██▌", " 81C ###"),
    ("-3 °C", "  -3C"),
    ("hot ≤5 °C below slowdown", "hot <  5C below slowdown"),
    ("GPU6 ✗ lost · host × down", "GPU6 X lost . host x down"),  # lost and down differ
    ("a stray °", "a stray o"),
])
def test_temperatures_and_marks_in_plain_ascii_of_the_same_width(fancy: str,
                                                                 plain: str) -> None:
    assert plain_text(fancy) == plain
    assert cell_len(fancy) == len(plain) and plain.isascii()


def screen_text(app: RigwatchApp) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def _host_screen_text(ascii_glyphs: bool) -> str:
    backend, clock = sim_fleet([("gpu-s01", "leak:3,throttle:5")], minutes=45)
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False),
                                           ascii_glyphs=ascii_glyphs), clock=clock)
    async with app.run_test(size=(160, 50)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: bool(app.fleet.hosts["gpu-s01"].last))
        app.post_message(HostChosen("gpu-s01"))
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and len(app.screen.query(GpuGrowthRow)) == 8
                         and len(app.screen.query_one(ThermalPanel).view.gpus) == 8)
        await pilot.pause()
        return screen_text(app)


async def test_the_host_screen_in_plain_glyphs_keeps_its_words() -> None:
    fancy = await _host_screen_text(False)
    plain = await _host_screen_text(True)
    assert any(0x2801 <= ord(c) <= 0x28FF for c in fancy), "the chart should be braille"
    odd = {c for c in plain if not c.isascii() and c not in ALLOWED}
    assert odd == set(), f"non-ASCII glyphs left: {sorted(odd)}"
    # the words that carry status are untouched
    for words in ("GPU memory growth", "LEAK: GPU3", "sw_thermal_slowdown", "streaming"):
        assert words in fancy and words in plain


def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    backend, clock = sim_fleet([("gpu-s01", "healthy")], minutes=1)
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    assert app.no_color
    names = {type(f).__name__ for f in app.get_line_filters()}
    assert names & {"Monochrome", "NoColor"}
