"""Training-log rules: every shared training sample, no false alarms on kernel and NCCL logs,
the formats around the samples, and junk input."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from probes.rules.logrules import training
from probes.rules.logrules.lines import log_lines
from probes.rules.result import ExplainFinding, merge_same
from probes.rules.text import decode, split_lines
from probes.triage import Severity, Step
from tests.conftest import FIXTURES
from tests.support.explain_expect import expectation, finding_set, fixture_input
from tests.support.paths import TEST_DATA

TRAINING = sorted((FIXTURES / "training").glob("*.txt"))
OTHER_LOGS = sorted((FIXTURES / "kernel").glob("*.txt")) + sorted(
    (FIXTURES / "nccl").glob("*.txt"))
HEALTHY = TEST_DATA / "healthy"


def _scan_bytes(raw: bytes) -> list[ExplainFinding]:
    return merge_same(training.scan(log_lines(split_lines(decode(raw)))))


def _scan(text: str) -> list[ExplainFinding]:
    return _scan_bytes(text.encode())


def _codes(text: str) -> set[str]:
    return {f.code for f in _scan(text)}


def _one(text: str, code: str) -> ExplainFinding:
    found = _scan(text)
    assert [f.code for f in found] == [code], found
    return found[0]


def _sample(name: str) -> list[ExplainFinding]:
    return _scan_bytes(fixture_input(FIXTURES / "training" / name))


# --- the shared samples --------------------------------------------------------------------


@pytest.mark.parametrize("sample", TRAINING, ids=lambda p: p.stem)
def test_training_sample_gives_exactly_its_findings(sample: Path) -> None:
    found = _scan_bytes(fixture_input(sample))
    got = [f.to_json(sample.name) for f in found]
    assert finding_set(got) == finding_set(expectation(sample)["findings"])
    assert all(f.step is Step.MODEL for f in found)
    assert len({f.key for f in found}) == len(found)


@pytest.mark.parametrize("sample", OTHER_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_kernel_and_nccl_samples_give_no_model_finding(sample: Path) -> None:
    """None of these holds a model error (nccl/22's traceback wraps an NCCL failure,
    kernel/22's "Out of memory" is the host OOM killer, not CUDA)."""
    assert _scan_bytes(fixture_input(sample)) == []
    model = {k for k in finding_set(expectation(sample)["findings"]) if k[0] == "model"}
    assert model == set()


def test_there_are_samples() -> None:
    assert len(TRAINING) >= 9
    assert len(OTHER_LOGS) >= 26


def test_sample_oom_21_amounts_and_fragmentation_advice() -> None:
    (f,) = _sample("02-oom-2.1-format-capacty-typo.txt")
    assert (f.severity, f.gpu, f.line, f.count) == (Severity.CRITICAL, "GPU0", 1, 1)
    assert f.extra["requested_mib"] == 64.0
    assert f.extra["total_mib"] == pytest.approx(7.79 * 1024)
    assert f.extra["free_mib"] == pytest.approx(22.31)
    assert f.extra["process_in_use_mib"] == pytest.approx(7.12 * 1024)
    assert f.extra["allocated_mib"] == pytest.approx(6.41 * 1024)
    assert f.extra["reserved_unallocated_mib"] == pytest.approx(512.64)
    assert f.extra["reserved_mib"] == pytest.approx(6.41 * 1024 + 512.64)
    for shown in ("64.00 MiB", "22.31 MiB", "7.79 GiB", "512.64 MiB"):
        assert shown in f.summary
    assert "expandable_segments:True" in f.action
    assert "other process" in f.action


def test_sample_oom_old_format_gpu_in_parentheses() -> None:
    (f,) = _sample("04-oom-old-format-gpu-paren.txt")
    assert f.gpu == "GPU1"
    assert f.extra["allocated_mib"] == pytest.approx(9.61 * 1024)
    assert f.extra["reserved_mib"] == pytest.approx(9.87 * 1024)
    assert f.extra["reserved_unallocated_mib"] == pytest.approx(0.26 * 1024)
    assert f.extra["free_mib"] == pytest.approx(18.44)
    assert "40.00 MiB" in f.summary and "10.76 GiB" in f.summary


def test_sample_illegal_memory_access_names_frame_and_points_at_xids() -> None:
    (f,) = _sample("08-illegal-memory-access-windows-traceback-cjk.txt")
    assert (f.severity, f.line) == (Severity.CRITICAL, 3)
    assert str(f.extra["frame"]).endswith("module.py:918 in <lambda>")
    assert "module.py:918" in f.summary
    assert f.extra["asynchronous"] is True
    assert "Xid 13, 31 or 43" in f.action
    assert "```" not in f.evidence


def test_sample_device_side_assert_kernel_and_condition() -> None:
    (f,) = _sample("10-device-side-assert-2018-thcudacheck.txt")
    assert f.extra["kernel"] == "cunn_ClassNLLCriterion_updateOutput_kernel"
    assert f.extra["site"] == "ClassNLLCriterion.cu:87"
    assert f.extra["condition"] == "t >= 0 && t < n_classes"
    assert "n_classes" in f.summary and "class label" in f.summary
    assert f.extra["frame"] == "/home/ml/projects/seg-baseline/train.py:142 in <module>"
    assert "ranks" not in f.extra, "a .cu:87: source location is not an srun rank label"
    assert f.line == 1


def test_sample_deepspeed_ladder_is_info_with_lowest_scale() -> None:
    (f,) = _sample("12-deepspeed-overflow-hysteresis-loss-scaler.txt")
    assert f.severity is Severity.INFO
    assert f.extra["lowest_scale"] == 536870912
    assert f.extra["overflows"] == 4
    assert f.time == "2023-09-14 11:03:52,117"


def test_sample_stuck_at_scale_one_is_critical() -> None:
    (f,) = _sample("14-deepspeed-zero2-stuck-at-scale-1.txt")
    assert (f.severity, f.count, f.extra["lowest_scale"]) == (Severity.CRITICAL, 3, 1)
    assert "stuck" in f.summary
    assert f.time == "2022-03-08 16:12:07,431"
    assert f.evidence.startswith("[2022-03-08 16:12:07,431]")


def test_sample_mmdet_three_handlers_two_records_one_finding() -> None:
    (f,) = _sample("16-mmdet-loss-nan-duplicated-loggers.txt")
    assert (f.severity, f.count, f.line) == (Severity.WARNING, 2, 1)
    assert f.extra["keys"] == ["loss_cls", "loss_bbox", "loss_centerness", "loss"]


def test_sample_fairseq_not_yet_at_minimum() -> None:
    (f,) = _sample("18-fairseq-new-logging-overflow.txt")
    assert (f.severity, f.line, f.count) == (Severity.INFO, 5, 2)
    assert f.extra["lowest_scale"] == 0.00048828125


# --- cuda-oom formats ----------------------------------------------------------------------

TORCH_23_OOM = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 3.81 MiB is free. Process 2297 has 25.58 GiB memory "
    "in use. Process 5342 has 53.55 GiB memory in use. Of the allocated memory 52.33 GiB is "
    "allocated by PyTorch, and 728.52 MiB is reserved by PyTorch but unallocated. If reserved "
    "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
    "True to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def test_torch_23_oom_with_other_processes_on_the_gpu() -> None:
    f = _one(TORCH_23_OOM, "cuda-oom")
    assert f.extra["processes"] == [{"pid": 2297, "mib": pytest.approx(25.58 * 1024)},
                                    {"pid": 5342, "mib": pytest.approx(53.55 * 1024)}]
    assert f.extra["reserved_mib"] == pytest.approx(52.33 * 1024 + 728.52)
    assert f.extra["outside_mib"] == pytest.approx(79.15 * 1024 - 3.81 - 52.33 * 1024 - 728.52)
    assert "2 processes" in f.summary
    assert f.action.startswith("On GPU0 2 processes hold memory")
    assert "nvidia-smi --query-compute-apps" in f.action


def test_torch_25_namespace_and_this_process_wording() -> None:
    f = _one("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 7 "
             "has a total capacity of 139.72 GiB of which 1.12 GiB is free. Including non-"
             "PyTorch memory, this process has 138.59 GiB memory in use. Of the allocated "
             "memory 130.02 GiB is allocated by PyTorch, and 7.01 GiB is reserved by PyTorch "
             "but unallocated.", "cuda-oom")
    assert f.gpu == "GPU7"
    assert f.extra["requested_mib"] == 1536.0
    assert f.extra["reserved_unallocated_mib"] == pytest.approx(7.01 * 1024)
    assert "expandable_segments" in f.action
    assert "processes hold memory" not in f.action


def test_short_cuda_error_out_of_memory_with_traceback_frame() -> None:
    f = _one('Traceback (most recent call last):\n  File "/srv/app/train.py", line 88, in '
             '<module>\n    x = x.cuda()\nRuntimeError: CUDA error: out of memory\nCUDA kernel '
             'errors might be asynchronously reported at some other API call, so the '
             'stacktrace below might be incorrect.', "cuda-oom")
    assert (f.line, f.gpu) == (4, None)
    assert f.extra["frame"] == "/srv/app/train.py:88 in <module>"
    assert "train.py:88 in <module>" in f.summary
    assert "requested_mib" not in f.extra


def test_old_thc_and_cached_wordings() -> None:
    f = _one("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=663 error=2 : out "
             "of memory\nRuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/"
             "src/THC/THCCachingAllocator.cpp:510", "cuda-oom")
    assert f.count == 2
    f = _one("RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 11.17 GiB "
             "total capacity; 10.46 GiB already allocated; 6.81 MiB free; 432.00 KiB cached)",
             "cuda-oom")
    assert f.extra["reserved_unallocated_mib"] == pytest.approx(432 / 1024, abs=1e-3)
    assert f.extra["reserved_mib"] == pytest.approx(10.46 * 1024 + 432 / 1024, abs=1e-3)


def test_two_ranks_interleaved_are_one_finding_listing_both_gpus() -> None:
    text = ("[rank0]: Traceback (most recent call last):\n"
            "[rank1]: Traceback (most recent call last):\n"
            '[rank0]:   File "/srv/jobs/train.py", line 51, in <module>\n'
            '[rank1]:   File "/srv/jobs/train.py", line 51, in <module>\n'
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
            "GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free. Including non-"
            "PyTorch memory, this process has 78.07 GiB memory in use.\n"
            "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
            "GPU 1 has a total capacity of 79.11 GiB of which 1.10 GiB is free. Including non-"
            "PyTorch memory, this process has 77.99 GiB memory in use.\n")
    f = _one(text, "cuda-oom")
    assert (f.count, f.line, f.gpu) == (2, 5, "GPU0")
    assert f.extra["gpus"] == ["GPU0", "GPU1"]
    assert f.extra["ranks"] == [0, 1]
    assert "2 GPUs (GPU0, GPU1)" in f.summary and "ranks 0, 1" in f.summary
    assert f.extra["frame"] == "/srv/jobs/train.py:51 in <module>"


def test_record_glued_to_a_progress_bar_keeps_its_own_time() -> None:
    f = _one("  0%|\u258b" + " " * 150 + "| 131/30517 [00:52<3:21:40,  2.51it/s][2022-03-08 "
             "16:12:07,829] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping "
             "step. Attempted loss scale: 4, reducing to 2", "loss-scale-overflow")
    assert f.time == "2022-03-08 16:12:07,829"
    assert "   " not in f.evidence


def test_crlf_input() -> None:
    raw = (b"Epoch 1:  12%|#2  | 120/1000\r\n"
           b"RuntimeError: CUDA out of memory. Tried to allocate 40.00 MiB (GPU 1; 10.76 GiB "
           b"total capacity; 9.61 GiB already allocated; 18.44 MiB free; 9.87 GiB reserved in "
           b"total by PyTorch)\r\n")
    (f,) = _scan_bytes(raw)
    assert (f.code, f.line, f.gpu) == ("cuda-oom", 2, "GPU1")
    assert f.extra["reserved_mib"] == pytest.approx(9.87 * 1024)
    assert "\r" not in f.evidence


@pytest.mark.parametrize("cut", [
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a "
    "total capac",
    "torch.cuda.OutOfMemoryError: CUDA out of mem",
    "torch.cuda.OutOfMemoryError",
    "RuntimeError: CUDA out of memory. Tried to allocate 40.00 MiB (GPU 1; 10.7",
])
def test_truncated_oom_line_is_still_an_oom(cut: str) -> None:
    f = _one(cut, "cuda-oom")
    assert f.severity is Severity.CRITICAL
    if "Tried to allocate 64.00" in cut:
        assert (f.extra["requested_mib"], f.gpu) == (64.0, "GPU0")
        assert "total_mib" not in f.extra


def test_oom_report_wrapped_onto_the_next_line() -> None:
    f = _one("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 3 "
             "has a total capacity of\n79.10 GiB of which 512.00 KiB is free. Including non-"
             "PyTorch memory, this process has 79.09 GiB memory in use.", "cuda-oom")
    assert f.extra["total_mib"] == pytest.approx(79.10 * 1024)
    assert f.extra["free_mib"] == 0.5
    assert f.count == 1


def test_tensorflow_and_flattened_srun_ooms() -> None:
    f = _one("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
             "allocating tensor with shape[256,1024,1024] and type float on /job:localhost/"
             "replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc", "cuda-oom")
    assert f.gpu == "GPU0"
    f = _one('13: File "/app/train.py", line 9, in step 13: out = model(x) 13: torch.cuda.'
             "OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 5 has a "
             "total capacity of 79.11 GiB of which 3.00 GiB is free.", "cuda-oom")
    assert (f.gpu, f.extra["frame"]) == ("GPU5", "/app/train.py:9 in step")


def test_parse_oom_units() -> None:
    r = training.parse_oom("Tried to allocate 3.00 TiB. GPU 2 has a total capacity of 80.00 GiB "
                           "of which 0 bytes is free.")
    assert (r.gpu, r.requested_mib, r.total_mib, r.free_mib) == (2, 3 * 1048576.0, 81920.0, 0.0)
    assert training.to_mib("1", "parsec") is None


# --- illegal memory access, device-side assert ---------------------------------------------


def test_illegal_memory_access_async_hint_and_enum_forms() -> None:
    f = _one("[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
             "[rank3]: CUDA kernel errors might be asynchronously reported at some other API "
             "call, so the stacktrace below might be incorrect.\n"
             "[rank3]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
             "illegal-memory-access")
    assert (f.severity, f.extra["ranks"], f.extra["asynchronous"]) == (Severity.CRITICAL, [3],
                                                                        True)
    assert "asynchronously" in f.summary and "rank 3" in f.summary
    assert _codes("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA_ERROR_ILLEGAL_ADDRESS: "
                  "an illegal memory access was encountered") == {"illegal-memory-access"}
    assert _codes("cudaErrorIllegalAddress") == {"illegal-memory-access"}


def test_cuda_hints_and_c10_frames_alone_are_nothing() -> None:
    assert _scan("CUDA kernel errors might be asynchronously reported at some other API call, "
                 "so the stacktrace below might be incorrect.\nFor debugging consider passing "
                 "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-"
                 "side assertions.\nframe #3: c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() "
                 "+ 0xa0 (0x7f3ae0a2a3f0 in /x/libtorch_cuda.so)") == []


def test_device_side_assert_from_index_kernel() -> None:
    site = "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], "
    cond = 'Assertion `index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.'
    text = (f"{site}thread: [0,0,0] {cond}\n{site}thread: [1,0,0] {cond}\n"
            "RuntimeError: CUDA error: device-side assert triggered\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
    f = _one(text, "device-side-assert")
    assert (f.extra["kernel"], f.extra["site"]) == ("operator()", "IndexKernel.cu:92")
    assert "index out of bounds" in str(f.extra["condition"])
    assert "vocabulary" in f.summary
    assert (f.line, f.count) == (1, 3)


def test_device_side_assert_kernel_name_from_templated_signature() -> None:
    f = _one("../aten/src/ATen/native/cuda/Indexing.cu:1289: void at::native::(anonymous "
             "namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(at::"
             "cuda::detail::TensorInfo<T, IndexType>, long): block: [78,0,0], thread: [96,0,0] "
             "Assertion `srcIndex < srcSelectDimSize` failed.", "device-side-assert")
    assert f.extra["kernel"] == "indexSelectLargeIndex"
    assert f.extra["condition"] == "srcIndex < srcSelectDimSize"


def test_windows_device_side_assert_path() -> None:
    f = _one(r"C:\cb\pytorch_1000000000000\work\aten\src\ATen\native\cuda\Loss.cu:250: block: "
             r"[0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
             "device-side-assert")
    assert f.extra["site"] == "Loss.cu:250"


# --- loss-nan ------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "1875/1875 [==============================] - 5s 3ms/step - loss: inf - accuracy: 0.0987",
    "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.9e-05, 'epoch': 0.41}",
    "Epoch 3:  41%|####1     | 410/1000 [02:11<03:09, loss=nan, v_num=7]",
    " iteration      300/  100000 | lm loss: NaN | loss scale: 1.0 | grad norm: 0.812 |",
    "step 1200: train loss tensor(nan, device='cuda:0', grad_fn=<AddBackward0>)",
    "WARNING: loss is NaN, skipping batch",
    "FloatingPointError: Loss became infinite or NaN at iteration=23!",
    " iteration      310/  100000 | lm loss: 2.41 | number of nan iterations:   3 |",
    "loss: -inf",
])
def test_loss_nan_formats(line: str) -> None:
    f = _one(line, "loss-nan")
    assert (f.severity, f.step) == (Severity.WARNING, Step.MODEL)


