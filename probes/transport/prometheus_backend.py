"""The Prometheus source as a console backend, on a thread and event loop of its own.

Decoding a 10,000-host answer takes a good part of a second of Python; on the console's
loop that would freeze keys and redraws once per refresh.  The source therefore runs on its
own thread with its own loop and shares nothing with the UI: each item is handed to the
UI's loop, where ``emit`` runs.  Cancelling ``run`` cancels the source there and waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Iterable

from probes.config.fleet import HostSpec
from probes.transport.backend import BackendBase
from probes.transport.prometheus_source import PromFleetOptions, PromFleetSource
from probes.wire.events import Emit, SessionItem


def prometheus_specs(hosts: Iterable[str], refresh_s: float,
                     expect_gpus: int | None = None) -> list[HostSpec]:
    """The discovered hosts as the fleet's specs: ``interval_s`` is the refresh, so a host
    missing from refreshes reads stale after the usual number of them."""
    return [HostSpec(name=h, interval_s=refresh_s, tags=("prometheus",),
                     expect_gpus=expect_gpus) for h in hosts]


class PrometheusBackend(BackendBase):
    """Every host of a Prometheus-discovered fleet, fed by one ``PromFleetSource``."""

    def __init__(self, options: PromFleetOptions, specs: list[HostSpec],
                 source: PromFleetSource | None = None) -> None:
        self.options = options
        self.specs = specs
        self.source = source or PromFleetSource(options)

    def mode_text(self) -> str:
        """The header says where the numbers come from."""
        return f"Prometheus {self.options.endpoint.url}"

    async def run(self, emit: Emit) -> None:
        """Run the source on its own thread until cancelled; its errors are raised here."""
        loop = asyncio.new_event_loop()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        main = asyncio.get_running_loop()
        hosts = [s.name for s in self.specs]
        # Items are handed to the caller's loop in the caller's context: an app's fold may
        # start timers, and those need the app's context variables (Textual's active app).
        context = contextvars.copy_context()

        def emit_there(host: str, item: SessionItem) -> None:
            main.call_soon_threadsafe(emit, host, item, context=context)

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
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to stop
                loop.call_soon_threadsafe(_cancel_all, loop)
            await asyncio.to_thread(thread.join, 10.0)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
