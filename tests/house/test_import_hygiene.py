"""probes/ is the headless core: importing all of it must not pull in Textual or Rich."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import probes


def test_probes_never_import_textual_or_rich() -> None:
    modules = [m.name for m in pkgutil.walk_packages(probes.__path__, "probes.")]
    assert "probes.agent" in modules and "probes.transport.session" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_snapshot_command_does_not_load_the_ui() -> None:
    code = (
        "import sys\n"
        "from tui import cli\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