@pytest.mark.parametrize("line", [
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.1}",
    "epoch 004 | loss 7.912 | gnorm nan | loss_scale 0.0",
    "best_loss: inf",
    "EarlyStopping: best_val_loss=inf",
    "loss_scale: inf",
    " iteration 200 | lm loss: 2.41 | number of skipped iterations:   0 | number of nan "
    "iterations:   0 |",
    "model: nanogpt-124m, loss: 3.21, inference loss=0.5 time=inf",
    "    loss = model(batch)",
    "skip_nan_loss ........ True",
])
def test_not_a_nan_loss(line: str) -> None:
    assert _scan(line) == []


# --- loss-scale-overflow -------------------------------------------------------------------


def test_apex_ladder_reaching_minimum_is_critical() -> None:
    text = ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
            "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0\n"
            "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.5\n"
            "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably "
            "exploding. Try lowering the learning rate, using gradient clipping or increasing "
            "the batch size.\n")
    f = _one(text, "loss-scale-overflow")
    assert (f.severity, f.line, f.count) == (Severity.CRITICAL, 4, 4)
    assert (f.extra["lowest_scale"], f.extra["highest_scale"]) == (0.0001, 32768.0)
    assert "minimum (0.0001)" in f.summary
    only_ladder = "\n".join(text.splitlines()[:3])
    g = _one(only_ladder, "loss-scale-overflow")
    assert (g.severity, g.line, g.extra["lowest_scale"]) == (Severity.INFO, 1, 0.5)
    assert "32768 to 0.5" in g.summary


