"""Command line: ``rigwatch`` (the console), ``snapshot``, ``explain``, ``report``,
``preflight``, ``manifest``, ``check-inventory``, ``agent``.

Textual is imported only for the console itself, so the other commands run on a
machine without a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.config.fleet import (
    DEMO_SPEED,
    HostSpec,
    TransportName,
)
from probes.config.inventory import default_inventory_path, load_inventory
from probes.errors import ConfigError, ProblemsError, TransportError
from probes.sources.hosts import fleet_of, warn_insecure
from tui.cli_fabric import (
    add_fabric_parser,
    add_ibnetdiscover_arg,
    inventory_or_none,
    load_topology,
    run_fabric,
)
from tui.cli_fleet import SnapshotFold, collector_count, print_preflight, with_job
from tui.cli_ladder import add_ladder_parser, run_ladder
from tui.cli_node import add_action_args, add_node_parser, run_node
from tui.cli_prometheus import add_prometheus_args
from tui.gc_policy import tune_for_streaming

if TYPE_CHECKING:
    from probes.sources.source import Source
    from probes.transport.session import OnceResult
    from tui.app import RigwatchApp
    from tui.settings import Settings

EXIT_USAGE = 2


def _host_line(spec: HostSpec, width: int, unresolved: str) -> str:
    """One host of ``check-inventory``; ``unresolved`` stands for what ssh config would set."""
    if spec.transport is TransportName.LOCAL:
        where = "address=(local) user=- port=- jump=-"
    else:
        o = spec.ssh
        where = (f"address={o.address or unresolved or spec.name} "
                 f"user={o.user or unresolved or '(local user)'} "
                 f"port={o.port or unresolved or 22} jump={','.join(o.jump) or '-'}")
    return (f"{spec.name:<{width}}  {where} python={spec.python or '(this python)'} "
            f"tags={','.join(spec.tags) or '-'} simulate={','.join(spec.simulate) or '-'}")


def _run_check_inventory(args: argparse.Namespace) -> int:
    from probes.config.ssh_config import resolve_ssh_config

    path = args.file or default_inventory_path()
    inv = load_inventory(path)
    width = min(max(len(s.name) for s in inv.hosts), 32)
    config_broken = False
    for spec in inv.hosts:
        unresolved = ""
        if spec.ssh.ssh_config and spec.transport is TransportName.SSH and not config_broken:
            try:
                spec = dataclasses.replace(spec, ssh=resolve_ssh_config(spec))
            except ConfigError as exc:
                print(f"rigwatch: {exc.msg}; ssh-config values are not shown", file=sys.stderr)
                config_broken = True
        if spec.ssh.ssh_config and config_broken:
            unresolved = "(from ssh config)"
        print(_host_line(spec, width, unresolved))
    print(f"{len(inv.hosts)} hosts in {path}", file=sys.stderr)
    warn_insecure(list(inv.hosts))
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    from probes.rules.nccl_expect import configure
    from tui.settings import Settings, default_settings_path, load_settings

    path = getattr(args, "settings", None) or default_settings_path()
    settings = load_settings(path) if path else Settings()
    configure(settings.nccl_tests)  # one table for explain and the console's log scans
    return settings


def _source(args: argparse.Namespace, settings: Settings) -> Source:
    """The one source the arguments name (``probes.sources.registry``)."""
    from probes.sources.registry import build_source

    return build_source(args, settings)


def _run_console(args: argparse.Namespace) -> int:
    """The console on whatever source the arguments name: live sources are recorded."""
    # What start-up allocates (the UI's modules, every host's state) lives on: the garbage
    # collector's passes over it before ``tune_for_streaming`` (one full collection, then
    # it is frozen) were ~0.1 CPU s at 1024 hosts, beside the collectors' handshakes (#38).
    collecting = gc.isenabled()
    gc.disable()
    try:
        app = _console_app(args)
        tune_for_streaming()
    finally:
        if collecting:
            gc.enable()
    app.run()
    return app.return_code or 0


def _console_app(args: argparse.Namespace) -> RigwatchApp:
    """The console's app on its source, the collectors already started."""
    from probes.sources.registry import build_source
    from tui.cli_record import with_recording

    settings = _settings(args)
    source = build_source(args, settings)
    prestart = getattr(source.backend, "prestart", None)
    if prestart is not None:
        # Collectors start while the UI is imported and mounted (#38), and before the
        # recorder is set up: its modules (numpy among them) and files are not theirs.
        prestart()
    backend = with_recording(source, args, settings)
    from tui.app import make_app
    from tui.console_options import ConsoleOptions
    from tui.glyphs import wants_ascii

    job = source.job
    audit = getattr(args, "audit", None)
    return make_app(backend, ConsoleOptions(
        demo=source.demo, title=source.title, alerts=settings.alerts,
        detectors=settings.detectors, preflight=settings.preflight, scan_logs_apart=True,
        job_watch=NO_JOB if job is None else JobWatch.of(
            job.job_id, (s.name for s in backend.specs), job.task_gpus()),
        topology=load_topology(getattr(args, "ibnetdiscover", None)),
        metrics_textfile=Path(args.metrics_textfile) if args.metrics_textfile else None,
        metrics_port=args.metrics_port, ascii_glyphs=args.ascii or wants_ascii(),
        theme=args.theme or None,
        read_only=bool(getattr(args, "read_only", False)) or settings.read_only,
        audit_path=Path(audit) if audit else None))


