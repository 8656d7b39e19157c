"""App-level messages: what happened, in the past tense.

``HostItemReceived`` deliberately does not override ``can_replace``: a hello, a log
event or a disconnect must never be dropped.  The app folds every item into its
``FleetState`` at once and redraws on a timer, which coalesces samples instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from probes.wire.events import SessionItem


@dataclass
class HostItemReceived(Message, bubble=False):
    """A host's session produced an item (hello, sample, event, connect, disconnect)."""

    host: str
    item: SessionItem


@dataclass
class HostChosen(Message):
    """The operator picked a host to look at (bubbles from the fleet screen to the app)."""

    host: str


@dataclass
class ViewRequested(Message):
    """A data screen became active and wants to be drawn now rather than at the next tick."""
