"""What the security review's hostile lines (2026-12-06, E1, E2, E3, E3b) cost now, in CPU
seconds, beside an ordinary line of the same length measured in the same run (the baseline):
a ratio near 1 means a hostile line costs what any line of its length costs.

- E1: the live scanner (the console's UI loop) on ``CUDA out of memory. Tried to allocate ``
  and 8,000 digits, then 40 ordinary lines, each scanned as the console does (review: 7.3 s
  for the first scan, 6.8-7.6 s for each later one); then four such lines in one scan (27 s).
- E2: ``rigwatch explain`` on the same words and 2,000 / 4,000 digits (0.9-1.95 s).
- E3: ``explain`` on 40,000 and 100,000 spaces and an ``x`` (2.4 s in one pattern alone), and
  an nccl-tests header followed by a row of 100 KB of spaces (173 s).
- E3b: ``explain`` on ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, ``
  repeated to 25,000 and 100,000 characters (1.0 s, 14.3 s).

Two variants of E1 that no digit-run cut helps: ``1 `` repeated, and the watchdog fragment.

    .venv/bin/python tests/bench/bench_line_cost.py
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from probes.explain.stream import explain_stream
from probes.rules.logrules.live import LiveLogScanner

OOM = "CUDA out of memory. Tried to allocate "
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
          "     time   algbw   busbw #wrong\n#        (B)    (elements)                        "
          "       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
JOB = "job:/scratch/alice/train.log"


def cpu(work: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def ordinary(n: int) -> str:
    """A log line of n characters that no rule reads twice: a training progress line."""
    unit = "step 1200 loss 2.2134 lr 3.0e-04 grad_norm 0.83 tokens 524288 "
    return (unit * (n // len(unit) + 1))[:n]


def explain(text: str) -> Callable[[], object]:
    return lambda: explain_stream("x", io.BytesIO(text.encode()))


def live(first: list[str], after: int = 40) -> Callable[[], object]:
    """``first`` in one scan, then ``after`` ordinary lines, each scanned on its own."""
    def run() -> None:
        scanner = LiveLogScanner()
        for line in first:
            scanner.add(JOB, line, 0.0)
        scanner.scan()
        for i in range(after):
            scanner.add(JOB, f"step {i} loss 2.2", float(i))
            scanner.scan()
    return run


def main() -> None:
    watchdog = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("E1 live: 8 KB digit OOM line + 40 lines, each scanned",
         live([OOM + "1" * 8000]), live([ordinary(8038)])),
        ("E1 live: four such lines in one scan + 40 lines",
         live([OOM + "1" * 8000] * 4), live([ordinary(8038)] * 4)),
        ("E1 variant: OOM + '1 ' x 4,000 (no digit run to cut) + 40 lines",
         live([OOM + "1 " * 4000]), live([ordinary(8038)])),
        ("E1 variant: watchdog fragment to 8 KB + 40 lines",
         live([(watchdog * 130)[:8038]]), live([ordinary(8038)])),
        ("E2 explain: OOM + 2,000 digits", explain(OOM + "1" * 2000), explain(ordinary(2038))),
        ("E2 explain: OOM + 4,000 digits", explain(OOM + "1" * 4000), explain(ordinary(4038))),
        ("E3 explain: 40,000 spaces + x", explain(" " * 40000 + "x"), explain(ordinary(40001))),
        ("E3 explain: 100,000 spaces + x", explain(" " * 100000 + "x"),
         explain(ordinary(100001))),
        ("E3 explain: nccl-tests header + 100 KB row of spaces",
         explain(HEADER + " " * 100000 + "x\n"), explain(HEADER + ordinary(100001) + "\n")),
        ("E3b explain: watchdog fragment x 25,000 chars",
         explain((watchdog * 400)[:25000]), explain(ordinary(25000))),
        ("E3b explain: watchdog fragment x 100,000 chars",
         explain((watchdog * 1600)[:100000]), explain(ordinary(100000))),
    ]
    print("| case | hostile CPU s | ordinary line, same length (baseline) | ratio |")
    print("|---|---|---|---|")
    for name, hostile, baseline in cases:
        h, b = cpu(hostile), cpu(baseline)
        print(f"| {name} | {h:.4f} | {b:.4f} | {h / b:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
