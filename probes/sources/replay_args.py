"""The registry's entry for a recording as the source: asks the arguments before importing.

``probes.sources.replay`` brings the recording's reader (numpy among it, ~0.09 CPU s) with
it.  The registry asks every entry in turn, the recording first, so the live console
imported it before it had started its collectors (#38 item 5: the collectors' start waited
on an import the console's first frame does not need yet).  Only the arguments decide
whether a recording is named (``replay.from_args``: the file of ``rigwatch replay``, else
``--recording``), so that question is asked here and the module is imported only for a yes
(or for ``replay`` with no file, where it answers as before).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.sources.source import Source, SourceSettings


def names_recording(args: argparse.Namespace) -> bool:
    """Whether ``replay.from_args`` could answer anything but None for these arguments."""
    return getattr(args, "command", None) == "replay" or \
        getattr(args, "recording", None) is not None


def from_args(args: argparse.Namespace, settings: SourceSettings) -> Source | None:
    """``probes.sources.replay.from_args``, its module imported only when a recording may
    be named: None at once otherwise (what it answers then)."""
    if not names_recording(args):
        return None
    from probes.sources.replay import from_args as replay_from_args

    return replay_from_args(args, settings)
