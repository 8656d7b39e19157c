"""Training throughput from trainers' progress lines (``probes.rules.throughput``).

The logs in ``tests/data/trainlogs`` keep the line shapes of public logs (values changed):

* ``megatron-lm.log``: NVIDIA/Megatron-LM issue #756 (``iteration N/ M | … | elapsed time per
  iteration (ms) | throughput per GPU (TFLOP/s/GPU) | … | global batch size``), the
  ``memory (MB) | allocated | max allocated`` line and the argument dump's ``seq_length``
  (``megatron/training/training.py``);
* ``megatron-deepspeed.log``: epfLLM/Megatron-LLM issue #11 and Megatron-DeepSpeed's
  ``samples per second | tokens per gpu per second (tgs) | TFLOPs`` columns;
* ``torchtitan.log``: pytorch/torchtitan PR #1287 (``[rank0]:[titan] … step: 200  loss: …
  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%``, coloured as torchtitan
  colours its metrics);
* ``deepspeed.log`` / ``deepspeed-old-timer.log``: deepspeedai/DeepSpeed issues #5779
  (``epoch=0/micro_step=…/global_step=…, RunningAvgSamplesPerSec=…``), #2302 (``0/2498,
  RunningAvgSamplesPerSec=…``) and #1825 (``0/40, SamplesPerSec=…``);
* ``hf-trainer.log``: transformers' Trainer — the tqdm bar, an evaluation bar in the middle,
  the ``{'loss': …}`` dicts and the closing ``{'train_runtime': …, 'train_samples_per_second':
  …}`` (``Trainer.train`` / ``speed_metrics``), CRLF line ends;
* ``lightning.log``: PyTorch Lightning's TQDMProgressBar (``Epoch 0:  45%|…| 450/1000
  [02:15<02:45,  3.32it/s, v_num=0, train_loss=…]``) updating with carriage returns;
* ``nanogpt.log``: karpathy/nanoGPT ``train.py`` (``iter N: loss …, time …ms, mfu …%``);
* ``plain-steps.log``: a hand-rolled loop printing ``step N … tokens/s``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.explain.detect import detect_kind, parse_as
from probes.rules.logrules.lines import log_lines
from probes.rules.text import decode, split_lines
from probes.rules.throughput import read_line, series_of
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "trainlogs"


def _throughput(name: str) -> dict[str, Any]:
    lines = split_lines(decode((DATA / name).read_bytes()))
    assert detect_kind(lines) == "log"
    got = parse_as("log", lines).parsed["throughput"]
    assert isinstance(got, dict)
    return got


# name: trainer, unit, per_gpu, points, median (±1 %), extra checks
EXPECTED: dict[str, tuple[str, str, bool, int, float, dict[str, Any]]] = {
    "megatron-lm.log": ("megatron", "tokens/s", False, 30, 96124.0,
                        {"world_size": 16, "tflops_per_gpu": 239.4}),
    "megatron-deepspeed.log": ("megatron", "tokens/s", True, 20, 1890.9, {"tflops_per_gpu": 151.2}),
    "torchtitan.log": ("torchtitan", "tokens/s", True, 30, 5858.5,
                       {"mfu_pct": 34.3, "peak_mem_gib": 49.66}),
    "deepspeed.log": ("deepspeed", "samples/s", False, 30, 16.82, {"peak_mem_gib": 1.0}),
    "deepspeed-old-timer.log": ("deepspeed", "samples/s", False, 3, 83.49, {"peak_mem_gib": 9.02}),
    "hf-trainer.log": ("hf-trainer", "it/s", False, 200, 2.55, {"run_average": 2.527}),
    "lightning.log": ("lightning", "it/s", False, 100, 3.30, {}),
    "nanogpt.log": ("nanogpt", "it/s", False, 30, 7.40, {"mfu_pct": 38.2}),
    "plain-steps.log": ("log", "tokens/s", False, 30, 412337.0, {"peak_mem_gib": 61.2}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_trainer_log_gives_its_throughput_series(name: str) -> None:
    trainer, unit, per_gpu, points, median, extra = EXPECTED[name]
    got = _throughput(name)
    assert (got["trainer"], got["unit"], got["per_gpu"], got["points"]) == (
        trainer, unit, per_gpu, points)
    assert got["median"] == pytest.approx(median, rel=0.01)
    for key, want in extra.items():
        assert got[key] == pytest.approx(want, rel=0.01), key
    assert len(got["series"]) == points and got["series"][0][0] >= 1


def test_the_evaluation_bar_is_not_the_training_series() -> None:
    got = _throughput("hf-trainer.log")
    assert got["max"] < 3.0  # the 11 it/s evaluation bar is left out


def test_megatron_samples_become_tokens_with_the_sequence_length() -> None:
    got = _throughput("megatron-lm.log")
    # 128 sequences of 4096 tokens per ~5.44 s iteration
    assert got["median"] == pytest.approx(128 * 4096 / 5.4449, rel=0.01)


@pytest.mark.parametrize(("line", "field", "value"), [
    ("  5%|▌         | 50/1000 [00:25<08:00,  1.98it/s]", "iters_s", 1.98),
    (" 12%|█▏        | 12/100 [01:10<08:30,  5.80s/it]", "iters_s", 1 / 5.80),
    ("Map: 100%|██████████| 5000/5000 [00:01<00:00, 3419.57 examples/s]", "samples_s", 3419.57),
    ("Epoch 0/9  ━━━━━━━━━━━━━━━━ 450/1000 0:02:15 • 0:02:45 3.32it/s v_num: 0", "iters_s", 3.32),
    ("step 120 | loss 2.1 | 12.5k tok/s", "tokens_s", None),  # "12.5k" is no plain number
])
def test_single_progress_lines(line: str, field: str, value: float | None) -> None:
    r = read_line(line)
    if value is None:
        assert r is None or getattr(r, field) is None
    else:
        assert r is not None and getattr(r, field) == pytest.approx(value, rel=1e-3)


def test_a_log_without_progress_lines_has_no_throughput() -> None:
    lines = ["NCCL INFO Bootstrap : Using eth0:192.0.2.1<0>", "Traceback (most recent call last):"]
    assert series_of(log_lines(lines)) is None
    assert "throughput" not in parse_as("log", lines).parsed


@pytest.mark.parametrize(("line", "world"), [
    (" using world size: 16, data-parallel size: 2, context-parallel size: 1", 16),  # Megatron-LM
    ("  Num processes: 8", 8),  # accelerate
    ("All distributed processes registered. Starting with 8 processes", 8),  # Lightning
    ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16", 16),  # Lightning
    ("[rank0]:[titan] 2025-06-16 22:28:01,102 - root - INFO - Building 1-D device mesh with "
     "['dp_shard'], [8]", 8),  # torchtitan
])
def test_world_size_lines(line: str, world: int) -> None:
    from probes.rules.logrules.lines import peel

    r = read_line(peel(line)[0])
    assert r is not None and r.world_size == world


def test_the_readable_report_names_the_throughput(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    assert main(["explain", str(DATA / "torchtitan.log")]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(line for line in out if line.startswith(str(DATA / "torchtitan.log")))
    assert "torchtitan throughput median 5,858 tokens/s per GPU over 30 readings" in head
