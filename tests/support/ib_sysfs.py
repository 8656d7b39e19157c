"""A host's ``/sys/class/infiniband`` as a fixture tree, stepped over time in tests.

Laid out as the kernel documents it (Documentation/ABI/stable/sysfs-class-infiniband:
``<hca>/ports/<n>/{state,phys_state,rate,link_layer,counters/*}``, ``node_guid``,
``hca_type``, ``device`` -> the PCI function) and as mlx5 shows it, with ``hw_counters/``.
The values are shaped after a real 8-HCA HGX H100 (leptonai/gpud
``components/accelerator/nvidia/infiniband/class/testdata/sys-class-infiniband-h100.0``:
``4: ACTIVE``, ``5: LinkUp``, ``400 Gb/sec (4X NDR)``, ``MT4129``, 64-bit data counters
in the 10**14 range), with the GUIDs and PCI addresses changed.
"""

from __future__ import annotations

import os
from pathlib import Path

STATES = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT", "ARMED": "3: ARMED"}
PHYS = {"LinkUp": "5: LinkUp", "Disabled": "3: Disabled", "Polling": "2: Polling"}
RATES = {400: "400 Gb/sec (4X NDR)", 200: "200 Gb/sec (4X HDR)", 100: "100 Gb/sec (4X EDR)",
         40: "40 Gb/sec (4X QDR)"}
COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
            "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
            "port_xmit_discards", "port_xmit_constraint_errors", "port_rcv_constraint_errors",
            "local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped",
            "port_xmit_wait", "port_rcv_data", "port_xmit_data", "port_rcv_packets",
            "port_xmit_packets", "unicast_rcv_packets", "unicast_xmit_packets")
HW_COUNTERS = ("local_ack_timeout_err", "packet_seq_err", "out_of_sequence",
               "rnr_nak_retry_err", "implied_nak_seq_err", "req_cqe_error", "resp_cqe_error",
               "rx_icrc_encapsulated", "out_of_buffer", "duplicate_request", "lifespan")


class IbTree:
    """An ``--sys-root`` with ``n`` HCAs beside ``n`` GPUs (one PCIe switch each, four per
    socket), every port Active at ``rate``; ``set_*`` step it."""

    def __init__(self, root: Path, n: int = 8, rate: int = 400, layer: str = "InfiniBand",
                 gpus: list[str] | None = None):
        """``gpus``: the bus ids of the GPUs beside each HCA (default ``0000:12:00.0`` …;
        the fake NVML's are ``0000:18:00.0`` … ``0000:1b:00.0``)."""
        self.root = root
        self.gpus = gpus or [f"0000:{0x12 + i * 0x10:02x}:00.0" for i in range(n)]
        self.hcas = [f"mlx5_{i}" for i in range(n)]
        top = root / "devices"
        bus = root / "bus" / "pci" / "devices"
        bus.mkdir(parents=True, exist_ok=True)
        for i, hca in enumerate(self.hcas):
            socket = i // 4
            switch = top / f"pci0000:{socket * 0x80:02x}" / f"0000:{socket * 0x80:02x}:01.{i % 4}" \
                / f"0000:{0x10 + i * 0x10:02x}:00.0"
            gpu = switch / f"0000:{0x11 + i * 0x10:02x}:00.0" / self.gpus[i]
            nic = switch / f"0000:{0x11 + i * 0x10:02x}:01.0" / f"0000:{0x13 + i * 0x10:02x}:00.0"
            for fn in (gpu, nic):
                fn.mkdir(parents=True, exist_ok=True)
                (fn / "numa_node").write_text(f"{socket}\n")
                link = bus / fn.name
                if not link.exists():
                    link.symlink_to(fn)
            base = root / "class" / "infiniband" / hca
            base.mkdir(parents=True, exist_ok=True)
            if not (base / "device").exists():
                (base / "device").symlink_to(os.path.relpath(nic, base))
            _put(base / "node_guid", f"a088:c203:00ad:{0xeab8 + i:04x}")
            _put(base / "hca_type", "MT4129")
            _put(base / "fw_ver", "28.39.1002")
            port = base / "ports" / "1"
            _put(port / "link_layer", layer)
            for name in COUNTERS:
                _put(port / "counters" / name, "0")
            for name in HW_COUNTERS:
                _put(port / "hw_counters" / name, "0")
            self.set_counter(hca, "port_rcv_data", 230539874932483 + i)
            self.set_counter(hca, "port_xmit_data", 231292590293003 + i)
            self.set_state(hca, "ACTIVE", "LinkUp", rate)

    def port(self, hca: str) -> Path:
        return self.root / "class" / "infiniband" / hca / "ports" / "1"

    def set_state(self, hca: str, state: str, phys: str, rate: int | None = None) -> None:
        _put(self.port(hca) / "state", STATES[state])
        _put(self.port(hca) / "phys_state", PHYS[phys])
        if rate is not None:
            _put(self.port(hca) / "rate", RATES[rate])

    def set_counter(self, hca: str, name: str, value: int) -> None:
        sub = "counters" if name in COUNTERS else "hw_counters"
        _put(self.port(hca) / sub / name, str(value))

    def counter(self, hca: str, name: str) -> int:
        sub = "counters" if name in COUNTERS else "hw_counters"
        return int((self.port(hca) / sub / name).read_text())

    def add(self, hca: str, name: str, by: int) -> None:
        self.set_counter(hca, name, self.counter(hca, name) + by)


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
