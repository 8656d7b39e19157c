"""The inventory: which hosts to watch and how to reach them, from one YAML file.

Settings layer ``defaults`` < group < host: ``tags`` accumulate (the group's name
among them), every other key overrides.  Names may be Slurm host lists
(``gpu[001-064]``).  Strict by design: unknown keys, wrong types, impossible values,
duplicate hosts and keys are all collected, each with ``file:line:col`` from the YAML
node marks, so a 1000-host file is fixed in one pass.  Passwords are refused outright.
The format is described in README.md ("Inventory").
"""

from __future__ import annotations

import difflib
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from probes.config import inventory_values as v
from probes.config.fleet import HostSpec, SshOptions, TransportName
from probes.config.hostlist import MAX_HOSTS, HostlistError, count_hostlist, expand_hostlist
from probes.errors import InventoryError, Problem

__all__ = ["ENV_VAR", "Inventory", "InventoryError", "Problem", "choose_inventory_path",
           "default_inventory_path", "expand_hostlist", "load_inventory"]

ENV_VAR = "RIGWATCH_INVENTORY"
SETTING_KEYS = tuple(v.SETTINGS)
TOP_KEYS = ("defaults", "groups", "hosts")
GROUP_KEYS = (*SETTING_KEYS, "hosts")
GROUP_HOST_KEYS = ("name", *SETTING_KEYS)
TOP_HOST_KEYS = ("name", "group", *SETTING_KEYS)

_SSH_FIELDS = {"address": "address", "user": "user", "port": "port", "jump": "jump",
               "identity": "identity", "ssh_config": "ssh_config",
               "known_hosts": "known_hosts", "host_key_checking": "host_key_checking",
               "connect_timeout": "connect_timeout_s", "banner_timeout": "banner_timeout_s",
               "login_timeout": "login_timeout_s",
               "keepalive_interval": "keepalive_interval_s",
               "keepalive_count": "keepalive_count_max"}
_SPEC_FIELDS = {"python": "python", "interval": "interval_s", "simulate": "simulate",
                "seed": "seed", "speed": "speed", "expect_gpus": "expect_gpus",
                "logs": "logs", "datasets": "datasets", "slurm_node": "slurm_node"}
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_MERGE = "tag:yaml.org,2002:merge"

Pairs = dict[str, tuple[yaml.Node, yaml.Node]]
"""A mapping's keys with their key and value nodes."""
Layer = dict[str, tuple[Any, yaml.Node]]
"""Checked settings of one level (defaults, group, host) with the node each came from."""


@dataclass(frozen=True)
class Inventory:
    """A loaded, valid inventory."""

    path: Path
    hosts: tuple[HostSpec, ...]
    """Every host, ranges expanded, in file order."""


