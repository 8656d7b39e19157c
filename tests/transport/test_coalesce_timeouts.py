"""The sessions' timeouts, stall watch, keepalive and reconnects on a collector's coalescing
loop, paused at every wait: each test is the one of the same name elsewhere in
``tests/transport``, run here again on that loop.  The last test checks the loop paused.

``probes.transport.coalesce`` judges a loop busy only at a fleet's rate of ticks; a test's
few hosts never are.  Here the loop is busy from its start (``busy=True``): every wait
first lets ``GAP_S`` pass since the last wake, and every timer may wait ``GAP_S`` more,
the harshest the product can be.  pytest-asyncio makes each test's loop with the
``_asyncio_loop_factory`` fixture; this module's own gives it the coalescing loop.
"""

from __future__ import annotations

import asyncio
import selectors
import socket
from collections.abc import Callable

import pytest

from probes.transport.coalesce import GAP_S, CoalescingSelector
from tests.transport.test_session import (
    test_a_silent_stream_is_stalled_and_the_session_reconnects,
    test_a_steady_stream_slower_than_nothing_is_never_stalled,
    test_collect_once_times_out_on_a_silent_host,
    test_session_reconnects_after_the_agent_exits,
    test_the_stall_watch_ends_with_its_connection,
)
from tests.transport.test_ssh_faults import (
    canned,
    server,
    test_drop_mid_stream_reconnects_and_resumes,
    test_garbage_and_10_mib_lines_are_counted_cut_and_reconnected,
    test_silent_server_goes_stale_then_reconnects,
)
from tests.transport.test_ssh_sshd import (
    test_sshd_killed_and_restarted_resumes_within_the_cap,
    world,
)
from tests.transport.test_tarpit import (
    tarpit,
    test_a_listener_that_hangs_up_or_a_closed_port_fails_at_once,
    test_a_silent_listener_is_given_up_on_after_the_banner_timeout,
    test_an_endless_pre_banner_drip_is_a_tarpit_too,
)

SELECTORS: list[CoalescingSelector] = []
"""The selectors made, for the test that checks it really paused."""


def coalesced_loop() -> asyncio.AbstractEventLoop:
    sel = CoalescingSelector(selectors.DefaultSelector(), GAP_S, busy=True)
    SELECTORS.append(sel)
    return asyncio.SelectorEventLoop(sel)


@pytest.fixture(scope="module")
def _asyncio_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """pytest-asyncio's loop factory (its own fixture of this name gives None: asyncio's)."""
    return coalesced_loop


__all__ = [  # fixtures (canned, server, tarpit, world) and tests, by name
    "canned",
    "server",
    "tarpit",
    "test_a_listener_that_hangs_up_or_a_closed_port_fails_at_once",
    "test_a_silent_listener_is_given_up_on_after_the_banner_timeout",
    "test_a_silent_stream_is_stalled_and_the_session_reconnects",
    "test_a_steady_stream_slower_than_nothing_is_never_stalled",
    "test_an_endless_pre_banner_drip_is_a_tarpit_too",
    "test_collect_once_times_out_on_a_silent_host",
    "test_drop_mid_stream_reconnects_and_resumes",
    "test_garbage_and_10_mib_lines_are_counted_cut_and_reconnected",
    "test_session_reconnects_after_the_agent_exits",
    "test_silent_server_goes_stale_then_reconnects",
    "test_sshd_killed_and_restarted_resumes_within_the_cap",
    "test_the_stall_watch_ends_with_its_connection",
    "world",
]


async def test_zz_this_loop_is_the_coalescing_one_and_it_pauses() -> None:
    """Not vacuous: the tests here ran on that loop, and it paused its waits."""
    loop = asyncio.get_running_loop()
    assert getattr(loop, "_selector", None) is SELECTORS[-1]
    a, b = socket.socketpair()
    reader, keep_a = await asyncio.open_connection(sock=a)
    keep_b, writer = await asyncio.open_connection(sock=b)
    before = SELECTORS[-1].pauses
    for _ in range(5):  # each byte read after a wait for it: each wait paused first
        writer.write(b"x")
        assert await reader.readexactly(1) == b"x"
    assert SELECTORS[-1].pauses >= before + 3
    keep_a.close()
    writer.close()
    del keep_b
