"""``rigwatch ladder``: the scale-up ladder's table from job logs or recordings.

The work is ``probes.outputs.ladder``'s; this module only adds the subcommand (``tui/cli.py``
stays under its line cap) and the ``--demo`` runs, which come from the agent's simulator.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.outputs.ladder import Run
    from tui.settings import Settings

DEMO_RUNS = (
    # name, hosts, GPUs per host, tokens/s per GPU, peak all-reduce busbw (GB/s), memory GiB
    ("demo-1gpu.log", ("gpu-c01",), 1, 4100.0, 0.0, 71.3),
    ("demo-8gpu-1node.log", ("gpu-c01",), 8, 3900.0, 480.0, 61.02),
    ("demo-16gpu-2nodes.log", ("gpu-c01", "gpu-c02"), 8, 2250.0, 4.2, 58.4),
)
"""Three runs of one simulated job: one GPU, one machine, two machines whose inter-node
all_reduce runs at socket speed — the step the ladder should call a communication problem."""
DEMO_SECONDS = 1800.0


def demo_logs() -> list[tuple[str, list[str]]]:
    """The three demo runs' job logs (30 simulated minutes each)."""
    from probes.agent.simulator import SIM_BUS_IDS, TrainJob

    out = []
    for seed, (name, hosts, per_host, tps, busbw, mem) in enumerate(DEMO_RUNS):
        job = TrainJob(list(hosts), SIM_BUS_IDS, gpus_per_host=per_host, tps_per_gpu=tps,
                       peak_busbw=busbw, mem_gib=mem, seed=seed)
        lines: list[str] = []
        t = 0.0
        while t <= DEMO_SECONDS:
            lines += job.lines(t)
            t += 60.0
        out.append((name, lines))
    return out


def add_ladder_parser(sub: argparse._SubParsersAction) -> None:
    """The ``ladder`` subcommand's arguments."""
    p = sub.add_parser("ladder", help="runs of one job at different scales side by side: "
                       "throughput, per GPU, scaling efficiency, peak memory, bottleneck")
    p.add_argument("inputs", nargs="*", metavar="RECORDING|LOG",
                   help="a job log (one run) or a rigwatch recording (one run per job)")
    p.add_argument("--demo", action="store_true",
                   help="three simulated runs: 1 GPU, 8 GPUs, 2 nodes of 8")
    # SUPPRESS: "rigwatch --settings F ladder" keeps F (a subparser default would win)
    p.add_argument("--settings", metavar="FILE", default=argparse.SUPPRESS,
                   help="thresholds (YAML 'ladder:' section, good_efficiency); default: "
                        "$RIGWATCH_SETTINGS or <config dir>/rigwatch/settings.yaml")


def run_ladder(args: argparse.Namespace, settings: Settings) -> int:
    """Print the ladder judged by ``settings.ladder``; 2 when an input cannot be read or
    none is given."""
    from probes.outputs.ladder import LadderError, ladder, render, run_of_log, runs_of

    if not args.inputs and not args.demo:
        print("rigwatch ladder: give job logs or recordings (or --demo)", file=sys.stderr)
        return 2
    try:
        runs: list[Run] = [run for path in args.inputs for run in runs_of(path)]
    except LadderError as exc:
        print(f"rigwatch ladder: {exc}", file=sys.stderr)
        return 2
    if args.demo:
        runs += [run_of_log(name, lines) for name, lines in demo_logs()]
    sys.stdout.write(render(ladder(runs, settings.ladder)))
    return 0
