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
    "value-old",
)
"""Variables the stylesheet uses beyond Textual's own (``$error``, ``$primary``, …).

``value-old`` draws the last values of a host that is down or stale: dimmer than text, in
no status colour, so old numbers never read as live ones.

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
        "value-old": "#636E7B",
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
        "value-old": "#8A8A8A",
        "footer-key-foreground": "#FFFF00",
        "block-cursor-background": "#FFFF00",
        "block-cursor-foreground": "#000000",
    },
)

RIGWATCH_LIGHT = Theme(
    name="rigwatch-light",
    primary="#0969DA",
    secondary="#1F4E8C",
    accent="#9A6700",
    warning="#9A6700",
    error="#CF222E",
    success="#1A7F37",
    foreground="#1F2328",
    background="#FFFFFF",
    surface="#F6F8FA",
    panel="#EAEEF2",
    dark=False,
    variables={
        "text-dim": "#57606A",
        "sev-critical": "#CF222E",
        "sev-warning": "#9A6700",
        "sev-info": "#0969DA",
        "status-streaming": "#1A7F37",
        "status-connecting": "#6E7781",
        "status-stale": "#9A6700",
        "status-down": "#CF222E",
        "gpu-hot": "#CF222E",
        "gpu-warm": "#BC4C00",
        "mem-high": "#8250DF",
        "mem-rising": "#9A6700",
        "link-degraded": "#BC4C00",
        "clock-throttled": "#BC4C00",
        "chart-high": "#0969DA",
        "chart-low": "#B6E3FF",
        "value-old": "#8C959F",
        "footer-key-foreground": "#9A6700",
    },
)

RIGWATCH_COLOUR_SAFE = Theme(
    name="rigwatch-colour-safe",
    primary="#56B4E9",
    secondary="#0072B2",
    accent="#E69F00",
    warning="#E69F00",
    error="#D55E00",
    success="#0072B2",
    foreground="#E6E6E6",
    background="#111111",
    surface="#1A1A1A",
    panel="#262626",
    dark=True,
    variables={
        # Okabe–Ito: told apart with any common colour-vision deficiency; "ok" is blue, not
        # green, so ok and failed never differ by red against green alone (and every status
        # is also written as a word or a glyph)
        "text-dim": "#9E9E9E",
        "sev-critical": "#D55E00",
        "sev-warning": "#E69F00",
        "sev-info": "#56B4E9",
        "status-streaming": "#0072B2",
        "status-connecting": "#9E9E9E",
        "status-stale": "#E69F00",
        "status-down": "#D55E00",
        "gpu-hot": "#D55E00",
        "gpu-warm": "#E69F00",
        "mem-high": "#CC79A7",
        "mem-rising": "#F0E442",
        "link-degraded": "#CC79A7",
        "clock-throttled": "#CC79A7",
        "chart-high": "#56B4E9",
        "chart-low": "#234A5E",
        "value-old": "#6B6B6B",
        "footer-key-foreground": "#E69F00",
    },
)

THEMES = (RIGWATCH_DARK, RIGWATCH_LIGHT, RIGWATCH_HIGH_CONTRAST, RIGWATCH_COLOUR_SAFE)
THEME_CYCLE = tuple(t.name for t in THEMES)
"""Order the ``t`` key steps through."""
DEFAULT_THEME = RIGWATCH_DARK.name


def fallback_variables() -> dict[str, str]:
    """Semantic variables for themes that do not define them (Textual's built-ins)."""
    return {name: RIGWATCH_DARK.variables[name] for name in SEMANTIC_VARIABLES}
