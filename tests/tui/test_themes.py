"""Themes: every one defines what the stylesheet names; the colour-blind-safe one keeps
"ok" and "failed" apart without red against green."""

from __future__ import annotations

import colorsys

import pytest

from themes.themes import SEMANTIC_VARIABLES, THEMES


@pytest.mark.parametrize("theme", THEMES, ids=lambda t: t.name)
def test_every_theme_defines_every_semantic_variable(theme: object) -> None:
    variables = theme.variables  # type: ignore[attr-defined]
    assert [v for v in SEMANTIC_VARIABLES if v not in variables] == []


def _hue(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hsv(r, g, b)[0] * 360


def test_colour_safe_status_is_not_red_against_green() -> None:
    (safe,) = [t for t in THEMES if t.name == "rigwatch-colour-safe"]
    ok, down = safe.variables["status-streaming"], safe.variables["status-down"]
    assert 180 <= _hue(ok) <= 260, "streaming should be blue"
    assert _hue(down) < 40 or _hue(down) > 330, "down should be vermilion"
    names = {t.name for t in THEMES}
    assert {"rigwatch-dark", "rigwatch-light", "rigwatch-high-contrast",
            "rigwatch-colour-safe"} <= names
    (light,) = [t for t in THEMES if t.name == "rigwatch-light"]
    assert light.dark is False
