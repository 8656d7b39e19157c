"""The wall shown by ``w`` is packed at the width it will have (session 11, issue 38).

A hidden wall has no size; the view handed to it as ``w`` shows it was packed at width 0
(a host a row) and again at each resize the screen's layouts brought.  ``FleetWall`` now
packs it at the width it had when last on screen (``_pack_width``).  Here sixty hosts go
through ``w``, ticks on the wall (every host's power moving), ``w`` back, a terminal resized
while the wall is hidden, ``w``, ``m``, cursor moves and ``w`` again: after each key, the
first settled screen and the wall's lines equal those of the code before
(``tests/analysis/fleet_wall_before_s11.py``), and the wall is packed once a ``w`` (after
its first show), not two or three times.  Negative control: a wall that keeps the width it
was last shown at through a resize shows a different screen.  The console's 1 Hz redraw is
stopped, so every redraw is one this test asks for, and toasts are off.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.screen import Screen

from tests.analysis import fleet_wall_before_s11
from tests.support.tui_fakes import T0, TALL, sample, tall_fleet, tall_fleet_shown, wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.screens import fleet as fleet_screen
from tui.screens.fleet import FleetScreen
from widgets.fleet_wall import FleetWall


def _moved(host: str, step: int) -> object:
    """The host's sample at ``step`` with every GPU's memory, temperature and load moved
    (what the wall draws: a view unequal to the last one)."""
    s = sample(host, step)
    k = TALL.index(host)
    return replace(s, gpus=tuple(replace(g, mem_used_mib=9_000.0 * (1 + (3 * i + k + step) % 9),
                                         temp_c=40.0 + (5 * i + k + 7 * step) % 50,
                                         util_pct=float((7 * i + k + 13 * step) % 100))
                                 for i, g in enumerate(s.gpus)))


def _frame(screen: Screen[Any]) -> list[str]:
    """The screen's cells and styles, equal neighbours joined (the wall joins a row's cells
    of one style into one segment since session 13; the terminal shows the same)."""
    return [str([(seg.text, str(seg.style)) for seg in strip.simplify()])
            for strip in screen._compositor.render_strips()]


def _texts(frame: list[str]) -> list[str]:
    import ast
    return [''.join(t for t, _ in ast.literal_eval(x)) for x in frame]


Trace = list[tuple[str, list[str], list[str], object, int]]
FIRST: dict[str, list[str]] = {}
"""Per ``w on`` step of the last run: the first frame painted with the wall shown."""


async def _run(monkeypatch: pytest.MonkeyPatch, wall_class: type[Any]) -> Trace:
    """After each step: its name, the settled screen, the wall's lines, its cursor, and how
    many times the wall was packed during the step."""
    monkeypatch.setattr(fleet_screen, "FleetWall", wall_class)
    backend, clock = tall_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    out: Trace = []
    FIRST.clear()
    armed: list[str] = []
    composite = Screen._compositor_refresh

    def refreshed(screen: Screen[Any]) -> None:
        composite(screen)
        if armed and isinstance(screen, FleetScreen) and screen.query_one(wall_class).display:
            FIRST[armed.pop()] = _frame(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", refreshed)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await tall_fleet_shown(pilot, backend)
        monkeypatch.setattr(app, "refresh_view", lambda: None)
        # no toasts (``m`` says what the wall shows for 2 s: on or off a frame by timing)
        monkeypatch.setattr(app, "notify", lambda *_a, **_k: None)
        wall = screen.query_one(wall_class)

        async def settle() -> list[str]:
            """The screen once it is drawn and two looks 0.05 s apart find it unchanged
            (the footer composed again after a focus change lays the screen out anew)."""
            last: list[str] | None = None
            for _ in range(100):
                await pilot.pause()
                await wait_until(pilot, lambda: not screen._layout_required
                                 and not screen._dirty_widgets and not wall._repaint_required)
                await pilot.pause(0.05)
                frame = _frame(screen)
                if frame == last:
                    return frame
                last = frame
            pytest.fail("the screen never settled")

        async def step(name: str, *keys: str) -> None:
            builds = wall.layout_builds
            if name.startswith("w on"):
                armed[:] = [name]
            for key in keys:
                await pilot.press(key)
            frame = await settle()
            lines = wall.text_lines() if wall.display else []
            out.append((name, frame, lines, wall.cursor if wall.display else None,
                        wall.layout_builds - builds))

        async def tick(n: int) -> None:
            """Every host's news, then the redraw the 1 Hz tick would do."""
            for h in TALL:
                backend.push(h, _moved(h, n))  # type: ignore[arg-type]
            clock.now = T0 + n + 0.5
            await wait_until(pilot, lambda: all(
                app.fleet.hosts[h].last.seq == n for h in TALL))  # type: ignore[union-attr]
            screen.show_state(app.fleet, clock.now)
            await step(f"tick {n}")

        await settle()
        await step("w on (first)", "w")
        await step("w off", "w")
        await tick(1)
        await step("w on", "w")
        await tick(2)  # on the wall
        await step("cursor", "right", "right", "down")
        await step("w off again", "w")
        await tick(3)
        await step("w on again", "w")
        await step("m", "m")
        await step("w off, m", "w")
        await pilot.resize_terminal(100, 30)
        await tick(4)
        await step("w on at 100", "w")
        await step("w off at 100", "w")
        await tick(5)
        await step("w on at 100 again", "w")
    return out


