"""App-level messages: what happened, in the past tense.

Session items are not messages: the app folds each into its ``FleetState`` as it is
emitted (``RigwatchApp.fold``) and redraws on a timer, which coalesces samples.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class HostChosen(Message):
    """The operator picked a host to look at (bubbles from the fleet screen to the app)."""

    host: str


@dataclass
class ViewRequested(Message):
    """A data screen became active and wants to be drawn now rather than at the next tick."""
