"""Typed readers for the inventory's per-host settings, one per key, working on YAML nodes.

They read nodes (from ``yaml.compose``) rather than loaded values so that every
problem keeps its line and column, and so that plain YAML 1.1 words keep the meaning
an operator intended: ``host_key_checking: off`` is the word ``off``, not ``False``,
and ``name: 001`` keeps its zeros.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from probes.config.fleet import HostKeyChecking, TransportName

PASSWORD_MESSAGE = "passwords are not accepted in the inventory; use the ssh agent or a key file"

_TAG = "tag:yaml.org,2002:"
NULL, STR, INT, FLOAT, BOOL = (_TAG + t for t in ("null", "str", "int", "float", "bool"))
_C = SafeConstructor()
"""Used only for its scalar methods, which keep no state between calls."""
_HOP = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^@\s:\[\]]+)"
                  r"(?::(?P<port>\d+))?")


class Bad(Exception):
    """A value that does not fit; the reader turns it into one problem at its node."""

    def __init__(self, expected: str = "", node: yaml.Node | None = None, *,
                 message: str = "", hint: str = "") -> None:
        super().__init__(message or expected)
        self.expected = expected
        self.node = node
        self.message = message
        self.hint = hint


def got(node: yaml.Node) -> str:
    """What a node holds, for "got ..." in a message."""
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if node.tag == NULL:
        return "nothing"
    return repr(node.value) if node.tag == STR else str(node.value)


def text(node: yaml.Node) -> str:
    """Any non-empty scalar, as written (so ``001`` and ``off`` stay as they are)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == NULL or not node.value.strip():
        raise Bad("a non-empty string")
    return str(node.value).strip()


def word(node: yaml.Node) -> str:
    """A string without spaces: a host address or a user name."""
    value = text(node)
    if any(c.isspace() for c in value):
        raise Bad("a single word without spaces")
    return value


