"""Which Slurm node a host is, and which host a node is: by name, or by ``slurm_node:``."""

from __future__ import annotations

from collections.abc import Iterable

from probes.actions.errors import ActionError
from probes.config.fleet import HostSpec
from probes.config.inventory_values import SLURM_NODE


def check_node(name: str) -> str:
    """``name`` when it is one Slurm node name (what ``scontrol update nodename=`` takes).

    Raises:
        ActionError: a list (``n[1-4]``, ``a,b``), a space or ``=``, an option (``-x``), or
            no name at all: rigwatch acts on exactly one node it can name.
    """
    if not SLURM_NODE.fullmatch(name or ""):
        shown = " ".join(repr(name).split())[:80]
        raise ActionError(f"{shown} is not one Slurm node name (letters, digits, '.', '-', "
                          "'_'; one node, not a list)")
    return name


def node_of(spec: HostSpec) -> str:
    """The Slurm node of a host: its ``slurm_node:``, else its own name."""
    return spec.slurm_node or spec.name


def host_of(node: str, specs: Iterable[HostSpec]) -> HostSpec | None:
    """The host that is Slurm node ``node``: one that names it in ``slurm_node:``, else one
    named ``node`` that maps to no other node; None when none is."""
    specs = list(specs)
    named = next((s for s in specs if s.slurm_node == node), None)
    if named is not None:
        return named
    return next((s for s in specs if s.name == node and not s.slurm_node), None)
