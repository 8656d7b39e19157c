"""Every async test in this folder runs on a collector's coalescing loop, paused at every wait.

``probes.transport.coalesce`` judges a loop busy only at a fleet's rate of ticks; a test's
few hosts never are.  Here the loop is busy from its start (``busy=True``): every wait
first lets ``GAP_S`` pass since the last wake, the harshest the product can be.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Mapping
from typing import Any

import pytest

from probes.transport.coalesce import GAP_S, CoalescingSelector

SELECTORS: list[CoalescingSelector] = []
"""The selectors made, for a test that checks it really paused."""


def coalesced_loop() -> asyncio.AbstractEventLoop:
    sel = CoalescingSelector(selectors.DefaultSelector(), GAP_S, busy=True)
    SELECTORS.append(sel)
    return asyncio.SelectorEventLoop(sel)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                  ) -> Mapping[str, Any]:
    return {"coalesced": coalesced_loop}
