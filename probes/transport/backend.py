"""The seam between the console and its data: a backend runs sessions and emits items.

The app takes a backend, so the same screens run on live agents (local or SSH),
on a recording, or on fixed items in tests.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from probes.config.fleet import HostSpec
from probes.wire.events import Emit

if TYPE_CHECKING:
    from probes.transport.session import SessionPolicy

class Backend(Protocol):
    """Something that produces session items for a list of hosts."""

    specs: list[HostSpec]

    async def run(self, emit: Emit) -> None:
        """Produce items until cancelled."""


MAX_CONCURRENT_CONNECTS = 32
"""Handshakes are CPU-bound: 1000 hosts connecting at once would stampede the bastion."""


class AgentFleetBackend:
    """Run one supervised agent session per host, all concurrently."""

    def __init__(self, specs: list[HostSpec], max_connecting: int = MAX_CONCURRENT_CONNECTS,
                 policy: SessionPolicy | None = None) -> None:
        self.specs = specs
        self.max_connecting = max_connecting
        self.policy = policy

    async def run(self, emit: Emit) -> None:
        """Run every host's session until cancelled; on cancel, return only once every
        session has stopped its agent.

        A plain ``gather`` would not do: cancelled, it finishes with the first session to
        end, while the others are still closing their agents' pipes and channels.
        """
        from probes.transport.session import run_session

        gate = asyncio.Semaphore(self.max_connecting)
        tasks = [asyncio.create_task(run_session(spec, emit, self.policy, gate),
                                     name=f"session {spec.name}") for spec in self.specs]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                # a second cancel would interrupt a session already stopping its agent
                cancelling = getattr(task, "cancelling", None)  # Python 3.11+
                if cancelling is None or not cancelling():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
