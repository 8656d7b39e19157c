"""The inventory from outside: which file is used, ssh config, and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec, SshOptions
from probes.config.inventory import choose_inventory_path, default_inventory_path
from probes.config.ssh_config import resolve_ssh_config
from probes.errors import ConfigError
from tests.conftest import REPO
from tests.sources.test_inventory import write


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bare HOME, so the developer's ~/.ssh/config never leaks into a test."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


# ---- which file ------------------------------------------------------------------------

def test_default_path_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = Path(os.environ["XDG_CONFIG_HOME"])  # set per test by conftest
    default = xdg / "rigwatch" / "inventory.yaml"
    assert default_inventory_path() == default
    assert choose_inventory_path(None) is None  # no file: the console keeps its old behaviour
    default.parent.mkdir(parents=True)
    default.write_text("hosts: [a]\n")
    assert choose_inventory_path(None) == default
    assert choose_inventory_path("given.yaml") == Path("given.yaml")
    monkeypatch.setenv("RIGWATCH_INVENTORY", str(tmp_path / "x.yaml"))
    assert default_inventory_path() == tmp_path / "x.yaml"
    assert choose_inventory_path(None) == tmp_path / "x.yaml"  # named, so used even if missing
    assert choose_inventory_path("given.yaml") == Path("given.yaml")
    assert default_inventory_path({"RIGWATCH_INVENTORY": "~/inv.yaml"}) == \
        Path.home() / "inv.yaml"


# ---- ssh config ------------------------------------------------------------------------

SSH_CONFIG = """\
Host gpu*
  HostName %h.cluster.example
  User alice
  Port 2022
  ProxyJump bastion1,bastion2
  IdentityFile ~/.ssh/id_gpu
"""


def test_ssh_config_fills_only_what_the_inventory_leaves_unset(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(SSH_CONFIG)
    spec = HostSpec("gpu7", transport="ssh", ssh=SshOptions(ssh_config=True, port=22))
    o = resolve_ssh_config(spec, config)
    assert (o.address, o.user, o.port, o.jump, o.identity) == (
        "gpu7.cluster.example", "alice", 22, ("bastion1", "bastion2"), "~/.ssh/id_gpu")
    assert resolve_ssh_config(HostSpec("db1", ssh=SshOptions(ssh_config=True)), config) == \
        SshOptions(address="db1", ssh_config=True)
    off = HostSpec("gpu7", ssh=SshOptions())
    assert resolve_ssh_config(off, config) is off.ssh
    config.write_text("Host *\n  Port many\n")
    with pytest.raises(ConfigError, match="line 2: Invalid Port integer value: many"):
        resolve_ssh_config(spec, config)


# ---- the command line ------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_check_inventory_prints_the_expanded_hosts(tmp_path: Path, _home: Path) -> None:
    (_home / ".ssh" / "config").write_text(SSH_CONFIG)
    path = write(tmp_path, """
        defaults: {user: ops}
        groups:
          rack-a:
            jump: bastion.example
            hosts: ["gpu[1-2]"]
        hosts:
          - name: insecure
            address: 192.0.2.7
            port: 2200
            host_key_checking: off
          - {name: lab, transport: local, simulate: leak}
          - {name: gpu9, ssh_config: true, user: root}
    """)
    proc = cli("check-inventory", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "gpu1      address=gpu1 user=ops port=22 jump=bastion.example python=python3 "
        "tags=rack-a simulate=-",
        "gpu2      address=gpu2 user=ops port=22 jump=bastion.example python=python3 "
        "tags=rack-a simulate=-",
        "insecure  address=192.0.2.7 user=ops port=2200 jump=- python=python3 tags=- simulate=-",
        "lab       address=(local) user=- port=- jump=- python=(this python) tags=- "
        "simulate=leak",
        "gpu9      address=gpu9.cluster.example user=root port=2022 jump=bastion1,bastion2 "
        "python=python3 tags=- simulate=-",
    ]
    assert proc.stderr.splitlines() == [
        f"5 hosts in {path}",
        "rigwatch: WARNING: host key checking is OFF for insecure: these connections are not "
        "protected against interception"]


def test_check_inventory_unreadable_ssh_config_is_a_warning(tmp_path: Path, _home: Path) -> None:
    (_home / ".ssh" / "config").write_text("Host *\n  Port many\n")
    proc = cli("check-inventory", str(write(tmp_path, "hosts: [{name: a, ssh_config: true}]")))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("a  address=(from ssh config) user=(from ssh config) "
                           "port=(from ssh config) jump=- python=python3 tags=- simulate=-\n")
    assert "Invalid Port integer value: many; ssh-config values are not shown" in proc.stderr


def test_check_inventory_problems_exit_2_one_per_line(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts:\n  - name: a\n    adress: x\n    port: 0\n")
    proc = cli("check-inventory", str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"unknown key 'adress' at {path}:3:5 — did you mean 'address'?",
        f"'port' must be an integer from 1 to 65535, got 0 at {path}:4:11"]


@pytest.mark.parametrize("args", [("check-inventory",), ("snapshot", "--json"), ()])
def test_env_named_inventory_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        args: tuple[str, ...]) -> None:
    monkeypatch.setenv("RIGWATCH_INVENTORY", str(tmp_path / "nope.yaml"))
    proc = cli(*args)
    assert proc.returncode == 2
    assert proc.stderr == (f"cannot read the inventory at {tmp_path / 'nope.yaml'} — "
                           "No such file or directory\n")


def test_check_inventory_defaults_to_the_config_dir_file() -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "rigwatch" / "inventory.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("hosts: [only-one]\n")
    proc = cli("check-inventory")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "only-one"


def test_snapshot_reads_the_inventory_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, """
        defaults: {transport: local, simulate: healthy, tags: [lab]}
        hosts:
          - {name: sim-b, simulate: link-downgrade:2, seed: 2}
          - {name: sim-a, seed: 1}
    """)
    for args in (("snapshot", "--inventory", str(path)), ("--inventory", str(path), "snapshot")):
        proc = cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        hosts = json.loads(proc.stdout)["hosts"]
        assert [(h["name"], h["tags"], h["ok"]) for h in hosts] == [
            ("sim-b", ["lab"], True), ("sim-a", ["lab"], True)]
        assert {f["code"] for f in hosts[0]["findings"]} == {"pcie-link-downgraded"}


@pytest.mark.parametrize("args", [("--inventory", "{p}"), ("snapshot", "--inventory", "{p}")])
def test_console_and_snapshot_refuse_a_bad_inventory(tmp_path: Path,
                                                     args: tuple[str, ...]) -> None:
    path = write(tmp_path, "hosts:\n  - gpu[9-1]\n")
    proc = cli(*(a.format(p=path) for a in args))
    assert proc.returncode == 2
    assert proc.stderr == (f"empty range '9-1' in 'gpu[9-1]' (end before start) at "
                           f"{path}:2:5\n")


def test_demo_and_inventory_together_is_a_usage_error(tmp_path: Path) -> None:
    proc = cli("snapshot", "--demo", "--inventory", str(write(tmp_path, "hosts: [a]\n")))
    assert proc.returncode == 2
    assert "--demo and --inventory cannot be used together" in proc.stderr