def default_inventory_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$RIGWATCH_INVENTORY`` if set, else ``<user config dir>/rigwatch/inventory.yaml``."""
    env = (os.environ if environ is None else environ).get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir("rigwatch")) / "inventory.yaml"


def choose_inventory_path(given: str | Path | None,
                          environ: Mapping[str, str] | None = None) -> Path | None:
    """The inventory to use: the one given, else ``$RIGWATCH_INVENTORY`` (which must then
    exist: a typo should not silently fall back to the demo), else the default file if
    it exists, else None (the console watches this machine or the demo).
    """
    if given is not None:
        return Path(given)
    env = (os.environ if environ is None else environ).get(ENV_VAR)
    path = default_inventory_path(environ)
    return path if env or path.is_file() else None


def _is_secret(key: str) -> bool:
    k = key.lower()
    return "password" in k or "passphrase" in k or k == "passwd"


@dataclass
class _Group:
    name: str
    settings: Layer
    hosts: yaml.Node | None


class _Reader:
    """One pass over the composed document, collecting host specs and problems."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []
        self.specs: list[HostSpec] = []
        self.seen: dict[str, yaml.Node] = {}
        self.total = 0

    def add(self, node: yaml.Node, key: str | None, message: str, hint: str = "") -> None:
        mark = node.start_mark
        self.problems.append(Problem(self.path, mark.line + 1, mark.column + 1, key, message,
                                     hint))

    def loc(self, node: yaml.Node) -> str:
        return f"{self.path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"

    def secrets(self, root: yaml.Node) -> None:
        """Refuse any key that looks like a password, wherever it is."""
        stack, seen = [root], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                for knode, vnode in node.value:
                    if isinstance(knode, yaml.ScalarNode) and _is_secret(str(knode.value)):
                        self.add(knode, str(knode.value), v.PASSWORD_MESSAGE)
                    stack += [knode, vnode]
            elif isinstance(node, yaml.SequenceNode):
                stack += node.value

    def pairs(self, node: yaml.MappingNode, seen: frozenset[int] = frozenset()
              ) -> Iterator[tuple[yaml.Node, yaml.Node, bool]]:
        """(key, value, merged) of a mapping, ``<<: *anchor`` merges first."""
        own = []
        for knode, vnode in node.value:
            if knode.tag != _MERGE:
                own.append((knode, vnode, False))
                continue
            sources = vnode.value if isinstance(vnode, yaml.SequenceNode) else [vnode]
            for src in sources:
                if not isinstance(src, yaml.MappingNode) or id(src) in seen:
                    self.add(src, "<<", "'<<' must merge a mapping (an &anchor)")
                    continue
                yield from ((k, val, True) for k, val, _ in self.pairs(src, seen | {id(node)}))
        yield from own

    def mapping(self, node: yaml.Node, allowed: tuple[str, ...] | None, what: str) -> Pairs:
        """A mapping's checked keys: unknown, duplicate and non-string keys reported."""
        if isinstance(node, yaml.ScalarNode) and node.tag == v.NULL:
            return {}
        if not isinstance(node, yaml.MappingNode):
            self.add(node, None, f"{what} must be a mapping, got {v.got(node)}")
            return {}
        out: Pairs = {}
        own: dict[str, yaml.Node] = {}
        for knode, vnode, from_merge in self.pairs(node):
            if not isinstance(knode, yaml.ScalarNode) or knode.tag == v.NULL:
                self.add(knode, None, f"keys of {what} must be names, got {v.got(knode)}")
                continue
            key = str(knode.value)
            if _is_secret(key) or (from_merge and key in out):
                continue  # secrets() reports passwords; an earlier merge source wins
            if key in own:
                self.add(knode, key, f"duplicate key '{key}'", f"first at {self.loc(own[key])}")
                continue
            if not from_merge:
                own[key] = knode
            if allowed is not None and key not in allowed:
                self.unknown(knode, key, allowed)
                continue
            out[key] = (knode, vnode)  # a key of the mapping itself overrides a merged one
        return out

    def unknown(self, knode: yaml.Node, key: str, allowed: tuple[str, ...]) -> None:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.7)
        if key == "group" and "group" not in allowed:
            hint = "a host listed under a group is in it; 'group:' is for top-level hosts"
        elif close:
            hint = f"did you mean '{close[0]}'?"
        else:
            hint = "expected one of: " + ", ".join(allowed)
        self.add(knode, key, f"unknown key '{key}'", hint)

    def settings(self, pairs: Pairs) -> Layer:
        """Check every setting of one level; bad ones are reported and left out."""
        out: Layer = {}
        for key, (_, vnode) in pairs.items():
            read = v.SETTINGS.get(key)
            if read is None:
                continue  # name, group, hosts: the callers' business
            try:
                out[key] = (read(vnode), vnode)
            except v.Bad as bad:
                node = bad.node or vnode
                self.add(node, key, bad.message or f"'{key}' must be {bad.expected}, got "
                                                   f"{v.got(node)}", bad.hint)
        return out

    def read(self, root: yaml.Node) -> None:
        self.secrets(root)
        top = self.mapping(root, TOP_KEYS, "the inventory")
        defaults = self.settings(self.mapping(top["defaults"][1], SETTING_KEYS, "'defaults'")
                                 ) if "defaults" in top else {}
        groups = self.groups(top["groups"][1]) if "groups" in top else {}
        for key in top:  # sections in file order, so hosts come out in file order
            if key == "groups":
                for group in groups.values():
                    self.hosts(group.hosts, defaults, group, None)
            elif key == "hosts":
                self.hosts(top["hosts"][1], defaults, None, groups)
        if not self.specs and not self.problems:
            self.add(root, "hosts", "the inventory defines no hosts",
                     "add a 'hosts:' list, at the top level or under a group")

    def groups(self, node: yaml.Node) -> dict[str, _Group]:
        out = {}
        for name, (knode, gnode) in self.mapping(node, None, "'groups'").items():
            if not _NAME.fullmatch(name):
                self.add(knode, name, f"group name {name!r} may only contain letters, digits, "
                                      "'.', '-' and '_'")
                continue
            pairs = self.mapping(gnode, GROUP_KEYS, f"group '{name}'")
            out[name] = _Group(name, self.settings(pairs),
                               pairs["hosts"][1] if "hosts" in pairs else None)
        return out

    def hosts(self, node: yaml.Node | None, defaults: Layer, group: _Group | None,
              groups: dict[str, _Group] | None) -> None:
        """One ``hosts:`` list; ``groups`` is given only at the top level (``group:`` refs)."""
        if node is None or (isinstance(node, yaml.ScalarNode) and node.tag == v.NULL):
            return
        if not isinstance(node, yaml.SequenceNode):
            self.add(node, "hosts", f"'hosts' must be a list of host names or mappings, got "
                                    f"{v.got(node)}")
            return
        for entry in node.value:
            if isinstance(entry, yaml.ScalarNode) and entry.tag != v.NULL:
                self.expand(entry, [defaults, group.settings if group else {}, {}], group)
            elif isinstance(entry, yaml.MappingNode):
                self.host(entry, defaults, group, groups)
            else:
                self.add(entry, "hosts", f"a host must be a name or a mapping, got "
                                         f"{v.got(entry)}")

    def host(self, node: yaml.MappingNode, defaults: Layer, group: _Group | None,
             groups: dict[str, _Group] | None) -> None:
        pairs = self.mapping(node, GROUP_HOST_KEYS if groups is None else TOP_HOST_KEYS,
                             "a host")
        own = self.settings(pairs)
        if "group" in pairs and groups is not None:
            group = self.group_ref(pairs["group"][1], groups)
            if group is None:
                return
        if "name" not in pairs:
            self.add(node, "name", "host has no 'name'", "every host mapping needs 'name:'")
            return
        self.expand(pairs["name"][1], [defaults, group.settings if group else {}, own], group)

    def group_ref(self, node: yaml.Node, groups: dict[str, _Group]) -> _Group | None:
        try:
            name = v.text(node)
        except v.Bad:
            self.add(node, "group", f"'group' must be a group name, got {v.got(node)}")
            return None
        if name in groups:
            return groups[name]
        close = difflib.get_close_matches(name, list(groups), n=1)
        hint = (f"did you mean '{close[0]}'?" if close else
                "defined groups: " + ", ".join(groups) if groups else "no groups are defined")
        self.add(node, "group", f"unknown group '{name}'", hint)
        return None

    def expand(self, name_node: yaml.Node, layers: list[Layer], group: _Group | None) -> None:
        """Expand one host name (or range) into specs, checking size, address and dupes."""
        try:
            pattern = v.text(name_node)
            count = count_hostlist(pattern)
        except v.Bad:
            self.add(name_node, "name", f"'name' must be a host name, got {v.got(name_node)}")
            return
        except HostlistError as exc:
            self.add(name_node, "name", str(exc))
            return
        if count > MAX_HOSTS:
            self.add(name_node, "name", f"{pattern!r} expands to {count:,} hosts (at most "
                                        f"{MAX_HOSTS:,})")
            return
        address = next((layer["address"] for layer in reversed(layers) if "address" in layer),
                       None)
        if count > 1 and address is not None:
            self.add(address[1], "address", f"'address' is ambiguous for the host range "
                     f"{pattern!r} ({count:,} hosts)",
                     "leave 'address' out (each name is its own address) or list the hosts "
                     "one by one")
            return
        node = next((layer["slurm_node"] for layer in reversed(layers)
                     if "slurm_node" in layer), None)
        if count > 1 and node is not None:  # every host of the range would drain one node
            self.add(node[1], "slurm_node", f"'slurm_node' is ambiguous for the host range "
                     f"{pattern!r} ({count:,} hosts)",
                     "leave it out (each name is its own node) or list the hosts one by one")
            return
        if self.total + count > MAX_HOSTS:
            self.add(name_node, "name", f"the inventory expands to more than {MAX_HOSTS:,} "
                                        "hosts")
            self.total = MAX_HOSTS + 1  # one such problem is enough
            return
        self.total += count
        for name in expand_hostlist(pattern):
            if not _NAME.fullmatch(name):
                self.add(name_node, "name", f"host name {name!r} may only contain letters, "
                         "digits, '.', '-' and '_'", "put an IP address in 'address'")
                return
            if name in self.seen:
                self.add(name_node, "name", f"duplicate host '{name}'",
                         f"first defined at {self.loc(self.seen[name])}")
                continue
            self.seen[name] = name_node
            self.specs.append(_spec(name, layers, group.name if group else None))


