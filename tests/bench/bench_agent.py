"""Agent overhead: CPU per sample when streaming, against exec-per-poll in the same run.

Prints one JSON object and one summary line.  CPU is user+sys of the agent processes
(RUSAGE_CHILDREN), not wall time.  The baseline is the pattern other tools use: start a
process per poll (here the agent itself with ``--once``, which is cheaper than a real
``nvidia-smi`` spawn, so the ratio is a lower bound).

    python tests/bench/bench_agent.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.transport.bootstrap import agent_source  # noqa: E402

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_agent(args: list[str]) -> float:
    """CPU seconds of one agent run."""
    before = child_cpu()
    source = agent_source(simulate="--simulate" in args)  # as the host would be sent it
    subprocess.run([PYTHON, "-I", "-", *args], input=source,
                   stdout=subprocess.DEVNULL, check=True)
    return child_cpu() - before


def streaming_cpu_per_sample(mode: list[str], samples: int) -> float:
    start = run_agent([*mode, "--count", "0", "--fast"])
    full = run_agent([*mode, "--count", str(samples), "--fast"])
    return max(full - start, 1e-9) / samples


def exec_cpu_per_poll(mode: list[str], polls: int) -> float:
    return sum(run_agent([*mode, "--once"]) for _ in range(polls)) / polls


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="few iterations, to keep it working")
    args = p.parse_args()
    samples, polls = (400, 3) if args.quick else (2000, 30)
    results = {}
    for name, mode in (("simulated-8gpu", ["--simulate", "healthy"]), ("proc-only", [])):
        stream = streaming_cpu_per_sample(mode, samples)
        per_poll = exec_cpu_per_poll(mode, polls)
        results[name] = {
            "stream_cpu_ms_per_sample": round(stream * 1000, 4),
            "stream_core_pct_at_1hz": round(stream * 100, 4),
            "exec_per_poll_cpu_ms": round(per_poll * 1000, 3),
            "exec_over_stream_ratio": round(per_poll / stream, 1),
        }
    out = {"bench": "agent", "python": PYTHON, "machine": platform.machine(),
           "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "quick": args.quick,
           "samples": samples, "polls": polls, "results": results}
    print(json.dumps(out))
    sim, proc = results["simulated-8gpu"], results["proc-only"]
    print(f"agent: {sim['stream_cpu_ms_per_sample']} ms CPU/sample simulated 8 GPUs "
          f"({sim['stream_core_pct_at_1hz']}% of a core at 1 Hz), "
          f"{proc['stream_cpu_ms_per_sample']} ms with real /proc; exec-per-poll costs "
          f"{sim['exec_over_stream_ratio']}x / "
          f"{proc['exec_over_stream_ratio']}x more")


if __name__ == "__main__":
    main()
