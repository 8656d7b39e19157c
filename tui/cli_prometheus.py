"""``--prometheus URL`` on the console, ``snapshot`` and ``preflight``: the fleet read from a
Prometheus that already scrapes dcgm-exporter, instead of agents over SSH."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.config.fleet import HostSpec
from probes.errors import ConfigError
from tui.cli_fleet import print_preflight, warn_insecure

if TYPE_CHECKING:
    from probes.transport.backend import Backend
    from probes.transport.prometheus_source import PromFleetOptions
    from tui.settings import Settings

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


def prometheus_options(args: argparse.Namespace) -> PromFleetOptions | None:
    """The options of ``--prometheus``, None without it.

    Raises:
        ConfigError: the URL, the token file or the refresh is unusable.
    """
    url = getattr(args, "prometheus", None)
    if url is None:
        return _from_settings(args)
    from probes.transport.prometheus_client import PromEndpoint, PrometheusError
    from probes.transport.prometheus_source import PromFleetOptions

    if getattr(args, "demo", False) or getattr(args, "slurm_job", None):
        raise ConfigError("rigwatch: --prometheus reads its hosts from Prometheus; "
                          "it cannot be used with --demo or --slurm-job (--inventory "
                          "names the hosts SSH reaches for the drill-down)")
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


def _from_settings(args: argparse.Namespace) -> PromFleetOptions | None:
    """The settings file's ``prometheus:`` section, for the commands that watch a fleet
    when the command line names none (no --demo, --inventory or --slurm-job)."""
    if args.command not in (None, "snapshot", "preflight") or any(
            getattr(args, name, None) for name in ("demo", "inventory", "slurm_job")):
        return None
    prom = _limits(args).prometheus
    if prom.url is None:
        return None
    from probes.transport.prometheus_client import PromEndpoint, PrometheusError
    from probes.transport.prometheus_source import PromFleetOptions
    try:
        endpoint = PromEndpoint.from_options(prom.url, prom.bearer_token_file, prom.ca_file)
    except PrometheusError as exc:
        raise ConfigError(f"rigwatch: settings prometheus.url: {exc}") from None
    if prom.refresh_s <= 0:
        raise ConfigError("rigwatch: settings prometheus.refresh_s must be > 0")
    return PromFleetOptions(endpoint, match=prom.match or "",
                            host_label=prom.host_label or "Hostname", refresh_s=prom.refresh_s)


def run_prometheus(args: argparse.Namespace, options: PromFleetOptions) -> int:
    """Run the console, ``snapshot`` or ``preflight`` on the Prometheus fleet."""
    from probes.transport.prometheus_client import PrometheusError
    try:
        if args.command == "snapshot":
            return _snapshot(args, options)
        if args.command == "preflight":
            return _preflight(args, options)
        if args.command is None:
            return _console(args, options)
    except PrometheusError as exc:
        raise ConfigError(f"rigwatch: {exc}") from None
    raise ConfigError(f"rigwatch: --prometheus does not apply to '{args.command}'")


def _limits(args: argparse.Namespace) -> Settings:
    from tui.settings import Settings, default_settings_path, load_settings

    path = getattr(args, "settings", None) or default_settings_path()
    return load_settings(path) if path else Settings()


def _snapshot(args: argparse.Namespace, options: PromFleetOptions) -> int:
    from probes.outputs.prometheus_snapshot import prometheus_snapshot
    from probes.outputs.snapshot import snapshot_line
    from probes.transport.prometheus_source import with_window

    settings = _limits(args)
    options = with_window(options, settings.detectors.leak_window_s)
    snap = asyncio.run(prometheus_snapshot(options, settings.detectors,
                                           inventory=_ssh_hosts(args)))
    if args.json:
        json.dump(snap, sys.stdout, indent=2 if args.pretty else None)
        sys.stdout.write("\n")
    else:
        for host in snap["hosts"]:
            print(snapshot_line(host, None))
        src = snap["source"]
        print(f"{len(snap['hosts'])} hosts from {src['prometheus']}: {src['queries']} queries "
              f"in {src['seconds']:.2f} s", file=sys.stderr)
    return 0 if all(h["ok"] for h in snap["hosts"]) else 1


def _preflight(args: argparse.Namespace, options: PromFleetOptions) -> int:
    from probes.analysis.preflight import check_fleet
    from probes.outputs.prometheus_snapshot import read_fleet
    from probes.outputs.snapshot import preflight_inputs
    from probes.transport.prometheus_source import with_window

    settings = _limits(args)
    options = with_window(options, settings.detectors.leak_window_s)
    read = asyncio.run(read_fleet(options, settings.detectors, inventory=_ssh_hosts(args)))
    results = check_fleet(preflight_inputs(read.results, settings.detectors),
                          settings.preflight, settings.detectors)
    return print_preflight(results, args.json)


def console_backend(args: argparse.Namespace, options: PromFleetOptions,
                    settings: Settings) -> Backend:
    """The console's backend on the Prometheus fleet, recorded like every console session.

    Raises:
        ConfigError: Prometheus holds no GPU series under the match.
        PrometheusError: it cannot be read now.
    """
    from probes.transport.prometheus_backend import PrometheusBackend, prometheus_specs
    from probes.transport.prometheus_source import PromFleetSource, with_window
    from tui.cli_record import with_recording

    options = with_window(options, settings.detectors.leak_window_s)
    source = PromFleetSource(options)
    found = asyncio.run(source.discover())
    if not found.hosts:
        raise ConfigError(f"rigwatch: no GPU series in {options.endpoint.url} "
                          f"(DCGM_FI_DEV_FB_USED{{{options.match}}} has none)")
    ssh = _ssh_hosts(args)
    specs = prometheus_specs(found.hosts, options.refresh_s, inventory=ssh)
    live = PrometheusBackend(options, specs, source, ssh=ssh)
    # the same items, the same file, replayed alike; the header keeps the URL beside "● rec"
    name = f"prometheus-{options.match}" if options.match else "prometheus"
    key = [f"{s.name} prometheus" for s in specs] + [f"match {options.match}"]
    return with_recording(live, specs, name, key, args, settings)


def _console(args: argparse.Namespace, options: PromFleetOptions) -> int:
    from tui.app import make_app
    from tui.gc_policy import tune_for_streaming
    from tui.glyphs import wants_ascii

    settings = _limits(args)
    backend = console_backend(args, options, settings)
    app = make_app(backend, demo=False, title=options.match or None,
                   alerts=settings.alerts, detectors=settings.detectors,
                   preflight=settings.preflight, scan_logs_apart=True)
    app.metrics_textfile = Path(args.metrics_textfile) if args.metrics_textfile else None
    app.metrics_port = args.metrics_port
    app.ascii_glyphs = args.ascii or wants_ascii()
    from tui.cli_node import apply_action_args

    apply_action_args(app, args, settings)
    if args.theme:
        app.theme = args.theme
    tune_for_streaming()
    app.run()
    return app.return_code or 0


def _ssh_hosts(args: argparse.Namespace) -> dict[str, HostSpec]:
    """``--inventory``'s hosts by name: those the host screen and triage may read over SSH
    (kernel log, topology) when Prometheus names them."""
    path = getattr(args, "inventory", None)
    if not path:
        return {}
    from probes.config.inventory import load_inventory

    specs = list(load_inventory(path).hosts)
    warn_insecure(specs)
    return {s.name: s for s in specs}
