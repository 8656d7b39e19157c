"""Why a node action was not taken: one line each, for the console and the CLI."""

from __future__ import annotations

from probes.errors import RigwatchError


class ActionError(RigwatchError):
    """A node action that cannot be taken as asked (a bad node name, a reason Slurm cannot
    keep, a host that maps to no node)."""

    title = "Node action not taken"


class AuditError(ActionError):
    """The audit trail cannot be written (or read): no action is taken without its record."""

    title = "Audit trail unusable"
