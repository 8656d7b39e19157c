"""The seam between the console and its data: a backend runs sessions and emits items.

The app takes a backend, so the same screens run on live agents (local or SSH),
on a recording, or on fixed items in tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from probes.fleet import HostSpec
from probes.session_events import SessionItem

Emit = Callable[[str, SessionItem], None]
"""Called with (host name, item) for every item; must not block."""


class Backend(Protocol):
    """Something that produces session items for a list of hosts."""

    specs: list[HostSpec]

    async def run(self, emit: Emit) -> None:
        """Produce items until cancelled."""


class AgentFleetBackend:
    """Run one supervised agent session per host, all concurrently."""

    def __init__(self, specs: list[HostSpec]) -> None:
        self.specs = specs

    async def run(self, emit: Emit) -> None:
        """Run every host's session until cancelled."""
        from probes.session import run_session

        await asyncio.gather(*(run_session(spec, emit) for spec in self.specs))
