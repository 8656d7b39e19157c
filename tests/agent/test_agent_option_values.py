"""Inventory values that look like options (a log glob or dataset path starting with "-")
reach the agent as data: ``agent_args`` sends them as ``--option=VALUE`` (review finding 10).

Before the fix ``logs: ["--once"]`` made the agent's argparse fail ("argument --tail:
expected one argument") and the host showed FAILED.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from probes.config.fleet import HostSpec
from tests.conftest import AGENT_SOURCE, REPO


def test_option_like_values_are_joined_to_their_option() -> None:
    spec = HostSpec("h", logs=("--once", "-r*.log"), datasets=("-x",), simulate=("healthy",))
    args = spec.agent_args(kernel_after="--count=0")
    assert "--tail=--once" in args and "--tail=-r*.log" in args and "--dataset=-x" in args
    assert "--kernel-after-cursor=--count=0" in args and "--hostname=h" in args
    assert "--once" not in args and "--count=0" not in args


def test_a_real_agent_tails_a_log_whose_glob_starts_with_a_dash(tmp_path: Path) -> None:
    (tmp_path / "-rank0.log").write_text("old line\n")
    spec = HostSpec("h", logs=("--once", "-rank*.log"), datasets=("-x",), interval_s=0.2,
                    extra_args=("--count", "4"))
    proc = subprocess.Popen([sys.executable, "-I", "-", *spec.agent_args()], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(AGENT_SOURCE)
    proc.stdin.close()
    hello = json.loads(proc.stdout.readline())
    with (tmp_path / "-rank0.log").open("a") as f:
        f.write("NCCL WARN new line\n")
    rest = [json.loads(x) for x in proc.stdout.read().decode().splitlines()]
    assert proc.wait(timeout=30) == 0, proc.stderr.read().decode()
    assert hello["type"] == "hello"
    assert [d["path"] for d in hello["datasets"]] == ["-x"]
    events = [(m["source"], m["line"]) for m in rest if m["type"] == "event"]
    assert events == [("job:-rank0.log", "NCCL WARN new line")]
    assert sum(m["type"] == "sample" for m in rest) == 4  # --once was data, not the flag


def test_snapshot_of_a_host_with_an_option_like_log_glob(tmp_path: Path) -> None:
    """The review's repro, end to end: inventory → local transport → agent → snapshot."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - name: here\n    transport: local\n    python: {sys.executable}\n"
                   f"    logs: [\"--once\"]\n    datasets: [\"-x\"]\n")
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--inventory", str(inv),
                           "--json"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    host = json.loads(proc.stdout)["hosts"][0]
    assert (host["ok"], host["error"]) == (True, None)
    assert [d["path"] for d in host["hello"]["datasets"]] == ["-x"]