def _run_replay(args: argparse.Namespace) -> int:
    """Without a file, the recordings listed; with one, the console on it."""
    if args.file is None:
        from probes.store.catalog import record_dir, write_listing

        write_listing(record_dir(args), sys.stdout, sys.stderr)
        return 0
    return _run_console(args)


def _run_snapshot(args: argparse.Namespace) -> int:
    from probes.outputs.snapshot import snapshot_line, take_snapshot

    settings = _settings(args)
    source = _source(args, settings)
    job = source.job
    fold = SnapshotFold(job, load_topology(getattr(args, "ibnetdiscover", None)),
                        settings.detectors)
    snap = asyncio.run(take_snapshot(source.backend, demo=source.demo, fold=fold,
                                     about=source.about, watch=fold.watch))
    if job is not None and fold.fleet is not None:
        with_job(snap, job, fold.fleet, fold.notes)
    if args.json:
        json.dump(snap, sys.stdout, indent=2 if args.pretty else None)
        sys.stdout.write("\n")
    else:
        expect = {s.name: s.expect_gpus for s in source.backend.specs}
        for host in snap["hosts"]:
            print(snapshot_line(host, expect.get(host["name"])))
        if "source" in snap:
            about = ", ".join(f"{k} {v}" for k, v in snap["source"].items())
            print(f"{len(snap['hosts'])} hosts from {about}", file=sys.stderr)
    return 0 if all(h["ok"] for h in snap["hosts"]) else 1