def test_deepspeed_minimum_exception_and_older_wording() -> None:
    f = _one("[2024-01-02 03:04:05,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
             "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1\n"
             "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
             "Exiting run.", "loss-scale-overflow")
    assert (f.severity, f.line, f.extra["lowest_scale"]) == (Severity.CRITICAL, 2, 1.0)
    f = _one("[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: "
             "65536, reducing to 32768", "loss-scale-overflow")
    assert f.severity is Severity.INFO
    f = _one("| WARNING | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
             "setting loss scale to: 64.0", "loss-scale-overflow")
    assert f.extra["lowest_scale"] == 64.0


def test_healthy_training_progress_is_silent() -> None:
    path = HEALTHY / "training-progress.txt"
    if not path.is_file():
        pytest.skip("healthy sample not present")
    assert _scan_bytes(path.read_bytes()) == []


def test_prose_and_source_lines_mentioning_oom_are_not_ooms() -> None:
    assert _scan("    except torch.cuda.OutOfMemoryError:\n"
                 "To avoid CUDA out of memory errors, lower the batch size\n"
                 "[ 9.1] Out of memory: Killed process 4242 (python) total-vm:1kB\n"
                 "    if isinstance(e, torch.cuda.OutOfMemoryError):") == []


def test_traceback_of_another_exception_is_not_a_model_finding() -> None:
    assert _scan('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                 "    import foo\nModuleNotFoundError: No module named 'foo'") == []


def test_several_codes_in_one_log_are_separate_findings_in_line_order() -> None:
    found = _scan("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, "
                  "reducing to 1\n{'loss': nan}\nRuntimeError: CUDA error: an illegal memory "
                  "access was encountered\n")
    assert [f.code for f in found] == ["loss-scale-overflow", "loss-nan",
                                       "illegal-memory-access"]


# --- never raise ---------------------------------------------------------------------------


def _fuzz_inputs() -> list[bytes]:
    rng = random.Random(1234)
    alphabet = ("CUDA out of memory. Tried to allocate GiB MiB GPU loss: nan inf OVERFLOW! "
                "Attempted loss scale: reducing to Assertion ` block: [ thread: ] File \" line "
                "in Traceback : ; ( ) \r \t \ufffd \x00 ```> [rank3]: 13: 0123456789.")
    words = alphabet.split(" ")
    out = []
    for _ in range(150):
        n = rng.randint(0, 60)
        out.append(" ".join(rng.choice(words) for _ in range(n)).encode("utf-8", "replace"))
        out.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))))
    out.append(("x" * 5000 + " CUDA out of memory. Tried to allocate 1 GiB").encode())
    out.append(b"loss: nan " * 3000)
    return out