SLURM_NODE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A Slurm node name as rigwatch passes it to ``scontrol``: no spaces, ``=`` or commas (one
node, never a list)."""


def slurm_node(node: yaml.Node) -> str:
    """One Slurm node name (``slurm_node:``)."""
    value = text(node)
    if not SLURM_NODE.fullmatch(value):
        raise Bad("one Slurm node name (letters, digits, '.', '-', '_')")
    return value


def user(node: yaml.Node) -> str:
    value = word(node)
    if ":" in value:  # user:secret is the URL way of writing a password
        raise Bad(message=PASSWORD_MESSAGE)
    return value


def integer(low: int | None = None, high: int | None = None) -> Callable[[yaml.Node], int]:
    """A reader for a YAML integer (not a bool, not a quoted string) within bounds."""
    expected = ("an integer" if low is None else f"an integer from {low} to {high}"
                if high is not None else f"an integer ≥ {low}")

    def read(node: yaml.Node) -> int:
        if not isinstance(node, yaml.ScalarNode) or node.tag != INT:
            raise Bad(expected)
        value = int(_C.construct_yaml_int(node))
        if (low is not None and value < low) or (high is not None and value > high):
            raise Bad(expected)
        return value

    return read


def number(expected: str, *, zero_ok: bool) -> Callable[[yaml.Node], float]:
    """A reader for a finite YAML number, > 0 (or ≥ 0 where zero means "off")."""

    def read(node: yaml.Node) -> float:
        if not isinstance(node, yaml.ScalarNode) or node.tag not in (INT, FLOAT):
            raise Bad(expected)
        value = float(_C.construct_yaml_int(node) if node.tag == INT
                      else _C.construct_yaml_float(node))
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            raise Bad(expected)
        return value

    return read


def boolean(node: yaml.Node) -> bool:
    if not isinstance(node, yaml.ScalarNode) or node.tag != BOOL:
        raise Bad("true or false")
    return bool(_C.construct_yaml_bool(node))


def choice(*values: str) -> Callable[[yaml.Node], str]:
    """A reader for one word out of ``values``."""
    expected = "one of " + ", ".join(values)

    def read(node: yaml.Node) -> str:
        try:
            value = text(node)
        except Bad:
            raise Bad(expected) from None
        if value not in values:
            close = difflib.get_close_matches(value, values, n=1)
            raise Bad(expected, hint=f"did you mean '{close[0]}'?" if close else "")
        return value

    return read


def host_key_checking(node: yaml.Node) -> HostKeyChecking:
    return HostKeyChecking(choice(*(h.value for h in HostKeyChecking))(node))


def transport_name(node: yaml.Node) -> TransportName:
    return TransportName(choice(*(t.value for t in TransportName))(node))


def text_list(node: yaml.Node) -> tuple[str, ...]:
    """A YAML list of strings (a bare string is refused: ``tags: a,b`` is one odd tag)."""
    if not isinstance(node, yaml.SequenceNode):
        raise Bad("a list of strings")
    out = []
    for item in node.value:
        try:
            out.append(text(item))
        except Bad:
            raise Bad("a list of strings", item) from None
    return tuple(out)


def _items(node: yaml.Node, expected: str) -> list[yaml.Node]:
    """One scalar or a list of scalars, as nodes."""
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.ScalarNode) and node.tag != NULL:
        return [node]
    raise Bad(expected)


def jump(node: yaml.Node) -> tuple[str, ...]:
    """ProxyJump hops, outermost first: one ``[user@]host[:port]`` or a list of them."""
    expected = "a hop '[user@]host[:port]' or a list of them"
    hops = []
    for item in _items(node, expected):
        try:
            hop = word(item)
        except Bad:
            raise Bad(expected, item) from None
        m = _HOP.fullmatch(hop)
        if m is None:
            raise Bad(expected, item)
        if ":" in (m.group("user") or ""):
            raise Bad(message=PASSWORD_MESSAGE, node=item)
        if m.group("port") is not None and not 1 <= int(m.group("port")) <= 65535:
            raise Bad(message=f"'jump' hop {hop!r} has a port outside 1–65535", node=item)
        hops.append(hop)
    return tuple(hops)


def simulate(node: yaml.Node) -> tuple[str, ...]:
    """Simulator scenarios, ``leak:3,throttle`` or a list; checked by the agent's own parser."""
    from probes.agent import SIM_SCENARIOS, parse_scenarios

    out = []
    for item in _items(node, "a scenario list like 'leak:3,throttle' or a list of them"):
        for part in text(item).split(","):
            if not part.strip():
                continue
            try:
                parse_scenarios(part)
            except ValueError as exc:
                name = part.strip().split(":")[0].split("@")[0]
                close = [] if name in SIM_SCENARIOS else difflib.get_close_matches(
                    name, SIM_SCENARIOS, n=1)
                raise Bad(message=f"'simulate': {exc}", node=item,
                          hint=f"did you mean '{close[0]}'?" if close else "") from None
            out.append(part.strip())
    return tuple(out)


SETTINGS: dict[str, Callable[[yaml.Node], Any]] = {
    "address": word,
    "user": user,
    "port": integer(1, 65535),
    "jump": jump,
    "identity": text,
    "python": text,
    "tags": text_list,
    "expect_gpus": integer(0),
    "logs": text_list,
    "datasets": text_list,
    "slurm_node": slurm_node,
    "interval": number("a positive number of seconds", zero_ok=False),
    "simulate": simulate,
    "seed": integer(),
    "speed": number("a positive number", zero_ok=False),
    "transport": transport_name,
    "host_key_checking": host_key_checking,
    "connect_timeout": number("a positive number of seconds", zero_ok=False),
    "banner_timeout": number("a positive number of seconds", zero_ok=False),
    "login_timeout": number("a positive number of seconds", zero_ok=False),
    "keepalive_interval": number("a number of seconds ≥ 0 (0 turns keepalives off)",
                                 zero_ok=True),
    "keepalive_count": integer(1),
    "known_hosts": text,
    "ssh_config": boolean,
}
"""Every per-host (and per-group, and defaults) key, with the reader for its value."""
