"""Reference copy (session 13) of ``tui.cli._run_console``'s first steps and the registry's entries
before the change:
the source and its recorded backend built first, then the collectors spawned.  Used only
as the negative control of ``test_start_order.py``; it stops where the UI would start."""

from __future__ import annotations

import argparse

from tui.cli import _settings

SOURCES_BEFORE = (
    ("recording", "probes.sources.replay"),
    ("prometheus", "probes.sources.prometheus.options"),
    ("agents", "probes.sources.hosts"),
)
"""``probes.sources.registry.SOURCES`` before: the replay module imported to be asked."""


def run_console_before(args: argparse.Namespace) -> int:
    from tui.cli_record import console_backend

    settings = _settings(args)
    source, _backend = console_backend(args, settings)
    prestart = getattr(source.backend, "prestart", None)
    if prestart is not None:  # collectors start while the UI is imported and mounted (#38)
        prestart()
    return 0
