"""What to do about each finding code, when the rule that raised it said nothing more precise.

Every finding says what to do: a rule, a detector or the Xid catalog writes its own action
(naming the GPU, the reason, the limit); where a finding is made from another one that may
have none (a log rule's hit, a topology verdict), its code's action here stands in.
``tests/analysis/test_actions.py`` walks every ``Code``, and every place in ``probes`` that builds a
``Finding`` must give it an action.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from probes.rules.parsers import iostat, smi_q_findings, topo
from probes.triage import Code

ACTION_GPU_LOST = smi_q_findings.ACTION_LOST
ACTION_UNRESPONSIVE = ("The GPU's probe call hung: read the kernel log for Xid 79/119/120 and "
                       "GSP timeouts on its bus id (dmesg -T | grep -i xid); if nvidia-smi hangs "
                       "on it too, drain the node and reset the GPU or reboot")
ACTION_THROTTLED = smi_q_findings.ACTION_THROTTLE_HW
ACTION_POWER_CAPPED = smi_q_findings.ACTION_THROTTLE_POWER
ACTION_LINK_WIDTH = smi_q_findings.ACTION_WIDTH
ACTION_LINK_GEN = smi_q_findings.ACTION_GEN
ACTION_NVLINK = ("Check the links with nvidia-smi nvlink -s and -e (error counters); reset the "
                 "GPU (nvidia-smi -r) at the next drain; RMA it, or check the NVSwitch/baseboard, "
                 "if links stay down: NCCL falls back to PCIe at a fraction of the bandwidth")
ACTION_ECC = smi_q_findings.ACTION_ECC
ACTION_REMAP_FAIL = smi_q_findings.ACTION_REMAP_FAIL
ACTION_PENDING = smi_q_findings.ACTION_PENDING
ACTION_SWAPPING = ("Find what pushed the host into swap (ps aux --sort=-rss; data-loader workers, "
                   "pinned-memory buffers, a second job); free memory or cut loader workers: "
                   "GPUs wait on every page swapped in")
ACTION_DISK = iostat.ACTION

_BASE: Mapping[str, str] = {
    # gpu
    Code.GPU_LOST: ACTION_GPU_LOST,
    Code.GPU_SENSOR_UNREADABLE: ("One sensor of this GPU cannot be read while the GPU answers: "
                                 "watch it; check the kernel log for Xid errors on its bus id, "
                                 "and the fan/power hardware if it persists"),
    Code.GPU_UNRESPONSIVE: ACTION_UNRESPONSIVE,
    Code.GPU_DROPOUT: ("A GPU left the bus and came back: read the kernel log for Xid 79 and "
                       "PCIe AER around that time; drain the node and reseat the GPU or check its "
                       "riser and power; RMA it if it recurs"),
    Code.CLOCKS_THROTTLED: ACTION_THROTTLED,
    Code.THROTTLED_WHILE_BUSY: ("Read the GPU's clock-event reasons (nvidia-smi -q -d "
                                "PERFORMANCE) and compare its clocks with the other GPUs under "
                                "the same load; check cooling and power delivery"),
    Code.TEMP_NEAR_SLOWDOWN: ("Check the GPU's cooling before it slows down: fans, inlet air, "
                              "dust, blocked airflow; compare with its neighbours"),
    Code.POWER_PINNED: ("The GPU's speed is set by its power limit: check the limit is the "
                        "board default (nvidia-smi -q -d POWER); restore it with nvidia-smi -pl "
                        "if it was lowered"),
    Code.PCIE_LINK_DOWNGRADED: ACTION_LINK_WIDTH,
    Code.LINK_DOWNGRADE_APPEARED: ("The link trained narrower or slower than before: watch the "
                                   "GPU for AER/Xid errors in the kernel log; reseat it or check "
                                   "its riser at the next drain"),
    Code.NVLINK_DOWN: ACTION_NVLINK,
    Code.ECC_UNCORRECTABLE: ACTION_ECC,
    Code.ECC_INCREASING: ("Watch the GPU's memory: a climbing error count often precedes "
                          "uncorrectable errors; drain it soon and RMA it if the count keeps "
                          "rising (nvidia-smi -q -d ECC)"),
    Code.ROW_REMAP_FAILURE: ACTION_REMAP_FAIL,
    Code.ROW_REMAP_PENDING: ACTION_PENDING,
    Code.REMAP_INCREASING: ("Reset the GPU when the job allows so pending remaps apply; RMA it "
                            "if remaps keep coming (nvidia-smi -q -d ROW_REMAPPER)"),
    Code.RETIRED_PAGES_PENDING: ACTION_PENDING,
    Code.MEMORY_LEAK: ("Find what keeps growing in the job (torch.cuda.memory_summary(), cached "
                       "tensors, a growing list of losses kept on the GPU); checkpoint before "
                       "it runs out"),
    Code.DISK_SATURATED: ACTION_DISK,
    Code.DATA_STARVATION: ("The GPUs wait for data: add data-loader workers and prefetch, move "
                           "the dataset to local NVMe, check the disk (iostat -x 1) and the "
                           "loader's CPU (top -H)"),
    Code.HOST_SWAPPING: ACTION_SWAPPING,
    Code.SWAP_ACTIVITY: ACTION_SWAPPING,
    Code.TOPOLOGY_CROSS_NUMA: topo.ACTION_NIC,
    Code.GPU_ALLOCATED_IDLE: ("Ask the job's owner whether it is hung or waiting (py-spy dump "
                              "on a rank); cancel it or release the GPUs"),
    Code.GPU_STRAY_PROCESS: ("Find who started it (ps -o user,lstart,cmd -p PID); stop it or "
                             "move it into a job"),
    Code.FLEET_DOWN: ("Many hosts at once is rarely the hosts: check this console's own network "
                      "and any jump host or bastion (ssh -v to one host), then power and the "
                      "rack's switch"),
    Code.METRIC_NOT_COLLECTED: ("Add the metrics to dcgm-exporter's counters CSV (-f) and "
                                "restart it; until then these checks cannot be made from "
                                "Prometheus"),
    # syslog
    Code.XID: ("Look the Xid up in NVIDIA's Xid catalog (the finding names it when known); read "
               "the lines around it in dmesg -T; drain and reset the GPU if it recurs"),
    Code.GPU_FALLEN_OFF_BUS: ("Drain the node and reboot it; reseat the GPU and check its riser "
                              "and power cables; RMA it if it falls off again"),
    Code.PCIE_AER: ("Read the AER lines around it (dmesg -T | grep -i aer); corrected errors "
                    "that keep coming or any fatal one: drain the node, reseat the GPU and check "
                    "its slot and riser"),
    Code.OOM_KILLER: ("The kernel killed a process for memory: read which one in dmesg -T; cut "
                      "host memory use (data-loader workers, pinned buffers) or move the job to "
                      "a host with more RAM"),
    Code.GSP_TIMEOUT: ("The GPU's GSP firmware stopped answering: drain the node and reset the "
                       "GPU or reboot; update the driver if it recurs (a known GSP issue)"),
    Code.CPU_THERMAL: ("A CPU is throttling on heat: check the host's fans and inlet air and the "
                       "BMC's sensor log (ipmitool sdr)"),
    Code.NVRM_API_MISMATCH: ("The NVIDIA kernel module and user-space driver differ (a driver "
                             "update without a reboot): reboot the host or reload the module"),
    Code.RM_INIT_ADAPTER_FAILED: ("The driver could not initialise a GPU: drain the node, read "
                                  "dmesg -T | grep -i nvrm, reboot; reseat or RMA the GPU if it "
                                  "stays missing"),
    Code.KERNEL_LOG_UNREADABLE: ("Read the kernel log by hand (sudo dmesg -T | grep -E "
                                 "'NVRM|AER|Out of memory') until the agent's user may read it"),
    # nccl
    Code.NCCL_TIMEOUT: ("Find the stalled rank: the one that never reached the collective; check "
                        "its GPU and kernel log first; set TORCH_NCCL_DUMP_ON_TIMEOUT=1 to see "
                        "where each rank waited"),
    Code.NCCL_NET_ERROR: ("Check the network the job used: ibstat / ibv_devinfo on both ends, "
                          "the switch port's error counters, NCCL_IB_HCA and NCCL_SOCKET_IFNAME"),
    Code.NCCL_ERROR: ("Read the NCCL WARN line and the lines before it (NCCL_DEBUG=INFO gives "
                      "more); check the GPU state and kernel log of the rank that reported it"),
    Code.RANK_FAILED: ("Check the failed rank's host first (GPU state, kernel log), then its "
                       "traceback: the other ranks' errors follow from it"),
    Code.NCCL_TESTS_WRONG: ("Treat it as a hardware fault until shown otherwise: rerun on half "
                            "the GPUs to find the one that corrupts data, then drain it"),
    Code.NCCL_BANDWIDTH_LOW: ("Check the links the run used: nvidia-smi topo -m and nvidia-smi "
                              "nvlink -s; NCCL_DEBUG=INFO shows which transport it chose"),
    # model
    Code.CUDA_OOM: ("The job ran out of GPU memory: lower the batch size or sequence length, "
                    "turn on activation checkpointing, or shard more (ZeRO/FSDP); read the "
                    "allocator's summary in the log"),
    Code.ILLEGAL_MEMORY_ACCESS: ("Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; check "
                                 "the GPU's Xid in the kernel log first (a hardware fault looks "
                                 "the same)"),
    Code.DEVICE_SIDE_ASSERT: ("Rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing op; an "
                              "index out of range (labels, embeddings) is the usual cause"),
    Code.LOSS_NAN: ("Find the first step with a NaN: lower the learning rate, check the data "
                    "batch at that step, use bf16 or a loss scaler"),
    Code.LOSS_SCALE_OVERFLOW: ("Occasional overflows are normal with fp16; many in a row mean "
                               "the loss diverges: lower the learning rate or use bf16"),
    Code.THROUGHPUT_DROP: ("See what changed beside the drop (throttling, a disk, another job); "
                           "if nothing did, look at the program: a new data shard, evaluation, "
                           "checkpointing"),

}


@functools.cache
def default_actions() -> Mapping[str, str]:
    """Each code's default action.  ``recovered`` has none: it marks an outage's end, it is
    not a condition to act on.  (Completed on first use: the reachability and watcher modules
    that hold the rest build findings themselves.)"""
    from probes.analysis import fabric_groups, host_clock, job_log_state, watcher
    from probes.analysis import reachability as reach
    from probes.analysis.detectors import spin
    from probes.rules import fabric
    from probes.rules.logrules import fabric_manager
    from probes.rules.parsers import dcgmi_diag

    return {**_BASE, **{
        Code.CLOCK_SKEW: host_clock.ACTION_CLOCK,
        Code.NVLINK_SLOW: fabric.ACTION_NVLINK_SLOW,
        Code.NVLINK_ERRORS: fabric.ACTION_NVLINK_ERRORS,
        Code.IB_PORT_DOWN: fabric.ACTION_PORT_DOWN,
        Code.IB_LINK_DEGRADED: fabric.ACTION_PORT_SLOW,
        Code.IB_ERRORS_RISING: fabric.ACTION_PORT_ERRORS,
        Code.SWITCH_SUSPECT: fabric_groups.ACTION_SWITCH,
        Code.RACK_SUSPECT: fabric_groups.ACTION_RACK,
        Code.DCGM_DIAG_FAIL: dcgmi_diag.ACTION_FAIL,
        Code.DCGM_DIAG_INCOMPLETE: dcgmi_diag.ACTION_INCOMPLETE,
        Code.FABRIC_MANAGER_ERROR: fabric_manager.ACTION_ERROR,
        Code.COLLECTIVE_HANG: spin.ACTION_HANG,
        Code.JOB_LOG_REFUSED: job_log_state.ACTION_JOB_LOG,
        Code.GPU_COUNT_SHORT: reach.ACTION_FEW_GPUS,
        Code.HOST_UNREACHABLE: reach.ACTION_UNREACHABLE,
        Code.HOST_AUTH_FAILED: reach.ACTION_AUTH,
        Code.HOST_KEY_CHANGED: reach.ACTION_KEY_CHANGED,
        Code.HOST_KEY_REFUSED: reach.ACTION_KEY_REFUSED,
        Code.AGENT_FAILED: reach.ACTION_AGENT,
        Code.HOST_DOWN: reach.ACTION_DOWN,
        Code.HOST_STALE: reach.ACTION_STALE,
        Code.HOST_FLAPPING: watcher.ACTION_FLAPPING,
        Code.COLLECTOR_STALLED: watcher.ACTION_COLLECTOR_STALLED,
        Code.COLLECTOR_DIED: watcher.ACTION_COLLECTOR_DIED,
        Code.SOURCE_DOWN: watcher.ACTION_SOURCE_DOWN,
        Code.SOURCE_SLOW: watcher.ACTION_SOURCE_SLOW,
    }}


WITHOUT_ACTION = frozenset({Code.RECOVERED})
"""Codes that are marks, not conditions."""
