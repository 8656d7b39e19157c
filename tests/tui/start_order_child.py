"""Child of ``test_start_order.py``: runs the console's entry point on an inventory and
reports, at the moment its collector is spawned, which of the modules the collectors do
not need were already imported and what the recording folder held; then exits (no UI)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

LATE = ("numpy", "probes.sources.replay", "probes.store.recording_reader",
        "probes.sources.recording", "probes.store.recording", "textual")
"""Modules the console needs only after its collectors are on their way."""


def main() -> None:
    inventory, order, record_dir, *extra = sys.argv[1:]
    from probes.sources import collector_start
    from tui import cli

    if order == "before":  # the negative control: the console's order before session 13
        from probes.sources import registry
        from tests.tui.cli_console_before_s13 import SOURCES_BEFORE, run_console_before
        cli._run_console = run_console_before
        registry.SOURCES = SOURCES_BEFORE

    def spawn(_cls: object, _job: object) -> None:
        print(json.dumps({"spawned": True,
                          "imported": [m for m in LATE if m in sys.modules],
                          "recordings": sorted(p.name for p in Path(record_dir).iterdir())}),
              flush=True)
        os._exit(0)

    collector_start.EarlyCollector.spawn = classmethod(spawn)  # type: ignore[assignment]
    cli.main(["--inventory", inventory, "--collectors", "1", "--record-dir", record_dir,
              *extra])
    print(json.dumps({"spawned": False}), flush=True)


if __name__ == "__main__":
    main()
