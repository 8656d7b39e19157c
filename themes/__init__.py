"""Look and feel of the console: one stylesheet plus the Theme objects it is written against."""

from __future__ import annotations

from pathlib import Path, PurePath

from themes.themes import DEFAULT_THEME, THEME_CYCLE, THEMES, fallback_variables

_HERE = Path(__file__).parent
CSS_PATH: list[str | PurePath] = [_HERE / "rigwatch.tcss",
                                  *sorted(p for p in _HERE.glob("*.tcss")
                                          if p.name != "rigwatch.tcss")]
"""The app stylesheet, then one per widget that keeps its own (``fleet_wall.tcss`` …);
shipped as package data (see ``pyproject.toml``)."""

__all__ = ["CSS_PATH", "DEFAULT_THEME", "THEMES", "THEME_CYCLE", "fallback_variables"]
