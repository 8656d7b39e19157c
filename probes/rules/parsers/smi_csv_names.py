"""Field names and actions of the nvidia-smi CSV reader (``smi_csv``): data, kept apart."""

from __future__ import annotations

ALIASES = {"gpu_name": "name", "gpu_bus_id": "pci.bus_id", "gpu_uuid": "uuid",
            "gpu_serial": "serial", "used_gpu_memory": "used_memory"}
KNOWN_FIELDS = frozenset({
    "timestamp", "driver_version", "count", "name", "serial", "uuid", "index", "pstate",
    "vbios_version", "compute_mode", "compute_cap", "persistence_mode", "display_mode",
    "display_attached", "display_active", "addressing_mode", "hostname", "gpu_recovery_action",
    "edpp_multiplier", "pid", "process_name", "used_memory", "gpu_utilization",
    "mem_utilization", "max_memory_usage", "time", "is_running", "gpu_instance_id",
    "compute_instance_id", "pci.bus_id",
})
KNOWN_GROUPS = frozenset({
    "pci", "pcie", "clocks", "clocks_event_reasons", "clocks_event_reasons_counters", "memory",
    "utilization", "temperature", "power", "enforced", "module", "power_smoothing", "ecc",
    "retired_pages", "remapped_rows", "fan", "inforom", "encoder", "fbc", "mig", "gsp", "c2c",
    "fabric", "platform", "driver_model", "gom", "accounting", "vgpu_driver_capability",
    "vgpu_device_capability", "protected_memory", "reset_status", "dramencryption",
    "clocks_applications", "clocks_default_applications", "gpu_operation_mode",
})
"""First components of dotted nvidia-smi field names (``clocks_event_reasons.hw_slowdown``)."""

# Bit values of nvmlClocksEventReason* (the same bits as the older ThrottleReason names).
REASON_BITS = ((0x4, "sw_power_cap"), (0x8, "hw_slowdown"), (0x20, "sw_thermal_slowdown"),
                (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"))

ACTION_SENSOR = ("One sensor of this GPU cannot be read while the GPU answers: watch it; check "
                 "the kernel log for Xid errors on its bus id, and the fan/power hardware if "
                 "it persists")
ACTION_LOST = ("Check the kernel log for Xid 79 / 'fallen off the bus' and GSP timeouts on this "
               "GPU; drain the node, reset the GPU (nvidia-smi -r) or reboot; reseat or RMA it "
               "if it recurs")
ACTION_THROTTLE = ("Check cooling (inlet air, fans, heatsink), power delivery and the power "
                   "limit (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE) while it is loaded")
ACTION_WIDTH = "Reseat the card or check the riser/slot; compare lspci LnkCap and LnkSta"
ACTION_SPEED = ("Read the link again while the GPU is busy; one that stays below its capable "
                "generation under load needs a reseat or a BIOS/slot check")
ACTION_ECC = ("Drain the GPU; check nvidia-smi -q -d ECC,ROW_REMAPPER (PAGE_RETIREMENT on older "
              "GPUs) for pending remaps; reset the GPU to apply them, RMA if remapping failed")
ACTION_RETIRED = "Reload the driver or reset the GPU so the pending page retirement takes effect"
ACTION_REMAP = ("Row remapping failed (no spare rows left): drain the GPU and RMA it; "
                "nvidia-smi -q -d ROW_REMAPPER shows the histogram")