def _spec(name: str, layers: list[Layer], group: str | None) -> HostSpec:
    """One host's spec from its layers (defaults, group, own), the later ones winning."""
    merged = {key: value for layer in layers for key, (value, _) in layer.items()}
    defaults, group_layer, own = (list(layer["tags"][0]) if "tags" in layer else []
                                  for layer in layers)
    tags = [*defaults, *([group] if group else []), *group_layer, *own]
    transport = merged.get("transport", TransportName.SSH)
    fields = {_SPEC_FIELDS[k]: val for k, val in merged.items() if k in _SPEC_FIELDS}
    fields.setdefault("python", "python3" if transport is TransportName.SSH else None)
    if fields.get("simulate"):
        fields.setdefault("seed", name_seed(name))
    ssh = SshOptions(**{_SSH_FIELDS[k]: val for k, val in merged.items() if k in _SSH_FIELDS})
    return HostSpec(name=name, transport=transport, tags=tuple(dict.fromkeys(tags)), ssh=ssh,
                    **fields)


SEED_RANGE = 2**31
"""Seeds derived from names stay within a signed 32-bit int, as any RNG takes them."""


def name_seed(name: str) -> int:
    """A simulated host's seed when the inventory sets none: derived from its name, so
    ``x-ok1`` and ``x-leak`` show different numbers, and the same ones on every run (not
    ``hash()``, which Python salts per process)."""
    return zlib.crc32(name.encode("utf-8")) % SEED_RANGE


