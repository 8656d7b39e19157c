"""The console's themes: the only place in rigwatch where colours are spelled out.

Everything else (TCSS, widget markup) names a variable, so switching theme
restyles the whole app.  Each theme defines every semantic variable below; the
dark theme's values are also the fallback when the operator picks one of
Textual's built-in themes from the command palette, which would otherwise leave
``$gpu-hot`` and friends undefined and fail the stylesheet.
"""

from __future__ import annotations

from textual.theme import Theme

SEMANTIC_VARIABLES = (
    "text-dim",
    "sev-critical",
    "sev-warning",
    "sev-info",
    "status-streaming",
    "status-connecting",
    "status-stale",
    "status-down",
    "gpu-hot",
    "gpu-warm",
    "mem-high",
    "mem-rising",
    "link-degraded",
    "clock-throttled",
    "chart-high",
    "chart-low",
)
"""Variables the stylesheet uses beyond Textual's own (``$error``, ``$primary``, …).

``text-dim`` is a solid colour on purpose: Textual's ``$text-muted`` is ``auto 60%``,
which markup (``Content``) cannot blend and renders at full brightness.
"""

RIGWATCH_DARK = Theme(
    name="rigwatch-dark",
    primary="#4C9BE8",
    secondary="#2F6DB3",
    accent="#E8A33D",
    warning="#E8A33D",
    error="#E5534B",
    success="#57AB5A",
    foreground="#D8DEE4",
    background="#14181D",
    surface="#1C2128",
    panel="#22272E",
    dark=True,
    variables={
        "text-dim": "#8B949E",
        "sev-critical": "#F47067",
        "sev-warning": "#E8A33D",
        "sev-info": "#6CB6FF",
        "status-streaming": "#57AB5A",
        "status-connecting": "#768390",
        "status-stale": "#E8A33D",
        "status-down": "#F47067",
        "gpu-hot": "#F47067",
        "gpu-warm": "#E8A33D",
        "mem-high": "#DCBDFB",
        "mem-rising": "#E8A33D",
        "link-degraded": "#F69D50",
        "clock-throttled": "#F69D50",
        "chart-high": "#6CB6FF",
        "chart-low": "#2F4A66",
        "footer-key-foreground": "#E8A33D",
    },
)

RIGWATCH_HIGH_CONTRAST = Theme(
    name="rigwatch-high-contrast",
    primary="#FFFFFF",
    secondary="#FFFF00",
    accent="#FFFF00",
    warning="#FFFF00",
    error="#FF3333",
    success="#00FF00",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#1A1A1A",
    dark=True,
    luminosity_spread=0.3,
    text_alpha=1.0,
    variables={
        "text-dim": "#C0C0C0",
        "sev-critical": "#FF3333",
        "sev-warning": "#FFFF00",
        "sev-info": "#00FFFF",
        "status-streaming": "#00FF00",
        "status-connecting": "#C0C0C0",
        "status-stale": "#FFFF00",
        "status-down": "#FF3333",
        "gpu-hot": "#FF3333",
        "gpu-warm": "#FFFF00",
        "mem-high": "#FF00FF",
        "mem-rising": "#FFFF00",
        "link-degraded": "#FF8800",
        "clock-throttled": "#FF8800",
        "chart-high": "#00FFFF",
        "chart-low": "#008080",
        "footer-key-foreground": "#FFFF00",
        "block-cursor-background": "#FFFF00",
        "block-cursor-foreground": "#000000",
    },
)

THEMES = (RIGWATCH_DARK, RIGWATCH_HIGH_CONTRAST)
THEME_CYCLE = tuple(t.name for t in THEMES)
"""Order the ``t`` key steps through."""
DEFAULT_THEME = RIGWATCH_DARK.name


def fallback_variables() -> dict[str, str]:
    """Semantic variables for themes that do not define them (Textual's built-ins)."""
    return {name: RIGWATCH_DARK.variables[name] for name in SEMANTIC_VARIABLES}
