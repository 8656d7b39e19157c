"""The version manifest: every host's hardware and software as one document, and its diff.

Ops keep this list for expansion and migration ("which hosts still run driver 535?"), so
it holds what identifies a part (models, serials, VBIOS, firmware-level versions) and
nothing that changes by the second.  The diff works on flattened keys
(``gpus[3].vbios``) so a change reads the same whether it is between two days of one host
or between two hosts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from probes.errors import ConfigError
from probes.outputs.private_file import private_file
from probes.wire.samples import Hello

MANIFEST_VERSION = 1


class ManifestError(ConfigError):
    """A manifest file that cannot be read or written."""

    title = "Manifest error"


def host_manifest(hello: Hello) -> dict[str, Any]:
    """One host's manifest from its agent's hello."""
    f = hello.facts
    sw = f.software
    return {
        "hostname": f.hostname,
        "os": f.os_name,
        "kernel": f.kernel,
        "python": f.python,
        "agent": hello.agent_version,
        "cpu": {"model": f.cpu_model, "cores_physical": f.cpu_cores_physical,
                "cores_logical": f.cpu_cores_logical, "numa_nodes": f.numa_nodes},
        "memory_bytes": f.mem_total_bytes,
        "swap_bytes": f.swap_total_bytes,
        "nvidia": {"driver": f.driver_version, "cuda_driver": f.cuda_version,
                   "fabric_manager": sw.fabric_manager},
        "software": {"nvcc": sw.nvcc, "cuda_runtime": sw.cuda_runtime, "nccl": sw.nccl,
                     "torch": sw.torch, "container_runtimes": list(sw.container_runtimes)},
        "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid, "serial": g.serial,
                  "vbios": g.vbios, "bus_id": g.bus_id, "memory_mib": g.mem_total_mib,
                  "pcie_gen_max": g.pcie_gen_max_gpu, "persistence_mode": g.persistence_mode,
                  "ecc_mode": g.ecc_mode, "mig_mode": g.mig_mode,
                  "power_limit_default_w": g.power_limit_default_w} for g in f.gpus],
        "nics": [{"name": n.name, "kind": n.kind, "address": n.address,
                  "numa_node": n.numa_node, "speed_mbps": n.speed_mbps,
                  "ports": [{"port": p.port, "rate": p.rate, "link_layer": p.link_layer}
                            for p in n.ports]} for n in hello.nics],
        "disks": [{"name": d.name, "model": d.model, "size_bytes": d.size_bytes,
                   "transport": d.transport, "rotational": d.rotational}
                  for d in f.block_devices],
    }


def fleet_manifest(hellos: Mapping[str, Hello], unreachable: Mapping[str, str],
                   now: float | None = None) -> dict[str, Any]:
    """The whole document: hosts by fleet name, and the ones that did not answer (with why)."""
    return {"version": MANIFEST_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                     time.gmtime(time.time() if now is None else now)),
            "hosts": {name: host_manifest(h) for name, h in sorted(hellos.items())},
            "unreachable": dict(sorted(unreachable.items()))}


def dump(doc: Mapping[str, Any], fmt: str) -> str:
    """YAML (block style, keys in manifest order) or JSON text of a manifest."""
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False,
                          allow_unicode=True)


def write_manifest(doc: Mapping[str, Any], path: Path, fmt: str) -> None:
    """Write with mode 0600: serials and addresses are an inventory of the data centre.

    A new file renamed over ``path`` (``private_file``): a symlink there is replaced, never
    followed.
    """
    text = dump(doc, fmt)
    try:
        with private_file(path) as out:
            out.write(text)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot write the manifest: {exc.strerror}") from exc


def load_manifest(path: Path) -> dict[str, Any]:
    """A manifest written by ``rigwatch manifest`` (YAML or JSON: JSON is YAML)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise ManifestError(f"{path}: not a text file") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ManifestError(f"{path}{where}: not YAML or JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), dict):
        raise ManifestError(f"{path}: not a rigwatch manifest (no 'hosts' mapping)")
    if doc.get("version") != MANIFEST_VERSION:
        raise ManifestError(f"{path}: manifest version {doc.get('version')!r}; this rigwatch "
                            f"reads version {MANIFEST_VERSION}")
    return doc


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"gpus[0].vbios": "96.00…", "nvidia.driver": "550…"}``; GPUs keyed by position."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


@dataclass(frozen=True)
class Change:
    """One difference: a key whose value is not the same on both sides."""

    key: str
    before: Any
    after: Any

    def line(self) -> str:
        """``- key: before`` / ``+ key: after`` in one line, as ``diff`` would hint it;
        sizes read in the unit people buy them in (``~ memory: 2048 GiB → 768 GiB``)."""
        key, unit = _unit(self.key)
        if self.before is _MISSING:
            return f"+ {key}: {_show(self.after, unit)}"
        if self.after is _MISSING:
            return f"- {key}: {_show(self.before, unit)}"
        return f"~ {key}: {_show(self.before, unit)} → {_show(self.after, unit)}"


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


_MISSING: Any = _Missing()
IDENTITY_LEAVES = frozenset({"hostname", "uuid", "serial"})
"""Left out when two different hosts are compared: their names and serials always differ;
over time, on one host, a changed serial is exactly what to see (a swapped card)."""


UNITS = {"_bytes": ("GiB", 1024**3), "_mib": ("MiB", 1)}
"""Key suffixes of sizes, the unit each is shown in and its size in the stored unit."""


def _unit(key: str) -> tuple[str, tuple[str, int] | None]:
    """The key as shown (``memory_bytes`` reads ``memory``) and the unit of its values."""
    for suffix, unit in UNITS.items():
        if key.endswith(suffix):
            return key.removesuffix(suffix), unit
    return key, None


def _show(v: Any, unit: tuple[str, int] | None = None) -> str:
    if unit is not None and isinstance(v, int | float) and not isinstance(v, bool):
        name, size = unit
        return f"{v / size:.1f}".removesuffix(".0") + f" {name}"
    return json.dumps(v) if not isinstance(v, str) else v


def diff(a: Mapping[str, Any], b: Mapping[str, Any],
         ignore_leaves: frozenset[str] = frozenset()) -> list[Change]:
    """What differs between two host manifests, by flattened key, in ``b``'s key order;
    keys whose last part is in ``ignore_leaves`` are not compared."""
    fa, fb = flatten(dict(a)), flatten(dict(b))
    out = []
    for key in [*fb, *(k for k in fa if k not in fb)]:
        if key.rsplit(".", 1)[-1] in ignore_leaves:
            continue
        before, after = fa.get(key, _MISSING), fb.get(key, _MISSING)
        if before != after:
            out.append(Change(key, before, after))
    return out


def diff_documents(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[Change]]:
    """Per host present on both sides, its changes; hosts on one side only are one change."""
    ha, hb = a.get("hosts", {}), b.get("hosts", {})
    out: dict[str, list[Change]] = {}
    for name in sorted(set(ha) | set(hb)):
        if name not in hb:
            out[name] = [Change("host", "present", _MISSING)]
        elif name not in ha:
            out[name] = [Change("host", _MISSING, "present")]
        else:
            changes = diff(ha[name], hb[name])
            if changes:
                out[name] = changes
    return out
