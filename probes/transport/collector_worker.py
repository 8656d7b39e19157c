"""A collector process: runs the SSH (or local) sessions of one shard of the fleet.

Started by ``CollectorBackend`` as ``python -m probes.transport.collector_worker``; see
``collector_wire`` for what travels on its pipes.  The sessions are the console's own
(``SessionFleet``, as ``AgentFleetBackend`` runs them: same backoff, stall and garbage
limits, host-key policy), so a host behaves the same in a collector as in the console;
only where the CPU is spent changes: handshakes, encryption and the session's own decode
run here, on another core.

A collector never outlives the console: it asks the kernel for SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)`` on Linux), checks its parent id every ``PARENT_POLL_S`` where
that is not available, and stops on the end of stdin or a broken stdout.  Stopping, it
closes its sessions (each remote agent gets EOF) within ``STOP_S``, then kills what is left
of its process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from probes.transport import coalesce
from probes.transport.collector_wire import RETRY, CollectorJob, frame_length, unframe
from probes.transport.relay import Relay
from probes.transport.sessions import SessionFleet

log = logging.getLogger("rigwatch.collector")

PARENT_POLL_S = 1.0
STOP_S = 8.0
"""Stopping the sessions gets this long, then ``EXIT_S`` more before the collector's group
is killed (within the console's own ``collectors.STOP_S``)."""
EXIT_S = 2.0
"""After the sessions' stop, the interpreter's own shutdown gets this long."""
PR_SET_PDEATHSIG = 1
STREAMING_THRESHOLDS = (50_000, 20, 10)
"""The garbage collector's thresholds once the job is read: a collector's long-lived state
(each host's connection and session) grows through the connect storm, and at CPython's
(700, 10, 10) every middle and full collection walked it again; nearly all of its garbage
is freed by reference counting.  Young collections as the console's (``tui.gc_policy``);
a full one every 10 M allocations (a minute or two at a thousand hosts), not the
console's 100 M: a long-lived connection that closes (a fleet-wide outage) leaves cycles
that only a full collection frees."""


async def _commands(stdin: asyncio.StreamReader, backend: SessionFleet,
                    job: CollectorJob) -> None:
    """Follow the console's commands until it closes our stdin."""
    while line := await stdin.readline():
        word, _, arg = line.decode(errors="replace").strip().partition(" ")
        if word == RETRY and arg.isdigit() and int(arg) < len(job.specs):
            backend.retry_now(job.specs[int(arg)].name)


async def serve(job: CollectorJob, stdin: asyncio.StreamReader, out: int,
                on_broken: Callable[[], None] | None = None) -> None:
    """Run the shard's sessions until stdin ends (or this task is cancelled: the console
    died); then stop every agent, within ``STOP_S``, and return.

    ``out`` is the pipe to the console (a file descriptor, made non-blocking): a console
    that does not read never stops a session (``relay``)."""
    relay = Relay(job, out, on_broken)
    relay.heartbeat()  # at once: the console counts the silence from our start
    backend = SessionFleet(list(job.specs), max_connecting=job.max_connecting,
                          new_reader=relay.new_reader)
    coalesce.hold_while(backend.handshaking)  # a handshake's round trips are not paused
    sessions = asyncio.create_task(backend.run(relay.emit), name="collector sessions")
    try:
        await _commands(stdin, backend, job)
    finally:
        sessions.cancel()
        await asyncio.wait({sessions}, timeout=STOP_S)
        await relay.close(EXIT_S / 2)


def _kill_group_after(seconds: float) -> None:
    """A stop that hangs (a session that never closes) must not keep the collector alive:
    after ``seconds`` the whole group (this process and its local agents) is killed."""
    def kill() -> None:
        time.sleep(seconds)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    threading.Thread(target=kill, name="collector stop deadline", daemon=True).start()


def die_with_parent(parent: int) -> bool:
    """Ask the kernel for SIGTERM when the console dies (Linux); False when the console is
    already gone (the request would then never fire)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    return parent <= 0 or os.getppid() == parent


async def _parent_gone(parent: int) -> None:
    """Returns when the console that started us is no longer our parent."""
    while parent <= 0 or os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL_S)


async def _main(parent: int) -> None:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, main.cancel)
    def stop(*_: object) -> None:
        main.cancel()

    orphan = loop.create_task(_parent_gone(parent))
    orphan.add_done_callback(stop)
    stdin = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    try:
        length = frame_length(await stdin.readexactly(4))
        job = unframe(await stdin.readexactly(length))
        if not isinstance(job, CollectorJob):
            raise SystemExit("rigwatch collector: the first frame is not a job")
        tune_collection()
        await serve(job, stdin, sys.stdout.fileno(), stop)
    except asyncio.CancelledError:
        log.warning("the console is gone: stopped")
    finally:
        orphan.cancel()
        _kill_group_after(EXIT_S)  # serve gave the sessions STOP_S: what is left goes


def tune_collection() -> None:
    """What the collector built before its sessions (its modules, the job) out of every
    later collection, and the streaming thresholds; the collector on again.  Not collected
    first (a full pass, ~50 ms at start-up): what it could free is a few import-time
    cycles."""
    gc.freeze()
    gc.set_threshold(*STREAMING_THRESHOLDS)
    gc.enable()


def main() -> None:
    """Entry point of the collector process: ``collector_worker [CONSOLE_PID]``."""
    gc.disable()  # until the job is read (``tune_collection``): its imports live on
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="collector %(process)d: %(levelname)s %(name)s: %(message)s")
    parent = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
    if not die_with_parent(parent):
        raise SystemExit("rigwatch collector: the console is already gone")
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        # its hosts' ticks served several to a wake (``coalesce``: 40-60 % less CPU a sample)
        coalesce.run(_main(parent))


if __name__ == "__main__":
    main()
