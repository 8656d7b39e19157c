"""A throttling host's judges (issue 38, session 10b): ``bench_judges_s10.py`` with
**before** = today's ``SampleJudge`` (``probes.analysis.sample_judge``) and **after** = the
dropped try ``tests/bench/sample_judge_clocks_s10b.py`` (a tick whose inputs moved only in
throttling GPUs' printed clocks rebuilds just those findings instead of judging whole),
judges only, detectors today's on both sides; the same options otherwise.

    python tests/bench/bench_judges_s10b.py [--hosts 1024] [--seconds 90] [--join 10]
                                            [--chunk 10] [--expect] [--outside]
                                            [--throttling]

``--throttling``: every host replays one of the four throttling templates (``throttle:5``,
templates 1, 5, 9 and 13) instead of template *i mod 16*.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from probes.analysis import sample_judge
from tests.bench import bench_judges_s10
from tests.bench import sample_judge_clocks_s10b as clocks


class Side(bench_judges_s10.Side):
    def __init__(self, before: set[str], *args: Any) -> None:
        super().__init__(set(), *args)
        if not before:  # the after side: the try's judges
            for h in self.fleet.hosts.values():
                h.sample_judge = clocks.SampleJudge()  # type: ignore[assignment]


if __name__ == "__main__":
    bench_judges_s10.before_s10 = sample_judge
    bench_judges_s10.sample_judge = clocks
    bench_judges_s10.Side = Side  # type: ignore[assignment,misc]
    if "--throttling" in sys.argv:
        sys.argv.remove("--throttling")
        make = bench_judges_s10.template
        bench_judges_s10.template = lambda k, n: make(1 + 4 * (k % 4), n)  # type: ignore[assignment]
    sys.argv += ["--before", "judges"]
    bench_judges_s10.main()
