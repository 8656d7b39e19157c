"""``--prometheus URL`` and its options on the parsers of the console, ``snapshot`` and
``preflight``; the source they name is built by ``probes.sources.prometheus.options``."""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_REFRESH_S = 15.0
"""``prometheus_source.DEFAULT_REFRESH_S``, named here so that building the parser imports
no HTTP client (every ``rigwatch`` command builds it; a test keeps the two equal)."""


def add_prometheus_args(p: argparse.ArgumentParser, sub: bool = False) -> None:
    """The Prometheus options; on a subcommand they default to SUPPRESS so that
    ``rigwatch --prometheus URL snapshot`` keeps the URL given before the subcommand."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if sub else value

    p.add_argument("--prometheus", metavar="URL", default=default(None),
                   help="read the fleet from this Prometheus (dcgm-exporter metrics) "
                        "instead of agents")
    p.add_argument("--match", metavar="SELECTOR", default=default(""),
                   help='label matchers every query carries, e.g. \'job="dcgm"\'')
    p.add_argument("--bearer-token-file", metavar="FILE", default=default(None),
                   help="send the token in FILE as 'Authorization: Bearer'")
    p.add_argument("--ca-file", metavar="FILE", default=default(None),
                   help="trust this CA bundle for an https Prometheus")
    p.add_argument("--host-label", metavar="LABEL", default=default("Hostname"),
                   help="the label naming a host (default Hostname; 'instance' where "
                        "it is absent)")
    p.add_argument("--refresh", metavar="S", type=float,
                   default=default(DEFAULT_REFRESH_S),
                   help="seconds between refreshes (default 15)")
