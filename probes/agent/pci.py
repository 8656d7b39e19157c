"""sysfs: each GPU's PCIe chain up to the root port, NICs, NUMA nodes, block devices, datasets."""

from __future__ import annotations

import functools
import os
import re

from .commands import read_text
from .values import normalise_bus_id, parse_int
from .watchdog import GpuWatchdog

_BDF_NAME = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _sys_value(path):
    text = read_text(path)
    return text.strip() if text is not None else None


def link_speed_gts(text):
    """'16.0 GT/s PCIe' -> 16.0; 'Unknown' or absent -> None."""
    m = re.match(r"^\s*([\d.]+)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


def numa_of(path):
    value = parse_int(_sys_value(os.path.join(path, "numa_node")))
    return value if value is not None and value >= 0 else None


def pci_link(path):
    """One PCI function's link from sysfs: what it trained at and what it can do."""
    return {
        "address": normalise_bus_id(os.path.basename(path)),
        "speed_gts": link_speed_gts(_sys_value(os.path.join(path, "current_link_speed"))),
        "width": parse_int(_sys_value(os.path.join(path, "current_link_width"))),
        "max_speed_gts": link_speed_gts(_sys_value(os.path.join(path, "max_link_speed"))),
        "max_width": parse_int(_sys_value(os.path.join(path, "max_link_width"))),
        "numa_node": numa_of(path),
        "local_cpulist": _sys_value(os.path.join(path, "local_cpulist")),
    }


def pci_chain(sys_root, bus_id):
    """The GPU's link and those of the bridges above it, GPU first, up to the root port."""
    if not bus_id:
        return []
    start = os.path.join(sys_root, "bus", "pci", "devices", bus_id)
    if not os.path.exists(start):
        return []
    path = os.path.realpath(start)
    chain = []
    while _BDF_NAME.match(os.path.basename(path)) and len(chain) < 16:
        chain.append(pci_link(path))
        path = os.path.dirname(path)
    return chain


def pci_device_of(sys_root, class_dir):
    """A /sys/class/<x>/<dev> entry's PCI function path, or None for virtual devices."""
    dev = os.path.join(class_dir, "device")
    if not os.path.exists(dev):
        return None
    path = os.path.realpath(dev)
    return path if _BDF_NAME.match(os.path.basename(path)) else None


def pci_bridges(pci_path):
    """The PCI bridges above a device, nearest first (which GPU shares its switch)."""
    parts = pci_path.split(os.sep)[:-1] if pci_path else []
    return [normalise_bus_id(p) for p in reversed(parts) if _BDF_NAME.match(p)]


def list_dir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_nics(sys_root):
    """InfiniBand HCAs (ports, state, rate) and physical network interfaces, with NUMA."""
    nics = []
    ib_root = os.path.join(sys_root, "class", "infiniband")
    for name in list_dir(ib_root):
        base = os.path.join(ib_root, name)
        pci = pci_device_of(sys_root, base)
        ports = []
        for port in list_dir(os.path.join(base, "ports")):
            p = os.path.join(base, "ports", port)
            ports.append({"port": parse_int(port), "state": _sys_value(os.path.join(p, "state")),
                          "rate": _sys_value(os.path.join(p, "rate")),
                          "link_layer": _sys_value(os.path.join(p, "link_layer")),
                          "phys_state": _sys_value(os.path.join(p, "phys_state"))})
        nics.append({"name": name, "kind": "infiniband",
                     "address": normalise_bus_id(os.path.basename(pci)) if pci else None,
                     "numa_node": numa_of(pci) if pci else None, "ports": ports,
                     "node_guid": _sys_value(os.path.join(base, "node_guid")),
                     "hca_type": _sys_value(os.path.join(base, "hca_type")),
                     "bridges": pci_bridges(pci)})
    net_root = os.path.join(sys_root, "class", "net")
    for name in list_dir(net_root):
        base = os.path.join(net_root, name)
        pci = pci_device_of(sys_root, base)
        if pci is None:
            continue
        nics.append({"name": name, "kind": "net",
                     "address": normalise_bus_id(os.path.basename(pci)),
                     "numa_node": numa_of(pci),
                     "state": _sys_value(os.path.join(base, "operstate")),
                     "speed_mbps": parse_int(_sys_value(os.path.join(base, "speed")))})
    return nics[:64]


def numa_nodes(sys_root):
    names = list_dir(os.path.join(sys_root, "devices", "system", "node"))
    count = len([n for n in names if re.match(r"^node\d+$", n)])
    return count or None


def block_device_of(sys_root, path):
    """The whole disk (as /proc/diskstats names it) that holds ``path``; None if unknown."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    link = os.path.join(sys_root, "dev", "block", "%d:%d" % (os.major(dev), os.minor(dev)))
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


MAX_BLOCK_DEVICES = 64
_BLOCK_SKIP = ("loop", "ram", "zram", "fd", "sr", "dm-", "nbd")
_TRANSPORT_PARTS = (("ata", "sata"), ("usb", "usb"), ("end_device-", "sas"),
                    ("session", "iscsi"), ("virtio", "virtio"))


def disk_transport(name, real):
    """How a disk is attached: from its name, else from where sysfs places it (an
    ``ata1`` parent is SATA, ``end_device-*`` SAS, …); None when sysfs does not say."""
    if name.startswith("nvme"):
        return "nvme"
    if name.startswith("vd"):
        return "virtio"
    if name.startswith("xvd"):
        return "xen"
    for part in real.split(os.sep):
        for prefix, kind in _TRANSPORT_PARTS:
            if part.startswith(prefix) and (prefix.endswith("-") or part[len(prefix):].isdigit()):
                return kind
    return None


def read_block_devices(sys_root):
    """Whole disks from /sys/block with size, kind and model.  Loop, RAM, floppy, optical,
    network-block and device-mapper devices are left out (a dm volume sits on disks that
    are listed), and so is a device of size 0 (nothing attached)."""
    base = os.path.join(sys_root, "block")
    out = []
    for name in list_dir(base):
        if name.startswith(_BLOCK_SKIP):
            continue
        path = os.path.join(base, name)
        sectors = parse_int(_sys_value(os.path.join(path, "size")))
        if sectors == 0:
            continue
        rotational = _sys_value(os.path.join(path, "queue", "rotational"))
        model = " ".join((_sys_value(os.path.join(path, "device", "model")) or "").split())
        out.append({"name": name,
                    "size_bytes": sectors * 512 if sectors is not None else None,
                    "rotational": {"0": False, "1": True}.get(rotational),
                    "model": model or None,
                    "transport": disk_transport(name, os.path.realpath(path))})
        if len(out) >= MAX_BLOCK_DEVICES:
            break
    return out


DATASET_TIMEOUT_S = 3.0


def dataset_facts(sys_root, path):
    """A --dataset path: the disk under it and the space left on its file system."""
    free = total = None
    try:
        st = os.statvfs(path)
        free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    except OSError:
        pass
    return {"path": path, "device": block_device_of(sys_root, path), "free_bytes": free,
            "total_bytes": total}


def datasets_facts(sys_root, paths, timeout=DATASET_TIMEOUT_S):
    """dataset_facts of each path, in parallel with a deadline: stat on a hung NFS or
    Lustre mount never returns, and it must not hold up the hello."""
    done = GpuWatchdog(timeout).call_many(
        [(i, functools.partial(dataset_facts, sys_root, p)) for i, p in enumerate(paths)])
    return [done[i][1] if done[i][0] else {"path": p, "device": None, "free_bytes": None,
                                           "total_bytes": None} for i, p in enumerate(paths)]
