"""What issue 23's per-line readers cost beside the log rules that were already there.

Every job-log line now also goes through the trainers' progress-line readers
(``probes.rules.throughput.read_line``) and the nccl-tests family's cheap pre-filter (a full
parse only when a line looks like a table row or footer).  Measured on one mixed job log
(kernel-ish, NCCL INFO, torchtitan progress, nccl-tests rows) in interleaved rounds, as CPU
time per line and as a ratio to the kernel+NCCL+training families' scan of the same lines,
the baseline measured in the same run.

    .venv/bin/python tests/bench/bench_throughput_lines.py
"""

# ruff: noqa: E501
# (the sample lines keep their real widths)

from __future__ import annotations

import statistics
import time

from probes.rules.logrules import kernel, nccl, nccl_tests, training
from probes.rules.logrules.lines import log_lines
from probes.rules.throughput.series import collect

N = 40_000
ROUNDS = 5


def _lines() -> list[str]:
    out = []
    for i in range(N):
        k = i % 5
        if k == 0:
            out.append(f"node01:1234:5678 [3] NCCL INFO Channel {i % 32:02d}/32 : 0[3] -> 1[4] via P2P/IPC")
        elif k == 1:
            out.append(f"[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: {i}  loss:  6.1384  "
                       f"memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%")
        elif k == 2:
            out.append(f"   {1 << (i % 30):>9}  {(1 << (i % 30)) // 4:>12}     float     sum      -1    "
                       f"12.90    0.00    0.00      0    12.87    0.00    0.00      0")
        elif k == 3:
            out.append(f"[2024-07-17 19:53:24,981] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, "
                       "skipped=0, lr=[5e-05], mom=[(0.9, 0.999)]")
        else:
            out.append(f"Epoch 0:  45%|████▌     | {i}/100000 [02:15<02:45,  3.32it/s, v_num=0]")
    return out


def main() -> None:
    peeled = log_lines(_lines())
    base, reads, nt = [], [], []
    for _ in range(ROUNDS):
        t = time.process_time()
        for fam in (kernel.scan, nccl.scan, training.scan):
            fam(peeled)
        base.append(time.process_time() - t)
        t = time.process_time()
        collect(peeled)
        reads.append(time.process_time() - t)
        t = time.process_time()
        nccl_tests.scan(peeled)
        nt.append(time.process_time() - t)
    b, r, n = (statistics.median(x) for x in (base, reads, nt))
    us = 1e6 / N
    print(f"lines {N}; baseline (kernel+nccl+training families) {b * us:.2f} µs/line")
    print(f"throughput readers (collect: read_line per line) {r * us:.2f} µs/line, ratio {r / b:.2f}")
    print(f"nccl-tests family {n * us:.2f} µs/line, ratio {n / b:.2f}")


if __name__ == "__main__":
    main()
