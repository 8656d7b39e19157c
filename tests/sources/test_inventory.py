"""The inventory: host lists, layering of settings, and one precise line per problem."""

from __future__ import annotations

import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from probes.config import inventory, inventory_values
from probes.config.fleet import HostKeyChecking, HostSpec, SshOptions
from probes.config.hostlist import HostlistError, count_hostlist, expand_hostlist
from probes.config.inventory import load_inventory
from probes.errors import ConfigError, InventoryError, Problem

SCENARIOS = ("known: healthy, leak, throttle, xid79, nccl-timeout, disk-saturated, "
             "link-downgrade, low-ram, driver-skew, train, no-environ, ib-port-down; "
             "form NAME[:GPU][@SECONDS]")
PASSWORD = "passwords are not accepted in the inventory; use the ssh agent or a key file"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bare HOME, so the developer's ~/.ssh/config never leaks into a test."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def write(tmp_path: Path, text: str, name: str = "inventory.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    """Every problem line, with the temporary folder taken out of the path."""
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, text))
    assert str(err.value) == "\n".join(str(p) for p in err.value.problems)
    return [str(p).replace(f"{tmp_path}/", "") for p in err.value.problems]


# ---- host lists -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "names"), [
    ("plain-host", ["plain-host"]),
    ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
    ("gpu[001-002,010]", ["gpu001", "gpu002", "gpu010"]),
    ("gpu[1,3,5]", ["gpu1", "gpu3", "gpu5"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[1-010]", [f"n{i:03d}" for i in range(1, 11)]),
    ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
    ("gpu[1-2],login1", ["gpu1", "gpu2", "login1"]),
    ("[7-8]x", ["7x", "8x"]),
])
def test_hostlist_expansion(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names
    assert count_hostlist(text) == len(names)


@pytest.mark.parametrize(("text", "message"), [
    ("gpu[5-3]", "empty range '5-3' in 'gpu[5-3]' (end before start)"),
    ("gpu[]", "empty brackets in 'gpu[]'"),
    ("gpu[1-", "unclosed '[' in 'gpu[1-'"),
    ("gpu1]", "unmatched ']' in 'gpu1]'"),
    ("gpu[[1]]", "nested '[' in 'gpu[[1]]'"),
    ("gpu[a-b]", "malformed range 'a-b' in 'gpu[a-b]' (expected N or N-M)"),
    ("gpu[1-2-3]", "malformed range '1-2-3' in 'gpu[1-2-3]' (expected N or N-M)"),
    ("a,,b", "empty host name in 'a,,b'"),
    ("gpu[1-10001]", "'gpu[1-10001]' expands to 10,001 hosts (at most 10,000)"),
    ("r[1-200]-n[1-200]", "'r[1-200]-n[1-200]' expands to 40,000 hosts (at most 10,000)"),
])
def test_hostlist_errors(text: str, message: str) -> None:
    with pytest.raises(HostlistError) as err:
        expand_hostlist(text)
    assert str(err.value) == message


def test_huge_ranges_are_refused_before_expanding(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(HostlistError):
        expand_hostlist("gpu[0-999999999999]-x[0-999999999999]")
    assert problems(tmp_path, "hosts: ['gpu[00001-10001]']\n") == [
        "'gpu[00001-10001]' expands to 10,001 hosts (at most 10,000) at inventory.yaml:1:9"]
    assert time.monotonic() - t0 < 1.0


def test_the_whole_inventory_is_capped_too(tmp_path: Path) -> None:
    assert problems(tmp_path, "hosts: ['a[1-6000]', 'b[1-6000]']\n") == [
        "the inventory expands to more than 10,000 hosts at inventory.yaml:1:22"]


# ---- a valid inventory -------------------------------------------------------------------

def test_defaults_groups_ranges_and_overrides(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, """
        defaults:
          user: ops
          python: python3
          interval: 1
          host_key_checking: strict
          connect_timeout: 10
          login_timeout: 30
          keepalive_interval: 5
          keepalive_count: 3
          known_hosts: ~/.ssh/known_hosts
          ssh_config: false
          tags: [soak]
        groups:
          rack-a:
            jump: [bastion.example]
            tags: [rack-a, h100]
            expect_gpus: 8
            hosts:
              - gpu[001-002]
              - name: gpu-special
                address: 192.0.2.9
                port: 2222
                user: root
                host_key_checking: accept-new
                jump: []
                tags: [special]
        hosts:
          - name: lab-box
            address: 127.0.0.1
            port: 2200
            identity: ~/.ssh/id_ed25519
            simulate: [leak, throttle]
            seed: 3
            speed: 60
            expect_gpus: 8
            logs: ["/var/log/train/*.log"]
            transport: ssh
            connect_timeout: 2.5
            keepalive_interval: 0
          - name: here
            transport: local
            simulate: "xid79:6@120,healthy"
            host_key_checking: off
          - name: late
            group: rack-a
            interval: 0.5
    """))
    common = {"user": "ops", "known_hosts": "~/.ssh/known_hosts"}
    rack = SshOptions(jump=("bastion.example",), **common)
    rack_tags = ("soak", "rack-a", "h100")
    assert inv.path == tmp_path / "inventory.yaml"
    assert inv.hosts == (
        HostSpec("gpu001", transport="ssh", python="python3", tags=rack_tags, expect_gpus=8,
                 ssh=rack),
        HostSpec("gpu002", transport="ssh", python="python3", tags=rack_tags, expect_gpus=8,
                 ssh=rack),
        HostSpec("gpu-special", transport="ssh", python="python3",
                 tags=(*rack_tags, "special"), expect_gpus=8,
                 ssh=SshOptions(address="192.0.2.9", port=2222, user="root",
                                known_hosts="~/.ssh/known_hosts",
                                host_key_checking=HostKeyChecking.ACCEPT_NEW)),
        HostSpec("lab-box", transport="ssh", python="python3", simulate=("leak", "throttle"),
                 seed=3, speed=60.0, tags=("soak",), expect_gpus=8,
                 logs=("/var/log/train/*.log",),
                 ssh=SshOptions(address="127.0.0.1", port=2200, identity="~/.ssh/id_ed25519",
                                connect_timeout_s=2.5, keepalive_interval_s=0.0, **common)),
        HostSpec("here", transport="local", python="python3",
                 simulate=("xid79:6@120", "healthy"), tags=("soak",),
                 seed=inventory.name_seed("here"),
                 ssh=SshOptions(host_key_checking=HostKeyChecking.OFF, **common)),
        HostSpec("late", transport="ssh", python="python3",
                 interval_s=0.5, tags=rack_tags, expect_gpus=8, ssh=rack),
    )
    assert "--tail=/var/log/train/*.log" in inv.hosts[3].agent_args()


def test_python_defaults_to_python3_over_ssh_only(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts: [a, {name: b, transport: local}, '007']\n"))
    assert [(h.name, h.transport, h.python) for h in inv.hosts] == [
        ("a", "ssh", "python3"), ("b", "local", None), ("007", "ssh", "python3")]


def test_yaml_anchors_and_merge_keys(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, """
        groups:
          rack-a: &rack
            user: ops
            port: 2200
            hosts: [a1]
          rack-b:
            <<: *rack
            port: 2201
            hosts: [b1]
    """))
    assert [(h.name, h.ssh.user, h.ssh.port, h.tags) for h in inv.hosts] == [
        ("a1", "ops", 2200, ("rack-a",)), ("b1", "ops", 2201, ("rack-b",))]


def test_every_setting_key_reaches_a_spec_field() -> None:
    mapped = {*inventory._SSH_FIELDS, *inventory._SPEC_FIELDS, "tags", "transport"}
    assert mapped == set(inventory_values.SETTINGS)
    assert set(inventory._SSH_FIELDS.values()) <= set(SshOptions.__dataclass_fields__)
    assert set(inventory._SPEC_FIELDS.values()) <= set(HostSpec.__dataclass_fields__)


# ---- every problem, one exact line each ------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("hosts:\n  - name: a\n    adress: 10.0.0.1\n",
     ["unknown key 'adress' at inventory.yaml:3:5 — did you mean 'address'?"]),
    ("defaults:\n  usr: ops\nhosts: [a]\n",
     ["unknown key 'usr' at inventory.yaml:2:3 — did you mean 'user'?"]),
    ("host:\n  - a\n", ["unknown key 'host' at inventory.yaml:1:1 — did you mean 'hosts'?"]),
    ("hosts: [a]\nzzz: 1\n",
     ["unknown key 'zzz' at inventory.yaml:2:1 — expected one of: defaults, groups, hosts"]),
    ("groups:\n  g:\n    hots: [a]\n",
     ["unknown key 'hots' at inventory.yaml:3:5 — did you mean 'hosts'?"]),
    ("groups:\n  g:\n    hosts:\n      - {name: a, group: g}\n",
     ["unknown key 'group' at inventory.yaml:4:19 — a host listed under a group is in it; "
      "'group:' is for top-level hosts"]),
    ("hosts:\n  - name: a\n    port: ssh\n",
     ["'port' must be an integer from 1 to 65535, got 'ssh' at inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    port: '22'\n",
     ["'port' must be an integer from 1 to 65535, got '22' at inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    port: 70000\n",
     ["'port' must be an integer from 1 to 65535, got 70000 at inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    port: 0\n",
     ["'port' must be an integer from 1 to 65535, got 0 at inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    tags: rack-a\n",
     ["'tags' must be a list of strings, got 'rack-a' at inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    tags: [x, {y: 1}]\n",
     ["'tags' must be a list of strings, got a mapping at inventory.yaml:3:15"]),
    ("hosts:\n  - name: a\n    interval: 0\n",
     ["'interval' must be a positive number of seconds, got 0 at inventory.yaml:3:15"]),
    ("hosts:\n  - name: a\n    interval: fast\n",
     ["'interval' must be a positive number of seconds, got 'fast' at inventory.yaml:3:15"]),
    ("defaults: {interval: -1}\nhosts: [a]\n",
     ["'interval' must be a positive number of seconds, got -1 at inventory.yaml:1:22"]),
    ("hosts:\n  - name: a\n    ssh_config: maybe\n",
     ["'ssh_config' must be true or false, got 'maybe' at inventory.yaml:3:17"]),
    ("hosts:\n  - name: a\n    transport: telnet\n",
     ["'transport' must be one of ssh, local, got 'telnet' at inventory.yaml:3:16"]),
    ("hosts:\n  - name: a\n    host_key_checking: sometimes\n",
     ["'host_key_checking' must be one of strict, accept-new, off, got 'sometimes' at "
      "inventory.yaml:3:24"]),
    ("hosts:\n  - name: a\n    host_key_checking: accept_new\n",
     ["'host_key_checking' must be one of strict, accept-new, off, got 'accept_new' at "
      "inventory.yaml:3:24 — did you mean 'accept-new'?"]),
    ("hosts:\n  - name: a\n    simulate: leek\n",
     [f"'simulate': unknown scenario 'leek' ({SCENARIOS}) at inventory.yaml:3:15 — "
      "did you mean 'leak'?"]),
    ("hosts:\n  - name: a\n    simulate: [healthy, 'leak:9']\n",
     ["'simulate': scenario 'leak:9': GPU index must be 0-7 at inventory.yaml:3:25"]),
    ("hosts:\n  - name: a\n    jump: 'bastion:x'\n",
     ["'jump' must be a hop '[user@]host[:port]' or a list of them, got 'bastion:x' at "
      "inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    jump: [ok, 'b:99999']\n",
     ["'jump' hop 'b:99999' has a port outside 1–65535 at inventory.yaml:3:16"]),
    ("hosts:\n  - a\n  - b\n  - a\n",
     ["duplicate host 'a' at inventory.yaml:4:5 — first defined at inventory.yaml:2:5"]),
    ("groups:\n  g:\n    hosts:\n      - n[1-3]\nhosts: [n2]\n",
     ["duplicate host 'n2' at inventory.yaml:5:9 — first defined at inventory.yaml:4:9"]),
    ("hosts:\n  - gpu[5-3]\n",
     ["empty range '5-3' in 'gpu[5-3]' (end before start) at inventory.yaml:2:5"]),
    ("hosts:\n  - gpu[]\n", ["empty brackets in 'gpu[]' at inventory.yaml:2:5"]),
    ("hosts:\n  - name: gpu[1-\n", ["unclosed '[' in 'gpu[1-' at inventory.yaml:2:11"]),
    ("hosts:\n  - name: gpu[1-2]\n    address: 192.0.2.1\n",
     ["'address' is ambiguous for the host range 'gpu[1-2]' (2 hosts) at inventory.yaml:3:14 — "
      "leave 'address' out (each name is its own address) or list the hosts one by one"]),
    ("hosts:\n  - 'gpu 1'\n",
     ["host name 'gpu 1' may only contain letters, digits, '.', '-' and '_' at "
      "inventory.yaml:2:5 — put an IP address in 'address'"]),
    ("hosts:\n  - name: a\n    group: rack-z\ngroups:\n  rack-a: {}\n",
     ["unknown group 'rack-z' at inventory.yaml:3:12 — did you mean 'rack-a'?"]),
    ("hosts:\n  - name: a\n    group: rack-z\n",
     ["unknown group 'rack-z' at inventory.yaml:3:12 — no groups are defined"]),
    ("hosts: []\n", ["the inventory defines no hosts at inventory.yaml:1:1 — add a 'hosts:' "
                     "list, at the top level or under a group"]),
    ("defaults: {user: ops}\n", ["the inventory defines no hosts at inventory.yaml:1:1 — add a "
                                 "'hosts:' list, at the top level or under a group"]),
    ("hosts:\n  - name: a\n    port: 22\n    port: 23\n",
     ["duplicate key 'port' at inventory.yaml:4:5 — first at inventory.yaml:3:5"]),
    ("hosts: [a]\nhosts: [b]\n",
     ["duplicate key 'hosts' at inventory.yaml:2:1 — first at inventory.yaml:1:1"]),
    ("hosts:\n  - {user: ops}\n",
     ["host has no 'name' at inventory.yaml:2:5 — every host mapping needs 'name:'"]),
    ("hosts:\n  - [a, b]\n", ["a host must be a name or a mapping, got a list at "
                              "inventory.yaml:2:5"]),
    ("hosts: {a: 1}\n", ["'hosts' must be a list of host names or mappings, got a mapping at "
                         "inventory.yaml:1:8"]),
    ("- a\n- b\n", ["the inventory must be a mapping, got a list at inventory.yaml:1:1"]),
    ("hosts:\n  - name: a\n    password: hunter2\n", [f"{PASSWORD} at inventory.yaml:3:5"]),
    ("defaults: {Passphrase: x}\nhosts: [a]\n", [f"{PASSWORD} at inventory.yaml:1:12"]),
    ("hosts:\n  - name: a\n    jump: 'ops:secret@bastion'\n",
     [f"{PASSWORD} at inventory.yaml:3:11"]),
    ("hosts:\n  - name: a\n    user: 'ops:secret'\n",
     [f"{PASSWORD} at inventory.yaml:3:11"]),
    ("hosts: [a]\nvault: {db: {password: x}}\n",
     ["unknown key 'vault' at inventory.yaml:2:1 — expected one of: defaults, groups, hosts",
      f"{PASSWORD} at inventory.yaml:2:14"]),
])
def test_each_problem_is_one_precise_line(tmp_path: Path, text: str,
                                          expected: list[str]) -> None:
    assert problems(tmp_path, text) == expected


def test_all_problems_are_reported_together_in_file_order(tmp_path: Path) -> None:
    got = problems(tmp_path, """
        groups:
          g:
            hosts:
              - name: b
                port: -1
        hosts:
          - name: a
            prot: 22
          - b
    """)
    assert got == [
        "'port' must be an integer from 1 to 65535, got -1 at inventory.yaml:5:15",
        "unknown key 'prot' at inventory.yaml:8:5 — did you mean 'port'?",
        "duplicate host 'b' at inventory.yaml:9:5 — first defined at inventory.yaml:4:15",
    ]


@pytest.mark.parametrize(("text", "expected"), [
    ("hosts:\n  - name: a\n   port: 22\n",
     "invalid YAML: expected <block end>, but found '<block mapping start>' at "
     "inventory.yaml:3:4 — while parsing a block collection from line 2"),
    ("hosts:\n  - name: a\n    port: 22: 23\n",
     "invalid YAML: mapping values are not allowed here at inventory.yaml:3:13"),
    ("hosts: [gpu[1-2]]\n", "invalid YAML: expected ',' or ']', but got '[' at "
                            "inventory.yaml:1:12 — while parsing a flow sequence from line 1; "
                            "inside [ ] quote host ranges: ['gpu[1-4]']"),
    ("hosts: [a\n", "invalid YAML: expected ',' or ']', but got '<stream end>' at "
                    "inventory.yaml:2:1 — while parsing a flow sequence from line 1"),
    ("hosts:\n\t- a\n", "invalid YAML: found character '\\t' that cannot start any token at "
                        "inventory.yaml:2:1 — while scanning for the next token"),
    ("hosts: [a]\nx: \x01\n", "invalid YAML: special characters are not allowed (character "
                              "'\\x01') at inventory.yaml:2:4"),
])
def test_yaml_syntax_errors_give_the_parsers_position(tmp_path: Path, text: str,
                                                     expected: str) -> None:
    assert problems(tmp_path, text) == [expected]


def test_unreadable_and_empty_files(tmp_path: Path) -> None:
    cases = {
        tmp_path / "missing.yaml": "cannot read the inventory at {p} — No such file or directory",
        tmp_path: "cannot read the inventory at {p} — Is a directory",
        write(tmp_path, "\n", "empty.yaml"):
            "the inventory defines no hosts at {p}:1:1 — the file is empty",
    }
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes(b"hosts: [caf\xe9]\n")
    cases[binary] = "the inventory is not UTF-8 text at {p} — byte 11 cannot be decoded"
    for path, message in cases.items():
        with pytest.raises(InventoryError) as err:
            load_inventory(path)
        assert str(err.value) == message.format(p=path)
        assert isinstance(err.value, ConfigError) and err.value.title == "Inventory error"


def test_problem_without_a_line_names_only_the_file() -> None:
    assert str(Problem("inv.yaml", 0, 0, None, "cannot read")) == "cannot read at inv.yaml"
    assert str(Problem("inv.yaml", 2, 3, "k", "bad", "fix")) == "bad at inv.yaml:2:3 — fix"


def test_simulated_hosts_without_a_seed_get_distinct_stable_ones(tmp_path: Path) -> None:
    """x-ok1, x-leak and x-xid once all ran ``--seed 0`` and showed identical numbers."""
    text = """
        defaults: {transport: local}
        hosts:
          - {name: x-ok1, simulate: healthy}
          - {name: x-leak, simulate: "leak:3"}
          - {name: x-xid, simulate: "xid79:6"}
          - {name: x-set, simulate: healthy, seed: 7}
          - {name: real}
    """
    hosts = {h.name: h for h in load_inventory(write(tmp_path, text)).hosts}
    seeds = [hosts[n].seed for n in ("x-ok1", "x-leak", "x-xid")]
    assert len(set(seeds)) == 3 and all(0 <= s < 2**31 for s in seeds)
    assert hosts["x-set"].seed == 7 and hosts["real"].seed == 0
    again = {h.name: h.seed for h in load_inventory(write(tmp_path, text, "b.yaml")).hosts}
    assert [again[n] for n in ("x-ok1", "x-leak", "x-xid")] == seeds  # the same every run
    # and the agents they start do show different numbers
    import asyncio

    from probes.transport.session import collect_once

    twins = [replace(hosts["x-ok1"], name=n, seed=inventory.name_seed(n))
             for n in ("x-ok1", "x-ok2")]
    watts = [sum(g.power_w or 0.0 for g in r.sample.gpus) if r.sample else None
             for r in [asyncio.run(collect_once(t)) for t in twins]]
    assert None not in watts and watts[0] != watts[1]
