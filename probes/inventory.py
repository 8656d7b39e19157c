"""The inventory: which hosts to watch and how to reach them, from a YAML file.

Strict by design: every unknown key, wrong type or impossible value is reported with
its file, line and column (from the YAML node marks), all of them at once, so an
operator fixes a 1000-host file in one pass.  No passwords are accepted.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from probes.errors import ConfigError
from probes.fleet import HostKeyChecking, HostSpec, SshOptions
from probes.hostlist import HostlistError, expand_hostlist

SETTING_KEYS = (
    "user", "port", "jump", "identity", "python", "tags", "expect_gpus", "logs", "interval",
    "simulate", "seed", "speed", "transport", "host_key_checking", "connect_timeout",
    "login_timeout", "keepalive_interval", "keepalive_count", "known_hosts", "ssh_config",
)
HOST_KEYS = ("name", "address", *SETTING_KEYS)
GROUP_KEYS = (*SETTING_KEYS, "hosts")
TOP_KEYS = ("defaults", "groups", "hosts")
SECRET_KEYS = ("password", "passphrase", "passwd")


@dataclass(frozen=True)
class Problem:
    """One thing wrong in the inventory, where it is."""

    path: str
    line: int
    col: int
    key: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.col}"
        if self.message.startswith("unknown key"):
            return self.message.replace("{where}", where)
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class InventoryError(ConfigError):
    """The inventory cannot be used; ``problems`` lists every reason."""

    title = "Inventory error"

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Inventory:
    """A loaded inventory: its hosts in file order."""

    path: str
    hosts: tuple[HostSpec, ...]


def default_inventory_path() -> Path:
    """``$RIGWATCH_INVENTORY``, else ``<user config dir>/rigwatch/inventory.yaml``."""
    env = os.environ.get("RIGWATCH_INVENTORY")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir("rigwatch")) / "inventory.yaml"


@dataclass
class _Ctx:
    path: str
    problems: list[Problem] = field(default_factory=list)

    def add(self, node: yaml.Node, key: str | None, message: str) -> None:
        mark = node.start_mark
        self.problems.append(Problem(self.path, mark.line + 1, mark.column + 1, key, message))


def _scalar(node: yaml.Node) -> Any:
    """A scalar node's value typed as YAML resolved it (int, float, bool, null, str)."""
    if not isinstance(node, yaml.ScalarNode):
        return node
    if node.tag.rsplit(":", 1)[-1] in ("int", "float", "bool", "null"):
        return yaml.safe_load(node.value)
    return node.value


