"""Command line: ``rigwatch`` (the console), ``rigwatch snapshot``, ``rigwatch agent``.

Textual is imported only for the console itself, so the other commands run on a
machine without a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from probes.errors import ConfigError
from probes.fleet import (
    DEMO_SPEED,
    HostKeyChecking,
    HostSpec,
    demo_fleet,
    local_has_nvidia_gpu,
    localhost_spec,
)
from probes.inventory import default_inventory_path, load_inventory

EXIT_USAGE = 2


def _fleet(args: argparse.Namespace) -> tuple[list[HostSpec], bool]:
    """The hosts to watch: an inventory (given, or the default file), else this machine if
    it has a GPU, else the demo fleet.

    Raises:
        InventoryError: the inventory cannot be used.
    """
    if args.demo:
        return demo_fleet(speed=args.speed), True
    path = args.inventory
    if path is None and default_inventory_path().is_file():
        path = str(default_inventory_path())
    if path is not None:
        return list(load_inventory(path).hosts), False
    if not local_has_nvidia_gpu():
        return demo_fleet(speed=args.speed), True
    return [localhost_spec()], False


def _warn_insecure(specs: list[HostSpec]) -> None:
    off = [s.name for s in specs if s.transport == "ssh"
           and s.ssh.host_key_checking is HostKeyChecking.OFF]
    if off:
        shown = ", ".join(off[:5]) + (f" and {len(off) - 5} more" if len(off) > 5 else "")
        print(f"rigwatch: WARNING: host key checking is OFF for {shown}: these connections "
              "are not protected against interception", file=sys.stderr)


def _run_check_inventory(args: argparse.Namespace) -> int:
    inv = load_inventory(args.file)
    for s in inv.hosts:
        o = s.ssh
        target = o.address or (f"{s.name} (from ssh config)" if o.ssh_config else s.name)
        if s.transport == "local":
            target = "local"
        user = f"{o.user}@" if o.user else ""
        port = f":{o.port}" if o.port else ""
        jump = f" via {' -> '.join(o.jump)}" if o.jump else ""
        extra = f" simulate={','.join(s.simulate)}" if s.simulate else ""
        tags = ",".join(s.tags) or "-"
        print(f"{s.name:<24} {user}{target}{port}{jump}  python={s.python or 'this'}  "
              f"tags={tags}{extra}")
    print(f"{len(inv.hosts)} hosts", file=sys.stderr)
    _warn_insecure(list(inv.hosts))
    return 0


def _run_console(args: argparse.Namespace) -> int:
    from probes.backend import AgentFleetBackend
    from tui.app import make_app

    specs, demo = _fleet(args)
    _warn_insecure(specs)
    app = make_app(AgentFleetBackend(specs), demo=demo,
                   title=Path(args.inventory).name if args.inventory else None)
    if args.theme:
        app.theme = args.theme
    app.run()
    return app.return_code or 0


def _run_snapshot(args: argparse.Namespace) -> int:
    from probes.snapshot import take_snapshot

    specs, demo = _fleet(args)
    snap = asyncio.run(take_snapshot(specs, demo=demo))
    if args.json:
        json.dump(snap, sys.stdout, indent=2 if args.pretty else None)
        sys.stdout.write("\n")
    else:
        for host in snap["hosts"]:
            sample = host["sample"] or {}
            state = "ok" if host["ok"] else f"FAILED: {host['error']}"
            print(f"{host['name']:<20} {len(sample.get('gpus', [])):>2} GPUs  "
                  f"{len(host['findings']):>2} findings  {state}")
    return 0 if all(h["ok"] for h in snap["hosts"]) else 1


def _run_agent(rest: list[str]) -> int:
    from probes import agent

    agent.main(rest)
    return 0


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
    p.add_argument("--inventory", metavar="FILE", default=None,
                   help="hosts to watch (YAML); default: $RIGWATCH_INVENTORY or "
                        "<config dir>/rigwatch/inventory.yaml when it exists")
    sub = p.add_subparsers(dest="command")
    snap = sub.add_parser("snapshot", help="one sample per host, then exit")
    snap.add_argument("--json", action="store_true", help="print JSON on stdout")
    snap.add_argument("--pretty", action="store_true", help="indent the JSON")
    snap.add_argument("--demo", action="store_true", help="snapshot the demo fleet")
    snap.add_argument("--speed", type=float, default=DEMO_SPEED, help=argparse.SUPPRESS)
    snap.add_argument("--inventory", metavar="FILE", default=None, help="hosts to snapshot")
    check = sub.add_parser("check-inventory", help="validate an inventory, print its hosts")
    check.add_argument("file")
    sub.add_parser("agent", help="run the host agent here (arguments pass through)",
                   add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rigwatch`` script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["agent"]:
        return _run_agent(argv[1:])
    args = build_parser().parse_args(argv)
    if args.speed <= 0:
        print("rigwatch: --speed must be > 0", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "check-inventory":
            return _run_check_inventory(args)
        if args.command == "snapshot":
            return _run_snapshot(args)
        return _run_console(args)
    except ConfigError as exc:
        print(exc.msg, file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
