"""``rigwatch ladder``: the scale-up ladder from job logs, recordings and the demo runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probes.analysis.limits import LadderLimits
from probes.outputs.ladder import ladder, render, run_of, run_of_log, runs_of
from probes.store.recording import Recorder
from probes.wire.protocol import decode_line
from tests.conftest import AGENT_SOURCE
from tui.cli import main
from tui.cli_ladder import demo_logs


def test_the_demo_ladder_shows_efficiency_and_names_communication(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ladder", "--demo"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[3:]}
    assert rows["demo-1gpu.log"].split()[1:3] == ["1", "1"] and "baseline" in rows["demo-1gpu.log"]
    eight = rows["demo-8gpu-1node.log"]
    assert " 8 " in eight and "95%" in eight and "scales well" in eight
    two = rows["demo-16gpu-2nodes.log"]
    assert " 16 " in two and " 2 " in two and "55%" in two
    assert "likely bottleneck: communication (nccl-bandwidth-low)" in two
    assert "GiB" in two


def test_logs_on_disk_give_the_same_table(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for name, lines in demo_logs():
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(path))
    assert main(["ladder", *reversed(paths)]) == 0  # any order: smallest run first
    from_files = capsys.readouterr().out
    assert main(["ladder", "--demo"]) == 0
    assert from_files == capsys.readouterr().out


def test_a_run_without_a_gpu_count_or_throughput_says_so() -> None:
    steps = ladder([run_of_log("a.log", ["step 10 | 1,000 tokens/s", "step 20 | 1,010 tokens/s"]),
                    run_of_log("b.log", ["hello"])])
    text = render(steps)
    assert "GPU count unknown" in text and "no throughput in the input" in text


def test_unreadable_inputs_are_one_line_and_exit_2(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ladder", str(tmp_path / "missing.log")]) == 2
    assert "missing.log" in capsys.readouterr().err
    assert main(["ladder"]) == 2


def test_a_recording_gives_gpus_memory_and_the_consoles_findings(tmp_path: Path) -> None:
    """A recorded run of the simulated job with GPU 5 throttling: the GPUs come from the
    job's processes, the peak from their memory, the verdict from the console's findings."""
    args = ["--simulate", "train,throttle:5", "--interval", "60", "--fast", "--count", "50",
            "--seed", "3", "--hostname=gpu-c01"]
    proc = subprocess.run([sys.executable, "-I", "-", *args], input=AGENT_SOURCE,
                          capture_output=True, check=True, timeout=120)
    path = tmp_path / "run.rigwatch"
    with Recorder(path, "test", ["gpu-c01"], flush_interval_s=0.05) as rec:
        for line in proc.stdout.splitlines():
            item = decode_line(line)
            rec.record("gpu-c01", float(getattr(item, "ts", 0.0) or 0.0), item)
    run = run_of(str(path))
    assert run.gpus == 8 and run.nodes == 1
    assert run.peak_mem_gib is not None and 55.0 < run.peak_mem_gib < 80.0
    assert run.speed is not None and run.speed.unit == "tokens/s"
    codes = {c for c, _ in run.findings}
    assert "throughput-drop" in codes and "throttled-while-busy" in codes
    base = run_of_log("one.log", demo_logs()[0][1])
    (_, step) = ladder([base, run])
    assert "likely bottleneck: thermal/power (" in step.verdict


def test_independent_jobs_of_a_recording_are_separate_runs(tmp_path: Path) -> None:
    """The demo's hosts each run their own 8-rank job: two hosts are two runs of 8 GPUs,
    never one run of 16 (issue #34 item 8)."""
    path = tmp_path / "two.rigwatch"
    with Recorder(path, "test", ["gpu-c01", "gpu-c02"], flush_interval_s=0.05) as rec:
        for seed, host in ((1, "gpu-c01"), (2, "gpu-c02")):
            args = ["--simulate", "train", "--interval", "60", "--fast", "--count", "12",
                    "--seed", str(seed), f"--hostname={host}"]
            proc = subprocess.run([sys.executable, "-I", "-", *args], input=AGENT_SOURCE,
                                  capture_output=True, check=True, timeout=120)
            for line in proc.stdout.splitlines():
                item = decode_line(line)
                rec.record(host, float(getattr(item, "ts", 0.0) or 0.0), item)
    runs = runs_of(str(path))
    assert [(r.gpus, r.nodes) for r in runs] == [(8, 1), (8, 1)]
    assert [r.name for r in runs] == ["two.rigwatch job 48201", "two.rigwatch job 48202"]


def test_a_logs_gpu_count_comes_from_nccls_nranks() -> None:
    """No world size and no nccl-tests rank lines: NCCL's init lines say ``nranks 16``."""
    init = ("gpu-b07:983:1261 [{d}] NCCL INFO comm 0x55f0 rank {r} nranks 16 cudaDev {d} "
            "nvmlDev {d} busId 59000 commId 0x5ae7 - Init COMPLETE")
    lines = [init.format(r=r, d=r % 8) for r in range(16)]
    lines += [f"step {i} | loss 2.{i} | tokens/s 52,000" for i in range(1, 30)]
    run = run_of_log("nranks.log", lines)
    assert run.gpus == 16


def test_good_efficiency_is_the_operators_limit(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's 8-GPU step runs at 95 %: it scales well by the default 0.9, and not by a
    ``ladder: {good_efficiency: 0.96}`` settings file (which names no cause, since the run
    has none)."""
    runs = [run_of_log(name, lines) for name, lines in demo_logs()]
    eight = {s.run.name: s for s in ladder(runs)}["demo-8gpu-1node.log"]
    assert eight.verdict == "scales well"
    strict = {s.run.name: s for s in ladder(runs, LadderLimits(good_efficiency=0.96))}
    assert strict["demo-8gpu-1node.log"].verdict.startswith("scaling loss with no finding")
    settings = tmp_path / "settings.yaml"
    settings.write_text("ladder:\n  good_efficiency: 0.96\n", encoding="utf-8")
    assert main(["ladder", "--demo", "--settings", str(settings)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[3:]}
    assert "scaling loss with no finding" in rows["demo-8gpu-1node.log"]
    assert main(["--settings", str(settings), "ladder", "--demo"]) == 0
    assert "scales well" not in capsys.readouterr().out
    settings.write_text("ladder:\n  good_eficiency: 0.96\n", encoding="utf-8")
    assert main(["ladder", "--demo", "--settings", str(settings)]) == 2
    err = capsys.readouterr().err
    assert "good_eficiency" in err and "good_efficiency" in err and ":2:" in err
