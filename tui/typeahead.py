"""Keys typed ahead land where they would have landed typed slowly.

Textual hands each key to the widget focused *when the app reads it*, and runs a screen's
bindings only when the key has bubbled back up.  Keys that arrive together (a slow SSH
link, a loaded bastion, a paste of ``:host gpu-b02⏎``) were therefore all read before the
first had opened anything: the letters meant for the ``:`` prompt went to the fleet
table and fired its keys (``t`` triage, ``p`` preflight), and a second Enter reached the
prompt after it had closed.

So a key waits until the one before it has landed: it has been through every widget it
bubbles through, and a screen it opened or closed has mounted, resumed and taken focus.
A key read while nothing is in flight is handled at once, exactly as before; the wait is
bounded (``SETTLE_S``), so a busy console never swallows input.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Any

from textual import events
from textual.app import App, ScreenStackError
from textual.message_pump import MessagePump

SETTLE_S = 1.0
"""The longest a key waits for the one before it; then it goes anyway."""
SETTLE_PASSES = 8
"""Passes one key may take to land (``:host X⏎``: Submitted, the prompt's pop, its
callback's pop to the fleet and push of the host, the host screen's focus)."""


class TypeaheadApp(App[None]):
    """An app whose keys are handled in order, each after the one before has landed."""

    def __init__(self) -> None:
        super().__init__()
        self._held: deque[events.Key] = deque()
        self._released: set[int] = set()
        self._in_flight = False
        self._follower: asyncio.Task[None] | None = None
        self.keys_held = 0
        """Keys that had to wait for the one before them (tests and the storm bench)."""

    async def on_event(self, event: events.Event) -> None:
        """Hold a key that arrives while the one before is in flight; follow the rest."""
        if not isinstance(event, events.Key) or event.is_forwarded:
            await super().on_event(event)
            return
        if id(event) in self._released:
            self._released.discard(id(event))
        elif self._in_flight:
            self._held.append(event)
            self.keys_held += 1
            return
        try:
            target: MessagePump = self.focused or self.screen
        except ScreenStackError:  # closing: nothing left to type into
            await super().on_event(event)
            return
        self._in_flight = True
        try:
            await super().on_event(event)
        finally:  # whatever the key did, the keys behind it are released in time
            self._follower = asyncio.create_task(self._follow(target))

    async def _follow(self, target: MessagePump) -> None:
        """Wait until the key given to ``target`` has landed, then release the next.

        A pass waits for every node from the focused widget up to the app to handle what
        was queued for it: the key bubbles up through them, and what it set off (an
        input's Submitted, a dismissed screen's callback, a push, a focus change) is
        queued behind it.  Passes repeat until one ends where it started, with nothing
        left queued along the way.
        """
        deadline = time.monotonic() + SETTLE_S
        try:
            for done in range(SETTLE_PASSES):
                if not self.screen_stack or time.monotonic() >= deadline:
                    break
                screen, focused = self.screen, self.focused
                chain = _up_from(target if done == 0 else focused or screen)
                for node in chain:
                    await _probe(node, deadline)
                await _probe(self, deadline)  # call_next callbacks run after a message
                if done and self.screen_stack and self.screen is screen and \
                        self.focused is focused and \
                        not any(n.message_queue_size for n in chain):
                    break
        finally:
            self._release_next()

    def _release_next(self) -> None:
        if not self._held or not self.is_running:
            self._in_flight = False
            return
        held = self._held.popleft()
        key = events.Key(held.key, held.character)
        key.set_sender(self)
        self._released.add(id(key))
        self.post_message(key)  # still in flight: keys read meanwhile queue behind it


def _up_from(node: MessagePump) -> list[MessagePump]:
    """``node`` and its ancestors, the app last: the way a key bubbles."""
    chain = [node]
    while (parent := chain[-1]._parent) is not None:
        chain.append(parent)
    return chain


async def _probe(node: MessagePump, deadline: float) -> None:
    """Return once ``node`` has handled what was queued for it, or at ``deadline``."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def mark() -> None:
        if not done.done():
            done.set_result(None)

    if not node.call_later(mark):
        return  # closed: it will handle nothing more
    with contextlib.suppress(asyncio.TimeoutError):  # 3.10: not yet the builtin
        await asyncio.wait_for(asyncio.shield(done), max(0.0, deadline - time.monotonic()))


def keys_in_flight(app: Any) -> bool:
    """Whether ``app`` still holds keys typed ahead (the storm waits for none)."""
    return isinstance(app, TypeaheadApp) and (app._in_flight or bool(app._held))
