"""A change of the header's totals repaints its label and arranges nothing (issue 38).

While a fleet connects the totals move with every redraw (``37/256 streaming``); each
``Label.update`` asked Textual for a layout, which arranged the whole screen again (~40 ms
at 256 hosts, half of the start-up's compositor time: tests/bench/RESULTS.md, "#38 start-up
(session 8)").  The label's size never follows its text (``width: 1fr``, one line), so it
now only repaints.  Counted here on the real app: the label shows the new totals, in its
place and width, and the screen was not laid out again; the snapshot tests show the screens
drawn as before.  Negative control: the update as it was (with its layout) is counted.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Label

from tests.support.tui_fakes import fake_fleet, settled
from tui.app import make_app
from tui.console_options import ConsoleOptions
from widgets.header_bar import HeaderBar, totals_content


async def _layouts_for_new_totals(monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, Any]:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=False), clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await settled(pilot, backend)
        await pilot.pause()
        header = app.screen.query_one(HeaderBar)
        label = header.query_one("#totals", Label)
        region = label.region
        layouts: list[None] = []
        plain = app.screen._refresh_layout

        def counted(*a: Any, **k: Any) -> None:
            layouts.append(None)
            plain(*a, **k)

        monkeypatch.setattr(app.screen, "_refresh_layout", counted)
        header.totals = {"streaming": 2, "down": 1, "gpus": 16, "warning": 3}
        await pilot.pause()
        await pilot.pause()
        text = "".join(s.text for s in label.render_line(0))
        assert label.region == region
        return len(layouts), text, label


async def test_new_totals_repaint_the_label_without_a_layout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    layouts, text, _ = await _layouts_for_new_totals(monkeypatch)
    assert "2/3 streaming, 1 down │ 16 GPUs │ 3 warning" in text
    assert layouts == 0


async def test_negative_control_the_update_with_its_layout_is_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def with_layout(self: HeaderBar, totals: Any) -> None:  # the watcher as it was
        if totals is not None and self._ready:
            self.query_one("#totals", Label).update(totals_content(totals))

    monkeypatch.setattr(HeaderBar, "watch_totals", with_layout)
    layouts, text, _ = await _layouts_for_new_totals(monkeypatch)
    assert "2/3 streaming" in text
    assert layouts >= 1
