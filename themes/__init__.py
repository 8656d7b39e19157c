"""Look and feel of the console: one stylesheet plus the Theme objects it is written against."""

from __future__ import annotations

from pathlib import Path

from themes.themes import DEFAULT_THEME, THEME_CYCLE, THEMES, fallback_variables

CSS_PATH = Path(__file__).with_name("rigwatch.tcss")
"""The app stylesheet, shipped as package data (see ``pyproject.toml``)."""

__all__ = ["CSS_PATH", "DEFAULT_THEME", "THEMES", "THEME_CYCLE", "fallback_variables"]
