"""The inventory: host lists, layering of settings, and one precise error per problem."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from probes.fleet import HostKeyChecking
from probes.hostlist import HostlistError, expand_hostlist
from probes.inventory import InventoryError, default_inventory_path, load_inventory
from tests.conftest import REPO


def write(tmp_path: Path, text: str, name: str = "inventory.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, text))
    return [str(p).replace(str(tmp_path) + "/", "") for p in err.value.problems]


@pytest.mark.parametrize(("pattern", "names"), [
    ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
    ("gpu[001-002,010]", ["gpu001", "gpu002", "gpu010"]),
    ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("plain-host", ["plain-host"]),
])
def test_hostlist_expansion(pattern: str, names: list[str]) -> None:
    assert expand_hostlist(pattern) == names


@pytest.mark.parametrize(("pattern", "message"), [
    ("gpu[5-3]", "empty range '5-3'"),
    ("gpu[]", "empty range []"),
    ("gpu[1-", "unbalanced brackets"),
    ("gpu[a-b]", "malformed range item 'a-b'"),
    ("gpu[1-20000]", "has 20000 hosts (at most 10000)"),
    ("r[1-200]-n[1-200]", "expands to 40000 hosts"),
])
def test_hostlist_errors(pattern: str, message: str) -> None:
    with pytest.raises(HostlistError, match=re.escape(message)):
        expand_hostlist(pattern)


def test_huge_range_is_refused_before_expanding() -> None:
    t0 = time.monotonic()
    with pytest.raises(HostlistError):
        expand_hostlist("gpu[0-999999999]")
    assert time.monotonic() - t0 < 1.0


def test_defaults_groups_and_hosts_layer(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, """
        defaults:
          user: ops
          tags: [soak]
          interval: 2
          known_hosts: /etc/rigwatch/known_hosts
        groups:
          rack-a:
            jump: [ops@bastion.example:2222, inner.example]
            tags: [h100]
            expect_gpus: 8
            hosts:
              - gpu[01-02]
              - name: gpu-special
                address: 192.0.2.9
                port: 2200
                user: root
                host_key_checking: accept-new
        hosts:
          - name: lab
            transport: local
            simulate: leak:3, throttle
            logs: /var/log/train/*.log
    """))
    names = [h.name for h in inv.hosts]
    assert names == ["gpu01", "gpu02", "gpu-special", "lab"]
    g1, _, special, lab = inv.hosts
    assert g1.ssh.user == "ops" and g1.ssh.address is None and g1.ssh.port is None
    assert g1.ssh.jump == ("ops@bastion.example:2222", "inner.example")
    assert g1.tags == ("soak", "rack-a", "h100")
    assert g1.interval_s == 2.0 and g1.expect_gpus == 8 and g1.python == "python3"
    assert g1.ssh.known_hosts == "/etc/rigwatch/known_hosts"
    assert g1.ssh.host_key_checking is HostKeyChecking.STRICT
    assert (special.ssh.address, special.ssh.port, special.ssh.user) == ("192.0.2.9", 2200,
                                                                         "root")
    assert special.ssh.host_key_checking is HostKeyChecking.ACCEPT_NEW
    assert lab.transport == "local" and lab.python is None
    assert lab.simulate == ("leak:3", "throttle")
    assert lab.logs == ("/var/log/train/*.log",)
    assert lab.tags == ("soak",) and lab.expect_gpus is None
    assert "--tail" in lab.agent_args() and "/var/log/train/*.log" in lab.agent_args()


@pytest.mark.parametrize(("text", "expected"), [
    ("hosts:\n  - name: a\n    adress: 10.0.0.1\n",
     ["unknown key 'adress' at inventory.yaml:3:5 — did you mean 'address'?"]),
    ("defaults:\n  usr: ops\nhosts: [a]\n",
     ["unknown key 'usr' at inventory.yaml:2:3 — did you mean 'user'?"]),
    ("host:\n  - a\n", ["unknown key 'host' at inventory.yaml:1:1 — did you mean 'hosts'?"]),
    ("hosts:\n  - name: a\n    port: ssh\n",
     ["inventory.yaml:3:11: port: expected an integer, got 'ssh'"]),
    ("hosts:\n  - name: a\n    port: 70000\n",
     ["inventory.yaml:3:11: port: expected 1-65535, got 70000"]),
    ("hosts:\n  - name: a\n    tags: {x: 1}\n",
     ["inventory.yaml:3:11: tags: expected a string or a list of strings"]),
    ("hosts:\n  - name: a\n    interval: 0\n",
     ["inventory.yaml:3:15: interval: expected > 0, got 0"]),
    ("hosts:\n  - a\n  - b\n  - a\n",
     ["inventory.yaml:4:5: name: duplicate host 'a' (first at line 2)"]),
    ("groups:\n  g:\n    hosts:\n      - n[1-3]\nhosts: [n2]\n",
     ["inventory.yaml:5:9: name: duplicate host 'n2' (first at line 4)"]),
    ("hosts:\n  - gpu[5-3]\n",
     ["inventory.yaml:2:5: name: empty range '5-3' (end before start)"]),
    ("hosts:\n  - gpu[1-20000]\n",
     ["inventory.yaml:2:5: name: range '1-20000' has 20000 hosts (at most 10000)"]),
    ("hosts:\n  - name: a\n    host_key_checking: maybe\n",
     ["inventory.yaml:3:24: host_key_checking: expected strict, accept-new or off, got 'maybe'"]),
    ("hosts:\n  - name: a\n    simulate: leek\n",
     ["inventory.yaml:3:15: simulate: unknown scenario 'leek' (known: healthy, leak, throttle, "
      "xid79, nccl-timeout, disk-saturated, link-downgrade; form NAME[:GPU][@SECONDS])"]),
    ("hosts:\n  - name: a\n    password: hunter2\n",
     ["inventory.yaml:3:5: password: passwords are not accepted in the inventory; use the ssh "
      "agent or a key file"]),
    ("hosts:\n  - name: a\n    port: 22\n    port: 23\n",
     ["inventory.yaml:4:5: port: duplicate key (first at line 3)"]),
    ("hosts:\n  - name: gpu[1-2]\n    address: 192.0.2.1\n",
     ["inventory.yaml:2:11: address: a host range cannot share one address"]),
    ("groups:\n  g:\n    user: ops\n", ["inventory.yaml:3:5: hosts: group g lists no hosts"]),
    ("hosts: []\n", ["inventory.yaml:1:1: the inventory lists no hosts"]),
    ("hosts:\n  - name: a\n   port: 22\n", None),
    ("hosts:\n  - {user: ops}\n", ["inventory.yaml:2:5: name: every host needs a name"]),
])
def test_each_problem_is_one_precise_line(tmp_path: Path, text: str,
                                          expected: list[str] | None) -> None:
    got = problems(tmp_path, text)
    if expected is None:  # a YAML syntax error: position and the parser's word for it
        assert len(got) == 1 and got[0].startswith("inventory.yaml:3:") and "YAML syntax" in got[0]
    else:
        assert got == expected


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    got = problems(tmp_path, "hosts:\n  - name: a\n    prot: 22\n  - name: b\n    port: -1\n")
    assert len(got) == 2
    assert "did you mean 'port'" in got[0] and "port: expected 1-65535" in got[1]


def test_unreadable_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="cannot read"):
        load_inventory(tmp_path / "missing.yaml")
    with pytest.raises(InventoryError, match="the inventory is empty"):
        load_inventory(write(tmp_path, "\n"))


def test_default_path_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIGWATCH_INVENTORY", raising=False)
    xdg = Path(os.environ["XDG_CONFIG_HOME"])  # set per test by conftest
    assert default_inventory_path() == xdg / "rigwatch" / "inventory.yaml"
    monkeypatch.setenv("RIGWATCH_INVENTORY", str(tmp_path / "x.yaml"))
    assert default_inventory_path() == tmp_path / "x.yaml"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_check_inventory_prints_the_expanded_hosts(tmp_path: Path) -> None:
    path = write(tmp_path, """
        defaults: {user: ops}
        groups:
          rack-a:
            jump: bastion.example
            hosts:
              - gpu[1-3]
        hosts:
          - name: insecure
            address: 192.0.2.7
            host_key_checking: "off"
    """)
    proc = cli("check-inventory", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["gpu1", "gpu2", "gpu3", "insecure"]
    assert "ops@gpu1 via bastion.example" in lines[0]
    assert "4 hosts" in proc.stderr
    assert "WARNING: host key checking is OFF for insecure" in proc.stderr


def test_check_inventory_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts:\n  - name: a\n    adress: x\n")
    proc = cli("check-inventory", str(path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"unknown key 'adress' at {path}:3:5 — did you mean "
                                   "'address'?")
    assert "Traceback" not in proc.stderr


def test_console_refuses_a_bad_inventory_with_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts:\n  - gpu[9-1]\n")
    proc = cli("--inventory", str(path))
    assert proc.returncode == 2
    assert "empty range '9-1'" in proc.stderr
