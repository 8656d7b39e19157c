"""A widget alone in an app, styled and themed exactly as the console styles it."""

from __future__ import annotations

from textual.app import App

from themes import CSS_PATH, DEFAULT_THEME, THEMES, fallback_variables


class ThemedApp(App[None]):
    """Subclass with a ``compose`` that yields the widget under test."""

    CSS_PATH = CSS_PATH

    def __init__(self) -> None:
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """As the console: the stylesheet stays valid under Textual's own themes."""
        return fallback_variables()
