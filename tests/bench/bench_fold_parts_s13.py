"""Where the console's fold of a host sample goes outside the history (issue 38, session 13):
``FleetState.apply`` of each frame's decoded items (decode untimed, the history's ``add``
stubbed), one console against a copy of itself with one part ablated, frame by frame.

Ablations (each a stand-in that answers at once, so the figures are an upper bound of a
part's cost, not an equivalent fold): ``judge`` (``SampleJudge.judged`` answers None),
``det`` (``DetectorSchedule.run`` None), ``numbers`` (``numbers_only`` True), ``take``
(``HostFindings.take_sample`` nothing), ``keep`` (each host's previous sample kept alive:
what freeing it costs).  Reported: the median µs a host-sample of each side over the frames
past 15 s and how many frames the ablated side was lower.

    python tests/bench/bench_fold_parts_s13.py HOSTS SECONDS [judge] [det] [numbers] [take] [keep]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes import fleet_state
from probes.analysis import detectors, host_findings, sample_judge
from probes.config.fleet import HostSpec
from probes.history import HostHistory
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import host_clock
from probes.transport.collector_wire import CollectorJob, check_batch, unframe
from tests.bench.bench_ingest import T0
from tests.bench.bench_relay_decode import agent_feed, collector_frames
from tui.gc_policy import tune_for_streaming

PATCHES: dict[str, tuple[Any, str, Any]] = {
    "judge": (sample_judge.SampleJudge, "judged", lambda self, *a: None),
    "det": (detectors.DetectorSchedule, "run", lambda self, *a: None),
    "numbers": (fleet_state, "numbers_only", lambda h, m: True),
    "take": (host_findings.HostFindings, "take_sample", lambda self, f, ts: None),
}


def main() -> None:
    hosts, seconds, ablated = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    HostHistory.add = lambda self, s: None  # type: ignore[method-assign]
    feed = agent_feed(hosts, seconds)
    specs = tuple(HostSpec(name=f"h{i:04d}") for i in range(hosts))
    frames, _ = collector_frames(feed, specs, seconds)
    del feed
    tune_for_streaming()
    patches = [(obj, name, getattr(obj, name), new) for k, (obj, name, new) in PATCHES.items()
               if k in ablated]
    kept_alive: list[Any] = []

    def side() -> dict[str, Any]:
        s: dict[str, Any] = {"fleet": fleet_state.FleetState(list(specs)), "items": [],
                             "shard": _Shard(1, CollectorJob(specs, 4, 0.05)),
                             "slices": FoldSlices(budget_s=3600.0), "now": T0}
        s["emit"] = host_clock.clocked(lambda h, it: s["items"].append((h, it)),
                                       lambda: s["now"] + 0.03)
        return s

    sides = {"base": side(), "ablated": side()}
    took: dict[str, list[float]] = {n: [] for n in sides}

    async def run() -> None:
        for k, data in enumerate(frames):
            for name in (("base", "ablated") if k % 2 else ("ablated", "base")):
                s = sides[name]
                s["now"] = now = T0 + k
                await CollectorBackend._fold(s["shard"], check_batch(unframe(data[4:]), hosts),
                                             s["emit"], s["slices"])
                items, s["items"] = s["items"], []
                fleet = s["fleet"]
                on = name == "ablated"
                for obj, attr, orig, new in patches:
                    setattr(obj, attr, new if on else orig)
                keep = on and "keep" in ablated
                t0 = time.process_time()
                for h, it in items:
                    if keep and (st := fleet.hosts.get(h)) is not None and st.last is not None:
                        kept_alive.append(st.last)
                    fleet.apply(h, it, now)
                t = time.process_time() - t0
                for obj, attr, orig, _ in patches:
                    setattr(obj, attr, orig)
                del items
                fleet.tick(now + 0.5)
                fleet.all_findings()
                if k > 15:
                    took[name].append(1e6 * t / hosts)

    asyncio.run(run())
    b, a = took["base"], took["ablated"]
    print(ablated, "base", round(statistics.median(b), 2),
          "ablated", round(statistics.median(a), 2), "lower in",
          sum(y < x for x, y in zip(b, a, strict=True)), "of", len(b))


if __name__ == "__main__":
    main()
