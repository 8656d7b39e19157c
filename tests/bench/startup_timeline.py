"""Where the console's start-up goes: a timeline of one ``bench_fleet`` run (issue 38 item 5).

``bench_fleet.py --timeline`` runs its console child with ``RIGWATCH_BENCH_TIMELINE`` set to
a folder.  The console child then wraps (``console_hooks``) the collector's spawn, the UI's
fold of each collector batch and of each host's first sample, and starts its collectors
through ``collector_main`` below instead of ``python -m probes.transport.collector_worker``,
which wraps the collector's per-host steps (``collector_hooks``) before running the real
``collector_worker.main``.  Every process appends ``<monotonic> <event> <key>`` lines to its
own file there, each (event, key) once; CLOCK_MONOTONIC is one clock for all processes, so
``summary`` lays them on one axis from the console's spawn.  Nothing in probes/ or tui/
knows about it; without the variable nothing is wrapped.

Events: ``spawn`` (collector started), ``coll_main`` (its interpreter is up, before its
imports), ``start`` / ``dial`` / ``login`` / ``sent`` (per host: the session starts, its
socket has a banner, SSH login done, the agent's source written), ``cbytes`` (the
collector's first bytes from a host), ``tui_imported``, ``mounted`` (the headless app is
running), ``ui_batch`` (the UI starts folding a batch holding the host's first entry),
``fold`` (the UI folds the host's first sample: it counts as streaming).  The floor child
notes ``floor_imported``, then per host ``floor_start`` (its handshake takes the gate),
``floor_login`` and ``floor_first`` (its first line).
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ENV = "RIGWATCH_BENCH_TIMELINE"
_SEEN: set[tuple[str, object]] = set()
_OUT: list[Any] = []


def mark(event: str, key: object = None) -> None:
    """Note the first time ``event`` happens for ``key`` (nothing unless the bench asked)."""
    folder = os.environ.get(ENV)
    if not folder or (event, key) in _SEEN:
        return
    _SEEN.add((event, key))
    if not _OUT:
        _OUT.append(open(Path(folder) / f"t.{os.getpid()}", "a", buffering=1))  # noqa: SIM115
    _OUT[0].write(f"{time.monotonic():.4f} {event} {key}\n")


def _after(owner: Any, name: str, event: str, key: Any) -> None:
    """Wrap the coroutine method ``owner.name`` to mark ``event`` when it returns."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    async def wrapped(self: Any, *a: Any, **kw: Any) -> Any:
        out = await inner(self, *a, **kw)
        mark(event, key(self))
        return out

    setattr(owner, name, wrapped)


def collector_hooks() -> None:
    """Wrap the collector's per-host start: session, dial, login, source sent, first bytes."""
    from probes.transport import ssh
    from probes.transport.relay import RelayReader

    start = ssh.SshTransport.start

    async def started(self: Any) -> None:
        mark("start", self.spec.name)
        await start(self)
        mark("sent", self.spec.name)

    ssh.SshTransport.start = started  # type: ignore[method-assign]
    _after(ssh.SshTransport, "_connect", "login", lambda s: s.spec.name)
    dial = ssh.dial

    async def dialled(host: str, port: int, timeout_s: float) -> Any:
        sock = await dial(host, port, timeout_s)
        mark("dial", (sock.getsockname(), sock.getpeername()))  # a local port serves two peers
        return sock

    ssh.dial = dialled  # type: ignore[assignment]
    feed = RelayReader.feed

    def fed(self: Any, chunk: bytes) -> Any:
        mark("cbytes", self._index)
        return feed(self, chunk)

    RelayReader.feed = fed  # type: ignore[method-assign]


PROFILE_ENV = "RIGWATCH_BENCH_COLLECTOR_PROFILE"
"""``FILE:N``: the collector runs under cProfile from its start until N hosts have sent their
first bytes, then dumps its stats to FILE (pstats) and runs on unprofiled."""


def _profile_until_streaming() -> None:
    spec = os.environ.get(PROFILE_ENV)
    if not spec:
        return
    import cProfile

    path, _, n = spec.rpartition(":")
    prof, seen = cProfile.Profile(), set[int]()
    from probes.transport.relay import RelayReader

    feed = RelayReader.feed

    def fed(self: Any, chunk: bytes) -> Any:
        out = feed(self, chunk)
        if len(seen) < int(n):
            seen.add(self._index)
            if len(seen) == int(n):
                prof.disable()
                prof.dump_stats(path)
        return out

    RelayReader.feed = fed  # type: ignore[method-assign]
    prof.enable()


def collector_main() -> None:
    """A collector process with the hooks in (``collector_argv`` while timed)."""
    mark("coll_main")
    _profile_until_streaming()
    collector_hooks()
    from probes.transport import collector_worker

    collector_worker.main()


def console_hooks() -> None:
    """In the console child, before ``cli.main``: the spawn, the argv of every collector,
    each batch the UI folds (its hosts' first entries)."""
    if not os.environ.get(ENV):
        return
    from probes.sources import collector_start, collectors

    def argv() -> list[str]:
        return [sys.executable, "-c",
                "import sys; sys.argv[0] = 'collector'; "
                "from tests.bench.startup_timeline import collector_main; collector_main()",
                str(os.getpid())]

    collector_start.collector_argv = argv
    collectors.collector_argv = argv
    spawn = collector_start.EarlyCollector.spawn.__func__  # type: ignore[attr-defined]

    def spawned(cls: Any, job: Any) -> Any:
        mark("spawn")
        return spawn(cls, job)

    collector_start.EarlyCollector.spawn = classmethod(spawned)  # type: ignore[assignment]
    fold = collectors.CollectorBackend._fold

    async def folded(shard: Any, batch: Any, emit: Any, slices: Any) -> None:
        specs = shard.job.specs
        for i, _entry in batch:
            mark("ui_batch", specs[i].name)
        await fold(shard, batch, emit, slices)

    collectors.CollectorBackend._fold = staticmethod(folded)  # type: ignore[method-assign]


def summary(folder: Path, t0: float) -> dict[str, dict[str, float]]:
    """Each event: how many, and the first, median and last time, seconds from ``t0``."""
    times: dict[str, list[float]] = {}
    for f in folder.glob("t.*"):
        for line in f.read_text().splitlines():
            t, event, _key = line.split(" ", 2)
            times.setdefault(event, []).append(float(t) - t0)
    out = {}
    for event, ts in sorted(times.items(), key=lambda kv: min(kv[1])):
        ts.sort()
        out[event] = {"n": len(ts), "first": round(ts[0], 2),
                      "p50": round(statistics.median(ts), 2), "last": round(ts[-1], 2)}
    return out
