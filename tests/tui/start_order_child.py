"""Child of ``test_start_order.py``: runs the console's entry point on an inventory and
reports, at the moment its collector is spawned (``spawn``) or its app is run (``run``),
which of the modules the collectors do not need were already imported, what the
recording folder held and the garbage collector's state; then exits (no UI)."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

LATE = ("numpy", "probes.sources.replay", "probes.store.recording_reader",
        "probes.sources.recording", "probes.store.recording", "textual")
"""Modules the console needs only after its collectors are on their way."""


def main() -> None:
    inventory, order, when, record_dir, *extra = sys.argv[1:]
    from probes.sources import collector_start
    from tui import cli

    if order == "before":  # the negative control: the console's order before session 13
        from probes.sources import registry
        from tests.tui.cli_console_before_s13 import SOURCES_BEFORE, run_console_before
        cli._run_console = run_console_before
        registry.SOURCES = SOURCES_BEFORE

    def report(**more: Any) -> None:
        print(json.dumps({"imported": [m for m in LATE if m in sys.modules],
                          "recordings": sorted(p.name for p in Path(record_dir).iterdir()),
                          "gc_enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                          **more}), flush=True)
        os._exit(0)

    def spawned(_cls: Any, _job: Any) -> None:
        if when == "spawn":
            report(at="spawn")
        # else no process: the child stops at the app's run, before its backend runs

    collector_start.EarlyCollector.spawn = classmethod(spawned)  # type: ignore[assignment]
    if when == "run":
        from tui.app import RigwatchApp

        RigwatchApp.run = lambda self, *a, **kw: report(at="run")  # type: ignore[method-assign]
    status = cli.main(["--inventory", inventory, "--collectors", "1", "--record-dir",
                       record_dir, *extra])
    report(at="returned", status=status)


if __name__ == "__main__":
    main()