pytestmark = pytest.mark.xdist_group("fleet_wall_width")  # one worker: the reference run once
REFERENCE: list[tuple[Trace, dict[str, list[str]]]] = []
"""The run with the code before (its trace and first frames), made once for the check and
its control: the check's own comparison shows it is the same run to run."""


async def _reference(monkeypatch: pytest.MonkeyPatch) -> tuple[Trace, dict[str, list[str]]]:
    if not REFERENCE:
        with monkeypatch.context() as m:
            ref = await _run(m, fleet_wall_before_s11.FleetWall)
        REFERENCE.append((ref, dict(FIRST)))
    return REFERENCE[0]


async def test_the_wall_shown_is_drawn_as_before_and_packed_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ref, first_ref = await _reference(monkeypatch)
    new = await _run(monkeypatch, FleetWall)
    first_new = dict(FIRST)
    assert [s[0] for s in new] == [s[0] for s in ref]
    for (name, frame, lines, cursor, _), (_, frame_r, lines_r, cursor_r, _) in zip(
            new, ref, strict=True):
        assert lines == lines_r, name
        assert cursor == cursor_r, name
        assert frame == frame_r, (name, _texts(frame)[24:], _texts(frame_r)[24:])
    assert any(lines for _, _, lines, _, _ in new)
    packs = {name: n for name, _, _, _, n in new}
    packs_ref = {name: n for name, _, _, _, n in ref}
    # the first show has no width to go by; every later one is packed once, in the key
    for name in ("w on", "w on again", "w on at 100 again"):
        assert packs[name] == 1, (name, packs)
        assert packs_ref[name] > 1, (name, packs_ref)
        # the first frame with the wall is the settled one above the footer (composed again
        # after the focus change): before, it was the view packed at width 0 (a host a
        # row), drawn for a frame until the resize re-packed it
        settled = next(frame for n, frame, _, _, _ in new if n == name)[:-1]
        assert first_new[name][:-1] == settled, name
        assert first_ref[name][:-1] != settled, name
    assert packs["w on at 100"] == 2  # packed at the old width, then at the new one
    assert packs["tick 4"] == 0 and packs["w off"] == 0


class KeptWidthWall(FleetWall):
    """Negative control: the width last shown kept through a resize."""

    def on_resize(self, event: Any) -> None:
        # Textual runs each class's handler along the MRO: the base's is stopped here
        if self._content_width() > 0 and self._width > 0:
            event.prevent_default()


async def test_negative_control_a_width_kept_through_a_resize_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    KeptWidthWall.__name__ = "FleetWall"  # the stylesheet's rules name the class
    ref, _ = await _reference(monkeypatch)
    bad = await _run(monkeypatch, KeptWidthWall)
    differ = [name for (name, frame, lines, _, _), (_, frame_r, lines_r, _, _)
              in zip(bad, ref, strict=True) if (frame, lines) != (frame_r, lines_r)]
    assert differ and all("100" in name for name in differ), differ
