"""The console's themes: only rigwatch's four, ``T`` to step through them, ``:theme WORD``.

Apart from ``tui.app`` because the theme list is a policy of its own: Textual's twenty are
unregistered (they would leave the console's semantic colours on fallbacks), an unknown
``--theme`` is refused at start, and the stylesheet stays valid under any theme.
"""

from __future__ import annotations

from probes.errors import ConfigError
from themes import DEFAULT_THEME, THEME_CYCLE, THEMES, fallback_variables
from tui.app_base import ConsoleMixin


class ThemeKeys(ConsoleMixin):
    """Register rigwatch's themes, start in the one asked for, and switch between them."""

    def _register_themes(self, theme: str | None) -> None:
        """Rigwatch's themes only, starting in ``theme`` (None: the default).

        Raises:
            ConfigError: ``theme`` names no theme of the console's.
        """
        for each in THEMES:
            self.register_theme(each)
        self.theme = DEFAULT_THEME
        # the palette's theme list is ours only: Textual's twenty would leave the console's
        # semantic colours on fallbacks, and `T` steps through these four anyway
        for name in list(self.available_themes):
            if name not in THEME_CYCLE:
                self.unregister_theme(name)
        if theme is not None:
            if theme not in self.available_themes:
                names = ", ".join(sorted(self.available_themes))
                raise ConfigError(f"rigwatch: unknown theme {theme!r} "
                                  f"(available: {names})")
            self.theme = theme

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """Keep our stylesheet valid under any other theme (Textual's are unregistered, but
        a theme set before that, or registered later, must not fail the stylesheet)."""
        return fallback_variables()

    def set_theme_word(self, word: str) -> None:
        """Switch to the rigwatch theme ``word`` (``dark``, ``light`` …) and say so."""
        self.theme = f"rigwatch-{word}"
        self.say_theme()

    def action_next_theme(self) -> None:
        """Step to the next rigwatch theme."""
        try:
            i = THEME_CYCLE.index(self.theme)
        except ValueError:
            i = -1
        self.theme = THEME_CYCLE[(i + 1) % len(THEME_CYCLE)]
        self.say_theme()

    def say_theme(self) -> None:
        word = self.theme.removeprefix("rigwatch-")
        self.say(f"theme: {word} ({THEME_CYCLE.index(self.theme) + 1} of {len(THEME_CYCLE)};"
                 " T for the next)")