def _run_explain(args: argparse.Namespace) -> int:
    from probes.explain.detect import KINDS
    from probes.explain.render import render_text
    from probes.explain.run import ExplainInputError, to_document
    from probes.explain.stream import explain_stream, open_input

    if args.kind is not None and args.kind not in KINDS:
        print(f"rigwatch explain: unknown --kind {args.kind!r} (known: {', '.join(KINDS)})",
              file=sys.stderr)
        return EXIT_USAGE
    if args.files.count("-") > 1:
        print("rigwatch explain: standard input ('-') can be read only once", file=sys.stderr)
        return EXIT_USAGE
    try:
        _settings(args)  # the nccl_tests expectations
    except ProblemsError as exc:
        print(f"rigwatch explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.ExitStack() as files:
        try:  # every input opens before any is read: a bad path is one line, no output
            opened = []
            for path in args.files:
                fh = open_input(path)
                if fh is not sys.stdin.buffer:
                    files.enter_context(fh)
                opened.append((path, fh))
            # a large input is read in blocks (probes/explain/stream.py), never whole
            explained = [explain_stream(path, fh, args.kind) for path, fh in opened]
        except ExplainInputError as exc:
            print(f"rigwatch explain: {exc}", file=sys.stderr)
            return EXIT_USAGE
    import time

    from probes.outputs.explain_first import explain_diagnosis, first_json, first_line

    first = explain_diagnosis(explained, time.time()).first
    if args.json:
        document = to_document(explained)
        document["first_failure"] = first_json(first)  # an addition to the contract
        json.dump(document, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(explained, first_line(first)))
    return 0


def _run_report(args: argparse.Namespace) -> int:
    from probes.outputs.report import ReportError, find_report, list_reports, reports_dir
    from probes.wire.sanitize import clean_block

    where = Path(args.dir) if args.dir else reports_dir()
    if args.name is None:
        entries = list_reports(where)
        if not entries:
            print(f"no reports in {where} (press r on the triage screen to write one)",
                  file=sys.stderr)
            return 0
        for i, e in enumerate(entries, 1):
            print(f"{i:>3}  {e.created}  {e.path.name}  {e.first_failure}")
        return 0
    try:
        path = find_report(args.name, where)
        text = (path.with_suffix(".json") if args.json else path).read_text(encoding="utf-8")
        # a report written before host text was sanitised may hold raw escapes
        sys.stdout.write(text if args.json else clean_block(text))
    except ReportError as exc:
        print(f"rigwatch report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"rigwatch report: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _collect(specs: list[HostSpec]) -> list[OnceResult]:
    from probes.transport.session import collect_all

    return asyncio.run(collect_all(specs))


def _run_preflight(args: argparse.Namespace) -> int:
    """Every host of one read of the source, checked against the rules of thumb."""
    from probes.analysis.preflight import check_fleet
    from probes.outputs.read_once import read_once
    from probes.outputs.snapshot import preflight_inputs

    settings = _settings(args)
    source = _source(args, settings)
    read = asyncio.run(read_once(source.backend, limits=settings.detectors))
    results = check_fleet(preflight_inputs(read), settings.preflight, settings.detectors)
    return print_preflight(results, args.json)


def _run_manifest(args: argparse.Namespace) -> int:
    from probes.outputs.manifest import (
        IDENTITY_LEAVES,
        diff,
        diff_documents,
        dump,
        fleet_manifest,
        load_manifest,
        write_manifest,
    )

    if args.diff:
        a, b = args.diff
        if Path(a).exists() and Path(b).exists():
            changes = diff_documents(load_manifest(Path(a)), load_manifest(Path(b)))
        else:
            specs, _ = fleet_of(args)
            wanted = [s for s in specs if s.name in (a, b)]
            missing = [n for n in (a, b) if n not in {s.name for s in wanted}]
            if missing:
                raise ConfigError(f"rigwatch: {', '.join(missing)}: neither a manifest file "
                                  "nor a host of the fleet")
            got = {r.spec.name: r for r in _collect(wanted)}
            for name in (a, b):
                if got[name].hello is None:
                    raise ConfigError(f"rigwatch: {name}: no answer: {got[name].failure}")
            doc = fleet_manifest({n: r.hello for n, r in got.items() if r.hello}, {})
            changes = {f"{a} → {b}": diff(doc["hosts"][a], doc["hosts"][b],
                                          ignore_leaves=IDENTITY_LEAVES)}
            changes = {k: v for k, v in changes.items() if v}
        for host, items in changes.items():
            print(f"{host}:")
            for change in items:
                print(f"  {change.line()}")
        if not changes:
            print("no differences", file=sys.stderr)
        return 1 if changes else 0
    specs, _ = fleet_of(args)
    warn_insecure(specs)
    results = _collect(specs)
    doc = fleet_manifest({r.spec.name: r.hello for r in results if r.hello is not None},
                         {r.spec.name: r.failure or "no hello" for r in results
                          if r.hello is None})
    if args.output:
        write_manifest(doc, Path(args.output), args.format)
        print(f"manifest of {len(doc['hosts'])} hosts written to {args.output}",
              file=sys.stderr)
    else:
        sys.stdout.write(dump(doc, args.format))
    return 1 if doc["unreachable"] else 0


def _run_agent(rest: list[str]) -> int:
    if PRINT_SOURCE in rest:
        return _print_agent_source(rest)
    from probes import agent

    agent.main(rest)
    return 0


PRINT_SOURCE = "--print-source"


def _print_agent_source(rest: list[str]) -> int:
    """Write the agent's source as a host is sent it (a real host's has no simulator)."""
    from probes.transport.bootstrap import agent_source

    p = argparse.ArgumentParser(prog="rigwatch agent",
                                description="Print the agent's source as shipped to hosts.")
    p.add_argument(PRINT_SOURCE, action="store_true", required=True)
    p.add_argument("--with-simulator", action="store_true",
                   help="the source a simulated host is sent (it accepts --simulate)")
    args = p.parse_args(rest)
    sys.stdout.buffer.write(agent_source(simulate=args.with_simulator))
    sys.stdout.flush()
    return 0


def add_recording_arg(p: argparse.ArgumentParser) -> None:
    """``--recording NAME``: read a recording to its end instead of a live fleet."""
    p.add_argument("--recording", metavar="NAME", default=None,
                   help="judge a recording (a file, or a name 'rigwatch replay' lists) as "
                        "it stands at its end, instead of a live fleet")
    p.add_argument("--record-dir", metavar="DIR", default=argparse.SUPPRESS,
                   help="where to look for the recording (default: <data dir>/rigwatch/"
                        "recordings)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, shared by the console and its subcommands."""
    p = argparse.ArgumentParser(
        prog="rigwatch",
        description="Terminal console for GPU training servers. With no arguments it watches "
                    "this machine if it has NVIDIA GPUs, otherwise a built-in demo fleet.")
    p.add_argument("--demo", action="store_true", help="watch the built-in simulated demo fleet")
    p.add_argument("--speed", type=float, default=DEMO_SPEED,
                   help="demo: simulated seconds per real second (default %(default)g)")
    p.add_argument("--theme", default=None, help="start with this theme")
    p.add_argument("--ascii", action="store_true",
                   help="plain ASCII glyphs instead of braille, blocks and boxes (automatic "
                        "on the Linux console and non-UTF-8 locales; RIGWATCH_ASCII=0|1)")
    p.add_argument("--inventory", metavar="FILE", default=None,
                   help="hosts to watch (YAML); default: $RIGWATCH_INVENTORY or "
                        "<config dir>/rigwatch/inventory.yaml when it exists")
    p.add_argument("--settings", metavar="FILE", default=None,
                   help="thresholds and alerts (YAML); default: $RIGWATCH_SETTINGS or "
                        "<config dir>/rigwatch/settings.yaml when it exists")
    p.add_argument("--no-record", action="store_true",
                   help="do not record this session (recording is on by default)")
    p.add_argument("--record-dir", metavar="DIR", default=None,
                   help="where recordings go (default: <data dir>/rigwatch/recordings)")
    p.add_argument("--metrics-textfile", metavar="PATH", default=None,
                   help="write Prometheus text (dcgm-exporter names) here every 15 s, for "
                        "node_exporter's textfile collector")
    p.add_argument("--metrics-port", metavar="PORT", type=int, default=None,
                   help="serve /metrics on 127.0.0.1:PORT")
    p.add_argument("--slurm-job", metavar="ID", default=None,
                   help="watch the nodes of this Slurm job (asked of scontrol); the batch "
                        "host's agent follows the job's StdOut/StdErr")
    p.add_argument("--collectors", metavar="N", type=collector_count, default=None,
                   help="run the SSH sessions in N worker processes (0: in the console's "
                        "own); default: by fleet size and cores (none under 256 hosts)")
    add_prometheus_args(p)
    add_action_args(p)
    add_ibnetdiscover_arg(p)
    sub = p.add_subparsers(dest="command")
    snap = sub.add_parser("snapshot", help="one sample per host, then exit")
    snap.add_argument("--json", action="store_true", help="print JSON on stdout")
    snap.add_argument("--pretty", action="store_true", help="indent the JSON")
    snap.add_argument("--demo", action="store_true", help="snapshot the demo fleet")
    snap.add_argument("--slurm-job", metavar="ID", default=argparse.SUPPRESS,
                      help="the nodes of this Slurm job (from scontrol), and its log's "
                           "findings with rank and host")
    snap.add_argument("--speed", type=float, default=DEMO_SPEED, help=argparse.SUPPRESS)
    # SUPPRESS: "rigwatch --inventory F snapshot" keeps F (a subparser default would win)
    snap.add_argument("--inventory", metavar="FILE", default=argparse.SUPPRESS,
                      help="hosts to snapshot (YAML)")
    add_prometheus_args(snap, sub=True)
    add_recording_arg(snap)
    add_ibnetdiscover_arg(snap, sub=True)
    add_fabric_parser(sub)
    explain = sub.add_parser(
        "explain", help="recognise and explain pasted nvidia-smi / lspci / iostat / topo "
        "output or a kernel, NCCL or training log, in triage order")
    explain.add_argument("--json", action="store_true",
                         help="print one JSON object (shared/EXPLAIN-CONTRACT.md, version 1)")
    explain.add_argument("--kind", default=None,
                         help="treat every input as this kind instead of detecting it")
    explain.add_argument("files", nargs="+", metavar="FILE", help="inputs; '-' is stdin")
    add_ladder_parser(sub)
    add_node_parser(sub)
    report = sub.add_parser("report", help="list incident reports written from the triage "
                            "screen, or print one")
    report.add_argument("name", nargs="?", default=None,
                        help="list number (1 = newest) or file name; omitted: list them all")
    report.add_argument("--json", action="store_true", help="print the JSON form")
    report.add_argument("--dir", default=None, help="reports directory (default: the data dir)")
    pre = sub.add_parser("preflight", help="check every host against the training-server "
                         "rules of thumb (exit 0 pass, 1 warnings, 2 failures)")
    pre.add_argument("--json", action="store_true", help="every check with value, threshold "
                     "and verdict, as JSON")
    pre.add_argument("--settings", metavar="FILE", default=argparse.SUPPRESS,
                     help="thresholds (YAML 'preflight:' section); default: "
                          "$RIGWATCH_SETTINGS or <config dir>/rigwatch/settings.yaml")
    add_prometheus_args(pre, sub=True)
    add_recording_arg(pre)
    man = sub.add_parser("manifest", help="the full hardware/software version list per host, "
                         "or the difference between two manifests or two hosts")
    man.add_argument("--format", choices=("yaml", "json"), default="yaml")
    man.add_argument("-o", "--output", metavar="FILE", default=None,
                     help="write it here (mode 0600) instead of standard output")
    man.add_argument("--diff", nargs=2, metavar=("A", "B"), default=None,
                     help="compare two manifest files, or two hosts of the fleet "
                          "(exit 1 when they differ)")
    for cmd in (pre, man):
        cmd.add_argument("--demo", action="store_true", help="the demo fleet")
        cmd.add_argument("--speed", type=float, default=DEMO_SPEED, help=argparse.SUPPRESS)
        cmd.add_argument("--inventory", metavar="FILE", default=argparse.SUPPRESS,
                         help="hosts (YAML)")
    check = sub.add_parser("check-inventory", help="check an inventory, print its hosts "
                           "(exit 2 and every problem on stderr if it has any)")
    check.add_argument("file", nargs="?", default=None,
                       help="the inventory (default: the one the console would use)")
    rep = sub.add_parser("replay", help="replay a recording through the same screens "
                         "(space pause, +/- speed, [ ] 10 min, < > findings, @ seek); "
                         "without FILE, list the recordings")
    rep.add_argument("file", nargs="?", default=None, metavar="NAME",
                     help="a recording file, or a name the listing printed")
    rep.add_argument("--record-dir", metavar="DIR", default=argparse.SUPPRESS,
                     help="where to list and look for recordings (default: <data dir>/"
                          "rigwatch/recordings)")
    rep.add_argument("--speed", type=float, default=60.0,
                     help="recording seconds per real second (default %(default)g)")
    rep.add_argument("--ascii", action="store_true", default=argparse.SUPPRESS,
                     help="plain ASCII glyphs")
    exp = sub.add_parser("export", help="a recording as JSON lines, CSV (a row per GPU per "
                         "sample) or Prometheus/OpenMetrics text for backfill")
    exp.add_argument("file", metavar="RECORDING")
    exp.add_argument("--format", choices=("jsonl", "csv", "prometheus"), default="jsonl")
    exp.add_argument("-o", "--output", metavar="FILE", default=None)
    sub.add_parser("agent", help="run the host agent here (arguments pass through); "
                   "--print-source [--with-simulator] prints its shipped source",
                   add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rigwatch`` script."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        status = _main(argv)
        sys.stdout.flush()  # inside the try: a reader gone shows up here as often as not
        return status
    except BrokenPipeError:
        # ``rigwatch snapshot --json | head -1``: the reader has what it wanted.  Exit as a
        # command killed by SIGPIPE would, with no traceback and no second error at exit.
        _drop_stdout()
        return EXIT_PIPE_CLOSED


def _main(argv: list[str]) -> int:
    if argv[:1] == ["agent"]:
        return _run_agent(argv[1:])
    args = build_parser().parse_args(argv)
    if args.speed <= 0:
        print("rigwatch: --speed must be > 0", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "demo", False) and getattr(args, "inventory", None):
        print("rigwatch: --demo and --inventory cannot be used together", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _dispatch(args)
    except ConfigError as exc:
        print(exc.msg, file=sys.stderr)
        return EXIT_USAGE
    except TransportError as exc:  # a source that cannot be read at all (a Prometheus down)
        print(f"rigwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE


EXIT_PIPE_CLOSED = 128 + 13
"""What a shell reports for a command ended by SIGPIPE (13), as ``head`` readers expect."""


def _drop_stdout() -> None:
    """Point standard output at /dev/null so the interpreter's final flush cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


SOURCE_COMMANDS = (None, "snapshot", "preflight", "replay")
"""The commands that read whatever source the arguments name (``probes.sources.registry``)."""


def _dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand ``args`` names (the console when none)."""
    if args.command not in SOURCE_COMMANDS:
        from probes.sources.registry import refuse_source_options

        refuse_source_options(args)
    if args.command == "check-inventory":
        return _run_check_inventory(args)
    if args.command == "snapshot":
        return _run_snapshot(args)
    if args.command == "explain":
        return _run_explain(args)
    if args.command == "ladder":
        return run_ladder(args, _settings(args))
    if args.command == "node":
        return run_node(args, _settings(args))
    if args.command == "report":
        return _run_report(args)
    if args.command == "replay":
        return _run_replay(args)
    if args.command == "export":
        from tui.cli_export import run_export

        return run_export(args)
    if args.command == "preflight":
        return _run_preflight(args)
    if args.command == "manifest":
        return _run_manifest(args)
    if args.command == "fabric":
        return run_fabric(args, inventory_or_none(args))
    return _run_console(args)


if __name__ == "__main__":
    sys.exit(main())