def _yaml_problem(path: str, text: str, exc: yaml.YAMLError) -> Problem:
    """A YAML parse error as one line, at the parser's own mark."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        ctx = exc.context_mark
        hint = (f"{exc.context} from line {ctx.line + 1}" if exc.context and ctx
                else exc.context or "")
        if "got '['" in (exc.problem or ""):  # gpu[1-4] inside a [ ... ] list
            hint += "; inside [ ] quote host ranges: ['gpu[1-4]']"
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        return Problem(path, line, col, None, f"invalid YAML: {exc.problem or exc.context}",
                       hint)
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[:exc.position]
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        return Problem(path, before.count("\n") + 1, len(before) - before.rfind("\n"), None,
                       f"invalid YAML: {exc.reason} (character {char!r})")
    return Problem(path, 0, 0, None, "invalid YAML: " + " ".join(str(exc).split()))


def load_inventory(path: str | Path) -> Inventory:
    """Read and check an inventory file.

    Args:
        path: the YAML file; problems name it as given here.

    Returns:
        The inventory, every host's spec in file order.

    Raises:
        InventoryError: the file cannot be read or parsed, or has problems; it lists
            every problem found, each with file, line and column.
    """
    shown = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise InventoryError([Problem(shown, 0, 0, None, "cannot read the inventory",
                                      exc.strerror or str(exc))]) from None
    except UnicodeDecodeError as exc:
        raise InventoryError([Problem(shown, 0, 0, None, "the inventory is not UTF-8 text",
                                      f"byte {exc.start} cannot be decoded")]) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InventoryError([_yaml_problem(shown, text, exc)]) from None
    except RecursionError:
        raise InventoryError([Problem(shown, 0, 0, None, "invalid YAML: nested too deeply")]
                             ) from None
    if root is None:
        raise InventoryError([Problem(shown, 1, 1, "hosts", "the inventory defines no hosts",
                                      "the file is empty")])
    reader = _Reader(shown)
    reader.read(root)
    if reader.problems:
        unique = dict.fromkeys(reader.problems)  # a merged (<<) mapping reports once
        raise InventoryError(sorted(unique, key=lambda p: (p.line, p.col)))
    return Inventory(Path(path), tuple(reader.specs))
