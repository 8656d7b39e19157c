"""A collector's backlog: one frame holding many hosts' agent lines, as a relay sends it
when the console fell behind (each host's lines, hundreds of samples in all).

The lines are the agent's simulator's, printed as the agent prints them (wire v1 JSON), so
the console decodes and folds them the way it folds a real collector's bytes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from probes import agent
from probes.config.fleet import HostSpec
from probes.sources.collectors import CollectorBackend
from probes.transport.collector_wire import Batch, frame
from probes.wire.events import Connected, Emit, SessionItem

SIM_START_S = 3600.0


def agent_lines(seed: int, samples: int, t0: float) -> list[bytes]:
    """A simulated healthy host's hello then ``samples`` sample lines, one a second."""
    sim = agent.Simulator(agent.parse_scenarios("healthy"), seed, f"sim-{seed}")
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 1, "agent": "test", "ts": t0, "host": facts,
                             "gpus": gpus, "probes": {}, "simulated": ["healthy"]}
    hello.update(sim.topology())
    out = [json.dumps(hello).encode() + b"\n"]
    for k in range(samples):
        g, host, disks = sim.sample(SIM_START_S + k)
        line = {"type": "sample", "v": 1, "seq": k, "ts": t0 + k, "gpus": g, "host": host,
                "disks": disks}
        out.append(json.dumps(line).encode() + b"\n")
    return out


def backlog(hosts: int, samples: int, t0: float) -> Batch:
    """Every host connects, then its lines arrive interleaved across hosts, one per entry."""
    lines = [agent_lines(i + 1, samples, t0) for i in range(hosts)]
    batch: Batch = [(i, Connected(t0)) for i in range(hosts)]
    for k in range(samples + 1):
        batch += [(i, lines[i][k]) for i in range(hosts)]
    return batch


def specs(hosts: int) -> list[HostSpec]:
    return [HostSpec(name=f"gpu{i:02d}", expect_gpus=8) for i in range(hosts)]


class BacklogBackend(CollectorBackend):
    """One collector whose pipe already holds ``frames``: the console's real ``_read`` and
    fold of them, without the process (``folded`` counts the items emitted)."""

    def __init__(self, hosts: int, frames: list[Batch], gated: bool = False,
                 **kw: Any) -> None:
        super().__init__(specs(hosts), 1, **kw)
        self.frames = frames
        self.go = asyncio.Event()
        """Set: the backlog is read (at once unless ``gated``)."""
        if not gated:
            self.go.set()
        self.folded = 0
        self.done = asyncio.Event()
        self.reads: list[Any] = []
        """The ``FoldSlices`` each read used (their ``turns``)."""

    def slices_made(self) -> int:
        return sum(s.turns for s in self.reads)

    async def run(self, emit: Emit) -> None:
        await self.go.wait()
        shard = self._shards[0]
        pipe = asyncio.StreamReader()
        for batch in self.frames:
            pipe.feed_data(frame(batch))
        pipe.feed_eof()
        make = self.slices

        def made() -> Any:
            s = make()
            self.reads.append(s)
            return s

        self.slices = made

        def counted(host: str, item: SessionItem) -> None:
            emit(host, item)
            self.folded += 1

        await self._read(shard, pipe, counted)
        self.done.set()
        await asyncio.Event().wait()
