"""The stand-in fleet bench stays runnable: ``bench_fleet.py --quick --json`` end to end.

Real parts throughout: a stand-in server process speaking SSH on loopback ports with lines
the agent's simulator recorded, the real console (``tui.cli.main`` headless) checking the
server's host keys, and the bare asyncssh floor.  Figures are not asserted (timings on a
shared machine); what is: the JSON's shape, that every host streamed to the console and to
the floor, that keys reached the screen, and that the server served the wire format the
console asked for (no session needed a recording the bench had not made beforehand).
It runs with one collector process (as the console has from a few hundred hosts up) and
``--timeline``: the start-up timeline's hooks, in the console and in the collector started
through them, saw every host's steps, in their order.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

FIELDS = ("hosts", "all_streaming_s", "console_cpu_pct", "rss_mb", "floor_cpu_pct",
          "ratio_to_floor", "key_p95_ms")


@pytest.fixture(autouse=True)
def _needs_ssh_keygen() -> None:
    """The bench makes its client and host keys with ssh-keygen."""
    if not os.access("/usr/bin/ssh-keygen", os.X_OK):
        pytest.skip("ssh-keygen is not installed")


def test_fleet_bench_quick() -> None:
    bench = REPO / "tests" / "bench" / "bench_fleet.py"
    proc = subprocess.run([sys.executable, str(bench), "--quick", "--json", "--timeline",
                           "--collectors", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout[-2000:]  # --json: one object, nothing else
    data = json.loads(lines[0])
    for name in FIELDS:
        assert isinstance(data[name], int | float) and math.isfinite(data[name]), name
    assert data["hosts"] == 64
    assert data["hosts_streaming"] == 64 and data["floor_hosts_streaming"] == 64
    assert data["all_streaming_s"] > 0 and data["rss_mb"] > 0
    # Both windows saw samples, counted by the server that sent them.
    assert data["console"]["host_samples"] > 0 and data["floor"]["host_samples"] > 0
    assert data["server"]["late_recordings"] == 0
    for screen in ("fleet", "host"):
        assert data["keys"][screen]["presses"] > 0
    steps = data["timeline"]
    for step in ("start", "dial", "login", "sent", "cbytes", "ui_batch", "fold"):
        assert steps[step]["n"] == 64, (step, steps[step])
    for step in ("child", "spawn", "coll_main", "tui_imported", "mounted"):
        assert steps[step]["n"] == 1, (step, steps[step])
    order = ("child", "spawn", "coll_main", "start", "dial", "login", "sent", "cbytes")
    for before, after in itertools.pairwise(order):
        assert steps[before]["first"] <= steps[after]["first"], (before, after, steps)
    assert steps["cbytes"]["first"] <= steps["fold"]["first"]
    assert steps["fold"]["last"] <= data["all_streaming_s"] + 0.01