def _mapping(ctx: _Ctx, node: yaml.Node, allowed: tuple[str, ...], what: str
             ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """Keys of a mapping node with their nodes; unknown and duplicate keys reported."""
    if not isinstance(node, yaml.MappingNode):
        ctx.add(node, None, f"{what}: expected a mapping")
        return {}
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for knode, vnode in node.value:
        key = str(knode.value)
        if key.lower() in SECRET_KEYS:
            ctx.add(knode, key, "passwords are not accepted in the inventory; use the ssh "
                                "agent or a key file")
        elif key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" — did you mean '{close[0]}'?" if close else f" (expected one of {what} "\
                f"keys: {', '.join(allowed)})"
            ctx.add(knode, key, f"unknown key '{key}' at {{where}}{hint}")
        elif key in out:
            first = out[key][0].start_mark
            ctx.add(knode, key, f"duplicate key (first at line {first.line + 1})")
        else:
            out[key] = (knode, vnode)
    return out


def _str_list(ctx: _Ctx, node: yaml.Node, key: str) -> tuple[str, ...] | None:
    if isinstance(node, yaml.ScalarNode) and isinstance(_scalar(node), str):
        return (node.value,)
    if isinstance(node, yaml.SequenceNode) and all(
            isinstance(n, yaml.ScalarNode) and isinstance(_scalar(n), str) for n in node.value):
        return tuple(n.value for n in node.value)
    ctx.add(node, key, "expected a string or a list of strings")
    return None


def _number(ctx: _Ctx, node: yaml.Node, key: str, *, integer: bool, low: float,
            high: float | None = None, strict_low: bool = False) -> float | int | None:
    value = _scalar(node)
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        kind = "an integer" if integer else "a number"
        ctx.add(node, key, f"expected {kind}, got {getattr(node, 'value', '?')!r}")
        return None
    if value < low or (strict_low and value == low) or (high is not None and value > high):
        bounds = f"> {low:g}" if strict_low else f"{low:g}-{high:g}" if high else f">= {low:g}"
        ctx.add(node, key, f"expected {bounds}, got {value}")
        return None
    return value


def _setting(ctx: _Ctx, key: str, node: yaml.Node) -> Any:
    """Validate one setting; returns its value, or None after reporting a problem."""
    if key == "port":
        return _number(ctx, node, key, integer=True, low=1, high=65535)
    if key in ("expect_gpus", "keepalive_count", "seed"):
        return _number(ctx, node, key, integer=True, low=0)
    if key in ("interval", "connect_timeout", "login_timeout", "keepalive_interval", "speed"):
        return _number(ctx, node, key, integer=False, low=0, strict_low=True)
    if key in ("tags", "logs", "jump"):
        return _str_list(ctx, node, key)
    if key == "simulate":
        return _simulate(ctx, node)
    value = _scalar(node)
    if key == "ssh_config":
        if not isinstance(value, bool):
            ctx.add(node, key, f"expected true or false, got {getattr(node, 'value', '?')!r}")
            return None
        return value
    if not isinstance(value, str) or not value:
        ctx.add(node, key, "expected a non-empty string")
        return None
    if key == "transport" and value not in ("ssh", "local"):
        ctx.add(node, key, f"expected 'ssh' or 'local', got {value!r}")
        return None
    if key == "host_key_checking":
        try:
            return HostKeyChecking(value)
        except ValueError:
            ctx.add(node, key, f"expected strict, accept-new or off, got {value!r}")
            return None
    return value


def _simulate(ctx: _Ctx, node: yaml.Node) -> tuple[str, ...] | None:
    from probes.agent import parse_scenarios

    items = _str_list(ctx, node, "simulate")
    if items is None:
        return None
    names = tuple(s.strip() for item in items for s in item.split(",") if s.strip())
    try:
        parse_scenarios(",".join(names))
    except ValueError as exc:
        ctx.add(node, "simulate", str(exc))
        return None
    return names


def _settings(ctx: _Ctx, keys: dict[str, tuple[yaml.Node, yaml.Node]]) -> dict[str, Any]:
    out = {}
    for key, (_, vnode) in keys.items():
        if key in SETTING_KEYS or key == "address":
            value = _setting(ctx, key, vnode)
            if value is not None:
                out[key] = value
    return out


def _merge(*layers: dict[str, Any]) -> dict[str, Any]:
    """Later layers override; tags accumulate, in order, without repeats."""
    merged: dict[str, Any] = {}
    tags: list[str] = []
    for layer in layers:
        for tag in layer.get("tags", ()):
            if tag not in tags:
                tags.append(tag)
        merged.update({k: v for k, v in layer.items() if k != "tags"})
    merged["tags"] = tuple(tags)
    return merged


def _spec(name: str, s: dict[str, Any]) -> HostSpec:
    transport = s.get("transport", "ssh")
    ssh = SshOptions(
        address=s.get("address"), user=s.get("user"), port=s.get("port"),
        jump=tuple(s.get("jump", ())), identity=s.get("identity"),
        ssh_config=bool(s.get("ssh_config", False)), known_hosts=s.get("known_hosts"),
        host_key_checking=s.get("host_key_checking", HostKeyChecking.STRICT),
        connect_timeout_s=float(s.get("connect_timeout", 10.0)),
        login_timeout_s=float(s.get("login_timeout", 30.0)),
        keepalive_interval_s=float(s.get("keepalive_interval", 5.0)),
        keepalive_count_max=int(s.get("keepalive_count", 3)))
    return HostSpec(
        name=name, transport=transport,
        python=s.get("python", "python3" if transport == "ssh" else None),
        interval_s=float(s.get("interval", 1.0)), simulate=tuple(s.get("simulate", ())),
        seed=int(s.get("seed", 0)), speed=float(s.get("speed", 1.0)), tags=s["tags"],
        expect_gpus=s.get("expect_gpus"), logs=tuple(s.get("logs", ())), ssh=ssh)


class _Builder:
    def __init__(self, ctx: _Ctx, defaults: dict[str, Any]) -> None:
        self.ctx = ctx
        self.defaults = defaults
        self.hosts: list[HostSpec] = []
        self.seen: dict[str, yaml.Node] = {}

    def entries(self, node: yaml.Node, group: dict[str, Any], where: str) -> None:
        if not isinstance(node, yaml.SequenceNode):
            self.ctx.add(node, "hosts", f"{where}: expected a list of hosts")
            return
        for entry in node.value:
            self.entry(entry, group)

    def entry(self, node: yaml.Node, group: dict[str, Any]) -> None:
        name_node: yaml.Node
        own: dict[str, Any]
        if isinstance(node, yaml.ScalarNode):
            name_node, own = node, {}
        else:
            keys = _mapping(self.ctx, node, HOST_KEYS, "host")
            if "name" not in keys:
                if isinstance(node, yaml.MappingNode):
                    self.ctx.add(node, "name", "every host needs a name")
                return
            name_node, own = keys["name"][1], _settings(self.ctx, keys)
        pattern = _scalar(name_node)
        if not isinstance(pattern, str) or not pattern.strip():
            self.ctx.add(name_node, "name", "expected a host name")
            return
        try:
            names = expand_hostlist(pattern.strip())
        except HostlistError as exc:
            self.ctx.add(name_node, "name", str(exc))
            return
        if len(names) > 1 and "address" in own:
            self.ctx.add(name_node, "address", "a host range cannot share one address")
            return
        settings = _merge(self.defaults, group, own)
        for name in names:
            first = self.seen.get(name)
            if first is not None:
                self.ctx.add(name_node, "name", f"duplicate host '{name}' (first at line "
                                                f"{first.start_mark.line + 1})")
                continue
            self.seen[name] = name_node
            self.hosts.append(_spec(name, settings))


def _parse(ctx: _Ctx, root: yaml.Node) -> list[HostSpec]:
    top = _mapping(ctx, root, TOP_KEYS, "top-level")
    defaults: dict[str, Any] = {}
    if "defaults" in top:
        defaults = _settings(ctx, _mapping(ctx, top["defaults"][1], SETTING_KEYS, "defaults"))
    builder = _Builder(ctx, defaults)
    if "groups" in top:
        gnodes = top["groups"][1]
        if not isinstance(gnodes, yaml.MappingNode):
            ctx.add(gnodes, "groups", "expected a mapping of group names to groups")
            gnodes = yaml.MappingNode("tag:yaml.org,2002:map", [])
        for knode, gnode in gnodes.value:
            gname = str(knode.value)
            gkeys = _mapping(ctx, gnode, GROUP_KEYS, "group")
            group = _settings(ctx, gkeys)
            group["tags"] = (gname, *group.get("tags", ()))
            if "hosts" in gkeys:
                builder.entries(gkeys["hosts"][1], group, f"group {gname}")
            else:
                ctx.add(gnode, "hosts", f"group {gname} lists no hosts")
    if "hosts" in top:
        builder.entries(top["hosts"][1], {}, "hosts")
    if not builder.hosts and not ctx.problems:
        ctx.add(root, None, "the inventory lists no hosts")
    return builder.hosts


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file.

    Raises:
        InventoryError: with every problem found, each naming file, line and column.
    """
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError([Problem(shown, 1, 1, None, f"cannot read: {exc}")]) from None
    ctx = _Ctx(shown)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise InventoryError([Problem(shown, line, col, None,
                                      f"YAML syntax: {exc.problem}")]) from None
    if root is None:
        raise InventoryError([Problem(shown, 1, 1, None, "the inventory is empty")])
    hosts = _parse(ctx, root)
    if ctx.problems:
        raise InventoryError(ctx.problems)
    return Inventory(shown, tuple(hosts))
