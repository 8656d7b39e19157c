"""The Prometheus source as a console backend, on a thread and event loop of its own.

Decoding a 10,000-host answer takes a good part of a second of Python; on the console's
loop that would freeze keys and redraws once per refresh.  The source therefore runs on its
own thread with its own loop and shares nothing with the UI: items are handed to the UI's
loop in batches (``handoff``), where ``emit`` runs.  Cancelling ``run`` cancels the source
there and waits for it.

Metrics say nothing of a host's kernel log, topology or PCIe chains.  For a host SSH can
reach (an inventory entry of that name), ``drill_down`` runs the agent once over SSH when
the operator opens the host: its kernel-log lines and log source are folded in as they are
from any agent, and its topology joins the host's hello (the GPUs stay Prometheus's).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping

from probes.config.fleet import HostSpec
from probes.sources.base import BackendBase
from probes.sources.prometheus.source import PromFleetOptions, PromFleetSource
from probes.transport.handoff import Handoff
from probes.transport.session import OnceResult, collect_once
from probes.wire.events import Disconnected, Emit, SessionItem
from probes.wire.samples import KERNEL_SOURCE, Hello, HostSample

NO_SERIES_NOW = "no series in Prometheus now (exporter down or not scraped)"
DRILL_AGAIN_S = 60.0
"""A host's SSH read is not repeated sooner: opening its screen twice costs one session."""


def prometheus_specs(hosts: Iterable[str], refresh_s: float,
                     expect_gpus: int | None = None,
                     inventory: Mapping[str, HostSpec] | None = None) -> list[HostSpec]:
    """The discovered hosts as the fleet's specs: ``interval_s`` is the refresh, so a host
    missing from refreshes reads stale after the usual number of them.  A host the
    inventory names keeps its ``expect_gpus`` (a GPU lost before Prometheus first scraped
    it is then counted short)."""
    known = inventory or {}
    return [HostSpec(name=h, interval_s=refresh_s, tags=("prometheus",),
                     expect_gpus=known[h].expect_gpus if h in known and
                     known[h].expect_gpus is not None else expect_gpus) for h in hosts]


class PrometheusBackend(BackendBase):
    """Every host of a Prometheus-discovered fleet, fed by one ``PromFleetSource``."""

    def __init__(self, options: PromFleetOptions, specs: list[HostSpec],
                 source: PromFleetSource | None = None,
                 ssh: Mapping[str, HostSpec] | None = None) -> None:
        self.options = options
        self.specs = specs
        self.source = source or PromFleetSource(options)
        self.ssh = dict(ssh or {})
        """The hosts SSH can reach (inventory entries by name), for ``drill_down``."""
        self._emit: Emit | None = None
        self._hellos: dict[str, Hello] = {}
        self._drilled: dict[str, float] = {}
        self._drills: set[asyncio.Task[None]] = set()
        self.drilled: list[str] = []
        """Hosts read over SSH so far, in order (tests and the status line read it)."""

    def drill_down(self, host: str) -> bool:
        """Read ``host``'s kernel log and topology over SSH once, in the background; False
        when SSH cannot reach it, or it was read less than ``DRILL_AGAIN_S`` ago."""
        spec = self.ssh.get(host)
        now = time.monotonic()
        if spec is None or self._emit is None or now - self._drilled.get(host, -1e9) < \
                DRILL_AGAIN_S:
            return False
        self._drilled[host] = now
        task = asyncio.get_running_loop().create_task(self._drill(host, spec))
        self._drills.add(task)
        task.add_done_callback(self._drills.discard)
        return True

    async def _drill(self, host: str, spec: HostSpec) -> None:
        # --once sends no kernel log unless asked: the lines already there are the point
        result = await collect_once(dataclasses.replace(
            spec, extra_args=(*spec.extra_args, "--kernel-log=auto")))
        emit = self._emit
        if emit is None:
            return
        self.drilled.append(host)
        for item in _drilled_items(result, self._hellos.get(host)):
            emit(host, item)

    def mode_text(self) -> str:
        """The header says where the numbers come from."""
        return f"Prometheus {self.options.endpoint.url}"

    async def run_once(self, emit: Emit) -> None:
        """One read of the window and the values now, on the caller's loop (nothing else
        runs there to freeze); a host with no series now is said so."""
        got: set[str] = set()

        def keep(host: str, item: SessionItem) -> None:
            if isinstance(item, HostSample):
                got.add(host)
            emit(host, item)

        await self.source.read_once(keep, [s.name for s in self.specs])
        for spec in self.specs:
            if spec.name not in got:
                emit(spec.name, Disconnected(time.time(), NO_SERIES_NOW))

    def about(self) -> dict[str, object]:
        """What a snapshot says of where its numbers came from, and what they cost."""
        return {"prometheus": self.options.endpoint.url, "queries": self.source.client.queries}

    async def run(self, emit: Emit) -> None:
        """Run the source on its own thread until cancelled; its errors are raised here."""
        loop = asyncio.new_event_loop()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        main = asyncio.get_running_loop()
        hosts = [s.name for s in self.specs]
        # Items are handed to the caller's loop in the caller's context: an app's fold may
        # start timers, and those need the app's context variables (Textual's active app).
        context = contextvars.copy_context()

        def keep(host: str, item: SessionItem) -> None:
            if isinstance(item, Hello):
                self._hellos[host] = item
            emit(host, item)

        handoff = Handoff(main, keep, context)
        emit_there = handoff.put

        self._emit = keep

        def finish(exc: BaseException | None) -> None:
            if done.done():
                return
            if exc is None:
                done.set_result(None)
            else:
                done.set_exception(exc)

        def body() -> None:
            asyncio.set_event_loop(loop)
            task = loop.create_task(self.source.run(emit_there, hosts))
            error: BaseException | None = None
            try:
                loop.run_until_complete(task)
            except asyncio.CancelledError:
                pass
            except BaseException as exc:  # handed to the awaiting side
                error = exc
            finally:
                loop.close()
                main.call_soon_threadsafe(finish, error)

        thread = threading.Thread(target=body, name="prometheus source", daemon=True)
        thread.start()
        try:
            await asyncio.shield(done)
        finally:
            self._emit = None
            for drill in list(self._drills):
                drill.cancel()
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to stop
                loop.call_soon_threadsafe(_cancel_all, loop)
            await asyncio.to_thread(thread.join, 10.0)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def _drilled_items(result: OnceResult, hello: Hello | None) -> list[SessionItem]:
    """What one SSH read adds to a Prometheus host: the kernel log's source and lines, and
    the hello with the agent's topology, NICs and PCIe chains (its GPUs stay the metrics')."""
    items: list[SessionItem] = []
    if result.hello is not None and hello is not None:
        ssh = result.hello
        items.append(dataclasses.replace(hello, pcie=ssh.pcie, nics=ssh.nics,
                                         topo_text=ssh.topo_text, datasets=ssh.datasets))
    if result.log_source is not None:
        items.append(result.log_source)
    items += [e for e in result.events if e.source == KERNEL_SOURCE]
    return items
