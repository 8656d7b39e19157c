"""A node as Slurm tells it (``sinfo``), the two ``scontrol update`` commands rigwatch runs,
and Slurm's refusals said plainly.

Every command goes through ``run_slurm``: an argv (never a shell), a timeout, bounded output.
The node's state is read back after each update, so "done" means Slurm itself shows the
node drained (or no longer drained), not that a command exited 0.

The refusals are the answers of Debian 12's Slurm 22.05 (the test cluster's) and of later
releases: ``slurm_update error: Invalid user id`` (22.05: a user who is not a Slurm operator;
``slurmctld.log`` says "Security violation, UPDATE_NODE RPC from uid=…"), ``Access/permission
denied`` (the same in other releases), ``Invalid node name specified``, and ``Unable to
contact slurm controller (connect failure)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.actions.nodes import check_node
from probes.config.slurm_cli import SlurmError, run_slurm
from probes.wire.sanitize import clean_text

ACTION_TIMEOUT_S = 20.0
"""How long an ``scontrol update`` or a read may take: Slurm's own client gives up on a
controller that refuses connections after about 9 s (``MessageTimeout`` 10 s)."""
SINFO_FORMAT = "%N|%T|%u|%H|%E"
"""Node, state (long form: ``drained``, ``draining``, ``idle``), who set the reason, when,
and the reason last: a ``|`` inside the reason cannot shift the fields before it."""
_NONE = ("", "none", "Unknown", "(null)", "N/A")


@dataclass(frozen=True)
class NodeState:
    """One node as ``sinfo`` shows it now."""

    node: str
    state: str
    """``sinfo %T``: ``idle``, ``drained``, ``draining``, ``mixed``, ``down*`` …"""
    reason: str | None = None
    by: str | None = None
    """Who set the reason (``root``), as Slurm recorded it."""
    since: str | None = None
    """When the reason was set, as Slurm prints it (``2026-12-06T08:32:54``)."""

    @property
    def drained(self) -> bool:
        """Drained or draining: no new job starts on it."""
        return "drain" in self.state.lower()

    def line(self) -> str:
        """``n3 drained: "rigwatch 3f2a9c1b: …" (root, 2026-12-06T08:32:54)``."""
        text = f"{self.node} {self.state}"
        if self.reason:
            who = ", ".join(p for p in (self.by, self.since) if p)
            text += f': "{self.reason}"' + (f" ({who})" if who else "")
        return text

    def to_json(self) -> dict[str, object]:
        """The ``verified`` object of an audit record."""
        return {"node": self.node, "state": self.state, "reason": self.reason,
                "by": self.by, "since": self.since}


def drain_argv(node: str, reason: str) -> list[str]:
    """``scontrol update nodename=NODE state=drain reason=…`` as one argv."""
    return ["scontrol", "update", f"nodename={check_node(node)}", "state=drain",
            f"reason={reason}"]


def resume_argv(node: str) -> list[str]:
    """``scontrol update nodename=NODE state=resume``."""
    return ["scontrol", "update", f"nodename={check_node(node)}", "state=resume"]


def parse_sinfo(text: str, node: str) -> NodeState | None:
    """``node``'s line of ``sinfo -h -N -o`` :data:`SINFO_FORMAT` (the first, when it is in
    several partitions), None when Slurm printed none."""
    for raw in text.splitlines():
        parts = raw.split("|", 4)
        if len(parts) != 5 or parts[0] != node:
            continue
        name, state, by, since, reason = (clean_text(p.strip()) for p in parts)
        return NodeState(name, state or "?", None if reason in _NONE else reason,
                         None if by in _NONE else by, None if since in _NONE else since)
    return None


def read_node(node: str, timeout_s: float = ACTION_TIMEOUT_S) -> NodeState:
    """The node's state and reason, from ``sinfo``.

    Raises:
        SlurmError: sinfo failed, did not answer, or knows no such node.
    """
    out = run_slurm(["sinfo", "-h", "-N", "-n", check_node(node), "-o", SINFO_FORMAT],
                    timeout_s, what="sinfo")
    state = parse_sinfo(out.decode("utf-8", "replace"), node)
    if state is None:
        raise SlurmError(f"sinfo: Invalid node name specified: {node}")
    return state


PERMISSION = ("invalid user id", "access/permission denied", "permission denied",
              "security violation", "not authorized")
UNKNOWN_NODE = ("invalid node name", "not found")
NO_CONTROLLER = ("unable to contact slurm controller", "did not answer within",
                 "socket timed out", "connection refused", "zero bytes were transmitted",
                 "communication connection failure", "connection timed out")


def plain_answer(err: SlurmError, node: str) -> str:
    """What Slurm's refusal means, in one line an operator can act on."""
    said = err.msg
    low = said.lower()
    if "not found: run this where" in low or "cannot run" in low:
        return said  # no Slurm client here: already plain
    if any(m in low for m in PERMISSION):
        return ("permission denied: Slurm lets only its operators and administrators change "
                f"a node (run this as one, e.g. with sudo) — {said}")
    if any(m in low for m in UNKNOWN_NODE):
        return (f"Slurm knows no node {node!r}: map the host to its node with slurm_node: "
                f"in the inventory — {said}")
    if "did not answer within" in low:  # sent, maybe queued: Slurm may still act on it
        return ("the Slurm controller did not answer: is slurmctld up? It may still take "
                f"the command: sinfo -R tells — {said}")
    if any(m in low for m in NO_CONTROLLER):
        return f"the Slurm controller did not answer: is slurmctld up? — {said}"
    return f"Slurm refused: {said}"

