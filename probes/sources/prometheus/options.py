"""``--prometheus URL`` (or the settings' ``prometheus:`` section) as a source: the fleet
read from a Prometheus that already scrapes dcgm-exporter, instead of agents over SSH."""

from __future__ import annotations

import argparse
import asyncio

from probes.config.fleet import HostSpec
from probes.errors import ConfigError
from probes.sources.prometheus.client import PromEndpoint, PrometheusError
from probes.sources.prometheus.source import (
    DEFAULT_REFRESH_S,
    PromFleetOptions,
    PromFleetSource,
    with_window,
)
from probes.sources.source import Source, SourceSettings

READ_COMMANDS = (None, "snapshot", "preflight")
"""The commands that take a fleet from Prometheus: the console, ``snapshot``, ``preflight``."""


def prometheus_options(args: argparse.Namespace,
                       settings: SourceSettings | None = None) -> PromFleetOptions | None:
    """The options of ``--prometheus``, else of the settings' ``prometheus:`` section when
    the command line names no fleet; None when neither names one.

    Raises:
        ConfigError: the URL, the token file or the refresh is unusable.
    """
    url = getattr(args, "prometheus", None)
    if url is None:
        return _from_settings(args, settings)
    if getattr(args, "demo", False) or getattr(args, "slurm_job", None):
        raise ConfigError("rigwatch: --prometheus reads its hosts from Prometheus; "
                          "it cannot be used with --demo or --slurm-job (--inventory "
                          "names the hosts SSH reaches for the drill-down)")
    if getattr(args, "command", None) not in READ_COMMANDS:
        raise ConfigError(f"rigwatch: --prometheus does not apply to '{args.command}'")
    refresh = float(getattr(args, "refresh", DEFAULT_REFRESH_S))
    if refresh <= 0:
        raise ConfigError("rigwatch: --refresh must be > 0")
    try:
        endpoint = PromEndpoint.from_options(url, getattr(args, "bearer_token_file", None),
                                             getattr(args, "ca_file", None))
    except PrometheusError as exc:
        raise ConfigError(f"rigwatch: --prometheus: {exc}") from None
    return PromFleetOptions(endpoint, match=getattr(args, "match", "") or "",
                            host_label=getattr(args, "host_label", "Hostname") or "Hostname",
                            refresh_s=refresh)


def _from_settings(args: argparse.Namespace,
                   settings: SourceSettings | None) -> PromFleetOptions | None:
    """The settings file's ``prometheus:`` section, for the commands that watch a fleet
    when the command line names none (no --demo, --inventory or --slurm-job)."""
    if settings is None or getattr(args, "command", None) not in READ_COMMANDS or any(
            getattr(args, name, None) for name in ("demo", "inventory", "slurm_job",
                                                   "recording")):
        return None
    prom = settings.prometheus
    if prom.url is None:
        return None
    try:
        endpoint = PromEndpoint.from_options(prom.url, prom.bearer_token_file, prom.ca_file)
    except PrometheusError as exc:
        raise ConfigError(f"rigwatch: settings prometheus.url: {exc}") from None
    if prom.refresh_s <= 0:
        raise ConfigError("rigwatch: settings prometheus.refresh_s must be > 0")
    return PromFleetOptions(endpoint, match=prom.match or "",
                            host_label=prom.host_label or "Hostname", refresh_s=prom.refresh_s)


def from_args(args: argparse.Namespace, settings: SourceSettings) -> Source | None:
    """The Prometheus source, None when neither the command line nor the settings name one.

    Raises:
        ConfigError: the options are unusable, Prometheus cannot be read now, or it holds
            no GPU series under the match.
    """
    from probes.sources.prometheus.backend import PrometheusBackend, prometheus_specs

    options = prometheus_options(args, settings)
    if options is None:
        return None
    options = with_window(options, settings.detectors.leak_window_s)
    source = PromFleetSource(options)
    try:
        found = asyncio.run(source.discover())
    except PrometheusError as exc:
        raise ConfigError(f"rigwatch: {exc}") from None
    if not found.hosts:
        raise ConfigError(f"rigwatch: no GPU series in {options.endpoint.url} "
                          f"(DCGM_FI_DEV_FB_USED{{{options.match}}} has none)")
    ssh = ssh_hosts(args)
    specs = prometheus_specs(found.hosts, options.refresh_s, inventory=ssh)
    backend = PrometheusBackend(options, specs, source, ssh=ssh)
    # the same items, the same file, replayed alike; the header keeps the URL beside "● rec"
    return Source(backend,
                  name=f"prometheus-{options.match}" if options.match else "prometheus",
                  key=[f"{s.name} prometheus" for s in specs] + [f"match {options.match}"],
                  title=options.match or None, about=backend.about)


def ssh_hosts(args: argparse.Namespace) -> dict[str, HostSpec]:
    """``--inventory``'s hosts by name: those the host screen and triage may read over SSH
    (kernel log, topology) when Prometheus names them."""
    path = getattr(args, "inventory", None)
    if not path:
        return {}
    from probes.config.inventory import load_inventory
    from probes.sources.hosts import warn_insecure

    specs = list(load_inventory(path).hosts)
    warn_insecure(specs)
    return {s.name: s for s in specs}
