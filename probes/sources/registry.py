"""Every fleet source, built once from the command line.

``SOURCES`` is the one list: each entry names a module whose ``from_args(args, settings)``
returns its ``Source`` when the arguments (or the settings) name it, else None.  The first
that answers wins; the agents are last, the default fleet.  The console, ``snapshot``,
``preflight`` and the recorder take whatever ``build_source`` returns and never ask which
it is.  A new source (Kubernetes, say) is one package under ``probes/sources/`` and one
line here.

An entry is imported only when it is asked, so that a command that names no Prometheus
never loads an HTTP client.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from probes.errors import ConfigError
from probes.sources.source import Source, SourceSettings

SourceFactory = Callable[[argparse.Namespace, SourceSettings], "Source | None"]

SOURCES: tuple[tuple[str, str], ...] = (
    ("recording", "probes.sources.replay_args"),  # replay imported when one is named
    ("prometheus", "probes.sources.prometheus.options"),
    ("agents", "probes.sources.hosts"),
)
"""(name, module with ``from_args``), asked in this order; the name is also the option
that names the source on the command line (``--recording``, ``--prometheus``), if any."""


def factory(module: str) -> SourceFactory:
    """An entry's ``from_args``."""
    made: SourceFactory = importlib.import_module(module).from_args
    return made


def refuse_source_options(args: argparse.Namespace) -> None:
    """A command that reads no fleet source (``manifest``, ``ladder`` …) refuses an option
    that names one, rather than ignoring it.

    Raises:
        ConfigError: such an option was given.
    """
    for name, _module in SOURCES:
        if getattr(args, name, None):
            raise ConfigError(f"rigwatch: --{name} does not apply to '{args.command}'")


def build_source(args: argparse.Namespace, settings: SourceSettings) -> Source:
    """The source the arguments name (the agents' fleet when none other does).

    Raises:
        ConfigError: the arguments name a source that cannot be used.
    """
    for _name, module in SOURCES:
        source = factory(module)(args, settings)
        if source is not None:
            return source
    raise AssertionError("the agents source always answers")  # pragma: no cover
