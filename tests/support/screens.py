"""What is on the terminal, as text: a whole app's screen or one widget's lines, after CSS
(padding, nowrap, ellipsis), the way a user reads it."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.widget import Widget


def screen_lines(app: App[Any]) -> list[str]:
    """The app's current screen, one string a terminal row."""
    return ["".join(seg.text for seg in strip)
            for strip in app.screen._compositor.render_strips()]


def panel_lines(panel: Widget) -> list[str]:
    """One widget's rows as it renders them into its region."""
    return [strip.text for strip in panel.render_lines(panel.region.reset_offset)]


def line_with(lines: list[str], needle: str) -> str:
    """The first line holding ``needle``; fails with the whole screen when none does."""
    found = [line for line in lines if needle in line]
    assert found, f"{needle!r} not on screen:\n" + "\n".join(lines)
    return found[0]
