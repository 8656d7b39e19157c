"""The version manifest: what it holds, files written 0600, and diffs of files and hosts."""

from __future__ import annotations

import asyncio
import copy
import json
import stat
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec
from probes.outputs.manifest import (
    IDENTITY_LEAVES,
    Change,
    ManifestError,
    diff,
    diff_documents,
    flatten,
    fleet_manifest,
    host_manifest,
    load_manifest,
    write_manifest,
)
from probes.transport.session import collect_once
from probes.wire.samples import Hello
from tui.cli import main


def _hello(*scenarios: str, name: str = "h1") -> Hello:
    result = asyncio.run(collect_once(HostSpec(name=name, simulate=scenarios, seed=3)))
    assert result.hello is not None, result.failure
    return result.hello


@pytest.fixture(scope="module")
def hellos() -> dict[str, Hello]:
    return {"gpu-a": _hello("healthy", name="gpu-a"), "gpu-b": _hello("driver-skew",
                                                                        name="gpu-b")}


def test_a_host_manifest_holds_the_version_list(hellos: dict[str, Hello]) -> None:
    m = host_manifest(hellos["gpu-a"])
    assert m["nvidia"] == {"driver": "550.90.07", "cuda_driver": "12.4",
                           "fabric_manager": "550.90.07"}
    assert m["software"]["nccl"] == "2.21.5" and m["software"]["torch"] == "2.4.0"
    assert len(m["gpus"]) == 8
    g = m["gpus"][0]
    assert g["vbios"] == "96.00.89.00.01" and g["serial"] and g["ecc_mode"] is True
    assert {d["name"] for d in m["disks"]} == {"nvme0n1", "nvme1n1", "sda"}
    assert len(m["nics"]) == 8 and m["nics"][0]["ports"][0]["rate"].startswith("400")


def test_flatten_names_every_leaf() -> None:
    flat = flatten({"a": {"b": 1}, "gpus": [{"vbios": "x"}, {"vbios": "y"}], "rt": ["d", "p"]})
    assert flat == {"a.b": 1, "gpus[0].vbios": "x", "gpus[1].vbios": "y", "rt": ["d", "p"]}


def test_two_hosts_differ_in_versions_not_in_identities(hellos: dict[str, Hello]) -> None:
    a, b = (host_manifest(hellos[n]) for n in ("gpu-a", "gpu-b"))
    keys = {c.key for c in diff(a, b, ignore_leaves=IDENTITY_LEAVES)}
    assert keys == {"nvidia.driver", "nvidia.cuda_driver", "nvidia.fabric_manager",
                    "software.nccl"}
    # over time on one host, a changed serial is the news
    swapped = copy.deepcopy(a)
    swapped["gpus"][3]["serial"] = "1650000000999"
    (change,) = diff(a, swapped)
    assert change.key == "gpus[3].serial"
    assert change.line() == f"~ gpus[3].serial: {a['gpus'][3]['serial']} → 1650000000999"


def test_files_round_trip_private(tmp_path: Path, hellos: dict[str, Hello]) -> None:
    doc = fleet_manifest(hellos, {"gpu-c": "connection refused"}, now=0.0)
    for fmt in ("yaml", "json"):
        path = tmp_path / f"m.{fmt}"
        write_manifest(doc, path, fmt)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        back = load_manifest(path)
        assert back["hosts"] == json.loads(json.dumps(doc["hosts"]))
        assert back["unreachable"] == {"gpu-c": "connection refused"}
        assert back["created"] == "1970-01-01T00:00:00Z"


def test_document_diff_sees_hosts_come_and_go(hellos: dict[str, Hello]) -> None:
    before = fleet_manifest({"gpu-a": hellos["gpu-a"]}, {})
    after = fleet_manifest({"gpu-a": hellos["gpu-a"], "gpu-b": hellos["gpu-b"]}, {})
    changes = diff_documents(before, after)
    assert list(changes) == ["gpu-b"]
    assert [c.line() for c in changes["gpu-b"]] == ["+ host: present"]
    assert diff_documents(after, before)["gpu-b"][0].line() == "- host: present"
    assert diff_documents(after, after) == {}


def test_bad_manifest_files_are_one_clear_line(tmp_path: Path) -> None:
    cases = {"notyaml.yaml": "a: [1,\n", "list.yaml": "- 1\n",
             "old.yaml": "version: 0\nhosts: {}\n"}
    messages = []
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ManifestError) as err:
            load_manifest(tmp_path / name)
        messages.append(err.value.msg)
    assert messages[0].startswith(f"{tmp_path / 'notyaml.yaml'}:2: not YAML or JSON")
    assert messages[1] == f"{tmp_path / 'list.yaml'}: not a rigwatch manifest (no 'hosts' mapping)"
    assert "manifest version 0; this rigwatch reads version 1" in messages[2]


def test_manifest_command_writes_and_diffs(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fleet.json"
    assert main(["manifest", "--demo", "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert len(doc["hosts"]) == 8 and stat.S_IMODE(out.stat().st_mode) == 0o600
    changed = copy.deepcopy(doc)
    changed["hosts"]["gpu-a01"]["nvidia"]["driver"] = "560.35.03"
    other = tmp_path / "later.json"
    other.write_text(json.dumps(changed))
    capsys.readouterr()
    assert main(["manifest", "--diff", str(out), str(other)]) == 1
    assert capsys.readouterr().out == "gpu-a01:\n  ~ nvidia.driver: 550.90.07 → 560.35.03\n"
    assert main(["manifest", "--diff", str(out), str(out)]) == 0
    assert main(["manifest", "--demo", "--diff", "gpu-a01", "gpu-b01"]) == 1
    assert "~ nvidia.driver: 550.90.07 → 535.183.01" in capsys.readouterr().out
    assert main(["manifest", "--demo", "--diff", "gpu-a01", "gpu-b04"]) == 1
    assert capsys.readouterr().out == "gpu-a01 → gpu-b04:\n  ~ memory: 2048 GiB → 768 GiB\n"
    assert main(["manifest", "--demo", "--diff", "gpu-a01", "nope"]) == 2
    assert "nope: neither a manifest file nor a host of the fleet" in capsys.readouterr().err


def test_change_lines() -> None:
    assert Change("k", 1, 2).line() == "~ k: 1 → 2"


def test_sizes_read_in_gib_and_mib_not_raw_numbers() -> None:
    assert Change("memory_bytes", 2199023255552, 824633720832).line() == \
        "~ memory: 2048 GiB → 768 GiB"
    assert Change("swap_bytes", 0, 8589934592).line() == "~ swap: 0 GiB → 8 GiB"
    (added,) = diff({"os": "x"}, {"os": "x", "disks": [{"size_bytes": 480103981056}]})
    assert added.line() == "+ disks[0].size: 447.1 GiB"
    assert Change("gpus[4].memory_mib", 81559.0, 81920.0).line() == \
        "~ gpus[4].memory: 81559 MiB → 81920 MiB"
    assert Change("memory_bytes", None, 2**30).line() == "~ memory: null → 1 GiB"