def test_truncating_every_sample_at_every_line_and_char_never_raises() -> None:
    for sample in TRAINING + OTHER_LOGS:
        raw = fixture_input(sample)
        lines = raw.split(b"\n")
        for k in range(len(lines) + 1):
            _scan_bytes(b"\n".join(lines[:k]))
        for cut in range(0, len(raw), max(1, len(raw) // 40)):
            for f in _scan_bytes(raw[:cut]):
                assert f.step is Step.MODEL and f.line >= 1


def test_garbage_never_raises() -> None:
    for raw in _fuzz_inputs():
        for f in _scan_bytes(raw):
            assert f.evidence and len(f.evidence) <= training.EVIDENCE_MAX + 1
    assert training.scan([]) == []
    assert _scan("") == []


def test_identical_lines_repeated_are_records_not_handler_echoes() -> None:
    f = _one("{'loss': nan, 'epoch': 1.0}\n" * 5, "loss-nan")
    assert f.count == 5
    f = _one("[ INFO ] loss: nan\n[ INFO ]  loss: nan\nmain - INFO - loss: nan\n", "loss-nan")
    assert f.count == 1


def test_pathological_long_lines_stay_fast() -> None:
    import time
    start = time.monotonic()
    for text in ("a" * 100_000 + " block: [0,0,0], thread: [1,0,0] Assertion `x` failed.",
                 "_".join(["abc"] * 30_000) + " loss: nan",
                 'File "x.py", line 1, in f ' * 20_000 + "CUDA error: an illegal memory access",
                 "CUDA out of memory. Tried to allocate " + "1.0 " * 30_000):
        assert len(_scan(text)) == 1
    assert time.monotonic() - start < 5.0
