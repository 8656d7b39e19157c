"""Real output shapes `rigwatch explain` used to misread (issue #24), each with its source.

Inputs are shaped after the public threads named beside them (values changed); the check is
the contract's answer (`tests/fixtures/EXPLAIN-CONTRACT.md`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from probes.rules.busid import normalize_bus_id
from probes.rules.logrules.lines import peel


def explain(tmp_path: Path, text: str, name: str = "pasted.txt") -> dict:
    path = tmp_path / name
    path.write_text(text)
    out = subprocess.run([sys.executable, "-m", "tui.cli", "explain", "--json", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1, 2), out.stderr
    return json.loads(out.stdout)


def codes(report: dict) -> list[str]:
    return [f["code"] for f in report["findings"]]


# --- 1. a watchdog that reports a CUDA error is not a timeout --------------------------------

# vllm-project/vllm#28028 (torch 2.8 prefixes), #17098, vllm#4108 (Ray worker prefix),
# axolotl-ai-cloud/axolotl#1473 (tqdm bar glued in front of the rank prefix).
WATCHDOG_CUDA = {
    "torch-2.8": (
        "[rank1]:[E1103 23:14:03.342459398 ProcessGroupNCCL.cpp:2068] [PG ID 4 PG GUID 19 Rank 1]"
        " Process group watchdog thread terminated with exception: CUDA error: an illegal memory"
        " access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n", 1),
    "vllm-worker": (
        "(VllmWorker rank=2 pid=225) ERROR 06-26 23:10:17 [multiproc_executor.py:527] WorkerProc"
        " hit an exception.\n"
        "(VllmWorker rank=2 pid=225) ERROR 06-26 23:10:17 [multiproc_executor.py:527] "
        "Process group watchdog thread terminated with exception: CUDA error: an illegal memory "
        "access was encountered\n", 2),
    "ray-worker": (
        "(RayWorkerVllm pid=7046) [rank3]:[E ProcessGroupNCCL.cpp:1182] [Rank 3] NCCL watchdog "
        "thread terminated with exception: CUDA error: an illegal memory access was encountered\n"
        "(RayWorkerVllm pid=7046) frame #5: c10d::ProcessGroupNCCL::workCleanupLoop() + 0x250 "
        "(0x7f4da9f49910 in /usr/local/lib/python3.10/dist-packages/torch/lib/"
        "libtorch_cuda.so)\n", 3),
    "tqdm-glued": (
        " 94%|█████████▍| 837/888 [9:42:50<34:08, 40.17s/it][rank7]:[E ProcessGroupNCCL.cpp:1182]"
        " [Rank 7] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory "
        "access was encountered\n", 7),
}


@pytest.mark.parametrize("shape", sorted(WATCHDOG_CUDA))
def test_a_watchdog_reporting_a_cuda_error_is_an_illegal_memory_access(
        tmp_path: Path, shape: str) -> None:
    text, rank = WATCHDOG_CUDA[shape]
    report = explain(tmp_path, text)
    assert "nccl-timeout" not in codes(report), report["findings"]
    (ima,) = [f for f in report["findings"] if f["code"] == "illegal-memory-access"]
    assert ima["step"] == "model" and ima["severity"] == "critical"
    assert ima.get("ranks") == [rank], ima


def test_a_watchdog_that_reports_a_timeout_still_is_one(tmp_path: Path) -> None:
    """pytorch/pytorch#99113's shape: the watchdog's own timeout, and a hung heartbeat."""
    report = explain(tmp_path, (
        "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Process group watchdog thread "
        "terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1207, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
        "for 600085 milliseconds before timing out.\n"
        "[rank4]:[E1205 03:12:44.106 ProcessGroupNCCL.cpp:1411] [PG 0 Rank 4] Heartbeat monitor "
        "timed out! Process will be terminated after dumping debug info.\n"))
    assert codes(report).count("nccl-timeout") >= 1
    assert "illegal-memory-access" not in codes(report)


@pytest.mark.parametrize(("line", "message", "host", "rank", "time"), [
    ("(VllmWorker rank=2 pid=225) ERROR 06-26 23:10:17 [multiproc_executor.py:527] boom",
     "boom", None, 2, "06-26 23:10:17"),
    ("(VllmWorkerProcess pid=9812) INFO 09-03 19:10:35 config.py:813] hello",
     "hello", None, None, "09-03 19:10:35"),
    ("(RayWorkerWrapper pid=4411, ip=10.0.0.3) [rank5]:[E626 23:10:17.4 "
     "ProcessGroupNCCL.cpp:1592] x", "[E626 23:10:17.4 ProcessGroupNCCL.cpp:1592] x",
     "10.0.0.3", 5, None),
    ("[default3]:[rank3]:[W ProcessGroupNCCL.cpp:1] y", "[W ProcessGroupNCCL.cpp:1] y",
     None, 3, None),
    ("[default0]:gpu-a01:2201:2201 [0] NCCL INFO Bootstrap", "gpu-a01:2201:2201 [0] NCCL INFO "
     "Bootstrap", None, 0, None),
])
def test_worker_prefixes_are_peeled_like_srun_labels(
        line: str, message: str, host: str | None, rank: int | None, time: str | None) -> None:
    """vLLM's worker and logger prefixes (vllm-project/vllm#17098, #8177), Ray's (vllm#4108),
    torchrun --tee's ``[default3]:`` with the local rank (pytorch/pytorch#75087)."""
    assert peel(line) == (message, host, rank, time)


# --- 5. bus ids with a non-zero 32-bit domain ---------------------------------------------

@pytest.mark.parametrize(("raw", "linux"), [
    ("00000000:3B:00.0", "0000:3b:00.0"),
    ("0000000F:01:00.0", "000f:01:00.0"),   # the contract's examples (issue #24)
    ("00008ED0:00:00.0", "8ed0:00:00.0"),   # an Azure V100 (Azure/azhpc-diagnostics#77)
    ("0001:02:00.0", "0001:02:00.0"),
    ("4e:00.0", "0000:4e:00.0"),
])
def test_bus_ids_read_as_linux_prints_them(raw: str, linux: str) -> None:
    assert normalize_bus_id(raw) == linux


def test_a_wide_domain_in_a_kernel_xid_joins_with_lspci(tmp_path: Path) -> None:
    report = explain(tmp_path, (
        "[ 5.1] NVRM: Xid (PCI:00008ED0:00:00): 79, pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.\n"), name="dmesg.txt")
    (xid,) = [f for f in report["findings"] if f["code"].startswith("xid")]
    assert xid["gpu"] == "8ed0:00:00.0"


# --- 2. nvidia-smi -q with host-level blocks before the GPUs ------------------------------

# harvester/harvester#11133 (driver 595, H100 NVL on a vGPU host): a host block with
# indented keys and "CUDA Version : Not Found" sit between the header and the first GPU.
SMI_Q_HOST_BLOCKS = """
==============NVSMI LOG==============

Timestamp                                              : Tue Jul 14 11:19:43 2026
Driver Version                                         : 595.71.03
CUDA Version                                           : Not Found
vGPU Driver Capability
        Heterogenous Multi-vGPU                        : Supported

Attached GPUs                                          : 2
GPU 00000000:A1:00.0
    Product Name                                       : NVIDIA H100 NVL
    Product Brand                                      : NVIDIA
    Persistence Mode                                   : Enabled
    vGPU Device Capability
        Fractional Multi-vGPU                          : Supported
        Heterogeneous Time-Slice Profiles              : Supported
    FB Memory Usage
        Total                                          : 95830 MiB
        Reserved                                       : 652 MiB
        Used                                           : 0 MiB
        Free                                           : 95179 MiB
    Performance State                                  : P0
    Clocks Event Reasons
        Idle                                           : Active
        SW Power Cap                                   : Not Active
        HW Slowdown                                    : Not Active
    Temperature
        GPU Current Temp                               : 33 C

GPU 00000001:04:00.0
    Product Name                                       : NVIDIA H100 NVL
    FB Memory Usage
        Total                                          : 95830 MiB
        Used                                           : 1 MiB
    Performance State                                  : P0
    Clocks Event Reasons
        Idle                                           : Not Active
        SW Power Cap                                   : Not Active
        HW Slowdown                                    : Not Active
            HW Thermal Slowdown                        : Not Active
            HW Power Brake Slowdown                    : Not Active
        SW Thermal Slowdown                            : Not Active
    Clocks Event Reasons Counters
        SW Power Capping                               : 1041990 us
        HW Thermal Slowdown                            : 0 us
"""


def test_host_level_blocks_before_the_gpus_are_not_gpus(tmp_path: Path) -> None:
    report = explain(tmp_path, SMI_Q_HOST_BLOCKS)
    (inp,) = report["inputs"]
    assert inp["kind"] == "nvidia-smi-q"
    parsed = inp["parsed"]
    assert parsed["driver_version"] == "595.71.03" and parsed["cuda_version"] is None
    assert parsed["attached_gpus"] == 2
    assert [g["bus_id"] for g in parsed["gpus"]] == ["0000:a1:00.0", "0001:04:00.0"]
    first, second = parsed["gpus"]
    assert first["name"] == "NVIDIA H100 NVL" and first["fb_total_mib"] == 95830
    assert first["clock_event_reasons_active"] == ["Idle"]
    # every reason "Not Active" (the counters section below is no reason): an empty list
    assert second["clock_event_reasons_active"] == []
    assert [f for f in report["findings"] if f["code"] == "gpu-lost"] == []


def test_a_d_memory_performance_excerpt_parses_like_the_others(tmp_path: Path) -> None:
    """`nvidia-smi -q -d MEMORY,PERFORMANCE` (driver 580 layout, as in NVIDIA's nvidia-smi
    documentation): one GPU, reasons all Not Active → []."""
    text = SMI_Q_HOST_BLOCKS.split("GPU 00000001:04:00.0")[1]
    report = explain(tmp_path, "\n==============NVSMI LOG==============\n\n"
                     "Timestamp                                 : Wed Nov 19 08:41:02 2025\n"
                     "Driver Version                            : 580.95.05\n"
                     "CUDA Version                              : 13.0\n\n"
                     "Attached GPUs                             : 1\n"
                     "GPU 00000000:18:00.0" + text)
    (gpu,) = report["inputs"][0]["parsed"]["gpus"]
    assert gpu["bus_id"] == "0000:18:00.0" and gpu["fb_used_mib"] == 1
    assert gpu["clock_event_reasons_active"] == [] and gpu["pstate"] == "P0"


# --- 3. topo -m matrices as people paste them -----------------------------------------------

def _topo(tmp_path: Path, text: str) -> dict:
    report = explain(tmp_path, text)
    (inp,) = report["inputs"]
    assert inp["kind"] == "topo", inp
    return inp["parsed"]


# NVIDIA/nccl#2157 (18 NICs: "NIC11   NIC12  NIC13" with two spaces in one place, the
# rows' cells likewise); here a copy also ran "NIC12" and "NIC13" together.
TOPO_RAN_TOGETHER = (
    "        GPU0    GPU1    NIC0    NIC1    NIC2    NIC3    NIC4    NIC5    NIC6    NIC7    "
    "NIC8    NIC9    NIC10   NIC11   NIC12NIC13    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
    "GPU0     X      NV12    SYS     SYS     SYS     SYS     SYS     PXB     PXB     PXB     "
    "PXB     SYS     SYS     SYS     SYS    SYS      48-63,176-191   3               N/A\n"
    "GPU1    NV12     X      SYS     PXB     PXB     PXB     PXB     SYS     SYS     SYS     "
    "SYS     SYS     SYS     SYS     SYS    SYS      16-31,144-159   1               N/A\n")


def test_column_names_that_ran_together_are_two_columns(tmp_path: Path) -> None:
    parsed = _topo(tmp_path, TOPO_RAN_TOGETHER)
    assert parsed["nics"] == [f"NIC{i}" for i in range(14)]
    assert parsed["links"]["GPU0"]["NIC13"] == "SYS"
    assert parsed["links"]["GPU1"]["NIC4"] == "PXB"
    assert parsed["cpu_affinity"] == {"GPU0": "48-63,176-191", "GPU1": "16-31,144-159"}
    assert parsed["numa_affinity"] == {"GPU0": "3", "GPU1": "1"}


def test_a_header_that_lost_a_name_never_puts_a_link_in_the_affinity(tmp_path: Path) -> None:
    text = TOPO_RAN_TOGETHER.replace("NIC12NIC13", "NIC12")  # one name lost in the copy
    parsed = _topo(tmp_path, text)
    assert parsed["cpu_affinity"]["GPU0"] == "48-63,176-191"
    assert parsed["numa_affinity"]["GPU1"] == "1"


def test_escape_codes_around_header_cells(tmp_path: Path) -> None:
    """A terminal that underlines the header (NVIDIA/go-gpuallocator#17's TAB layout)."""
    u = "\x1b[4m{}\x1b[0m".format
    head = "\t".join(["", u("GPU0"), u("GPU1"), u("NIC0"), u("CPU Affinity"), u("NUMA Affinity"),
                      u("GPU NUMA ID")])
    parsed = _topo(tmp_path, head + "\n"
                   "GPU0\t X \tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
                   "GPU1\tSYS\t X \tPHB\t56-111,168-223\t1\t\tN/A\n"
                   "NIC0\tSYS\tPHB\t X \n")
    assert parsed["gpus"] == ["GPU0", "GPU1"] and parsed["nics"] == ["NIC0"]
    assert parsed["cpu_affinity"] == {"GPU0": "0-55,112-167", "GPU1": "56-111,168-223"}
    assert parsed["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}
    assert parsed["links"]["GPU1"]["NIC0"] == "PHB"


def test_a_single_gpu_matrix(tmp_path: Path) -> None:
    parsed = _topo(tmp_path, "        GPU0    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
                             "GPU0     X      0-31    0               N/A\n\n"
                             "Legend:\n\n  X    = Self\n")
    assert parsed["gpus"] == ["GPU0"] and parsed["links"] == {"GPU0": {"GPU0": "X"}}
    assert parsed["cpu_affinity"] == {"GPU0": "0-31"} and parsed["numa_affinity"] == {"GPU0": "0"}


# --- 4. ERR! in one sensor cell is not a lost GPU ---------------------------------------------

# Azure/azhpc-diagnostics#77 (a V100 PCIe reading "ERR! / 250W", everything else readable) and
# NVIDIA/open-gpu-kernel-modules#1193 (the fan cell ERR!), in the 550 table layout; GPU 2 is
# the whole-GPU case, every cell ERR!.
SMI_TABLE_ERR = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-PCIE-40GB          On  |   00000000:17:00.0 Off |                    0 |
| N/A   34C    P0            ERR! / 250W  |   39125MiB /  40960MiB |     97%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA A100-PCIE-40GB          On  |   00000000:65:00.0 Off |                    0 |
| ERR!  36C    P0             63W / 250W  |   39125MiB /  40960MiB |     98%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   2  ERR!                           On  |   00000000:CA:00.0 Off |                 ERR! |
|ERR!  ERR!   ERR!             ERR! / ERR! |   ERR!   /  40960MiB |    ERR!      Default |
|                                         |                        |                 ERR! |
+-----------------------------------------+------------------------+----------------------+
"""


def test_one_err_cell_is_a_sensor_warning_and_a_dead_gpu_is_lost(tmp_path: Path) -> None:
    report = explain(tmp_path, SMI_TABLE_ERR)
    assert report["inputs"][0]["kind"] == "nvidia-smi-table"
    by_gpu = {(f["code"], f["gpu"]): f for f in report["findings"]}
    assert ("gpu-lost", "0000:17:00.0") not in by_gpu
    assert ("gpu-lost", "0000:65:00.0") not in by_gpu
    power = by_gpu[("gpu-sensor-unreadable", "0000:17:00.0")]
    assert power["severity"] == "warning" and power["step"] == "gpu"
    assert "power_w" in power["summary"]
    assert by_gpu[("gpu-sensor-unreadable", "0000:65:00.0")]["severity"] == "warning"
    assert by_gpu[("gpu-lost", "0000:ca:00.0")]["severity"] == "critical"


def test_one_unknown_error_cell_in_csv_is_a_sensor_warning(tmp_path: Path) -> None:
    """`--query-gpu` CSV with one cell [Unknown Error] (tutulino/Megaminer#376's fan.speed,
    Quake4/MindMiner#627's power.default_limit) and a row where everything but the ids is."""
    report = explain(tmp_path, (
        "index, pci.bus_id, temperature.gpu, utilization.gpu [%], memory.used [MiB], "
        "power.draw [W]\n"
        "0, 00000000:17:00.0, 34, 97 %, 39125 MiB, [Unknown Error]\n"
        "1, 00000000:CA:00.0, [Unknown Error], [Unknown Error], [Unknown Error], "
        "[Unknown Error]\n"))
    by_gpu = {(f["code"], f["gpu"]): f for f in report["findings"]}
    assert ("gpu-lost", "0000:17:00.0") not in by_gpu
    assert by_gpu[("gpu-sensor-unreadable", "0000:17:00.0")]["severity"] == "warning"
    assert by_gpu[("gpu-lost", "0000:ca:00.0")]["severity"] == "critical"


# --- 6. pasted CSV with notes between blocks ----------------------------------------------

# Two runs of the same --query-gpu … --format=csv,noheader,nounits (the form
# netdata/netdata#10362 settled on) with a comment, a sentence with a comma and a second
# command line whose start was cut off in the copy between them (as issue #24 describes).
CSV_WITH_NOTES = (
    "$ nvidia-smi --query-gpu=index,pci.bus_id,temperature.gpu,utilization.gpu,memory.used,"
    "power.draw --format=csv,noheader,nounits\n") + """\
0, 00000000:18:00.0, 33, 0, 1, 70.10
1, 00000000:2A:00.0, 35, 0, 1, 71.32
# after starting the job, a minute later:
gpu=memory.total,memory.used,temperature.gpu --format=csv,noheader,nounits
then, after the warm-up:
0, 00000000:18:00.0, 61, 100, 64231, 512.44
1, 00000000:2A:00.0, 63, 99, 64231, 498.01
"""


def test_notes_between_csv_blocks_are_not_rows_and_both_blocks_are(tmp_path: Path) -> None:
    report = explain(tmp_path, CSV_WITH_NOTES)
    (inp,) = report["inputs"]
    assert inp["kind"] == "nvidia-smi-csv"
    rows = inp["parsed"]["rows"]
    assert rows == [[0, "00000000:18:00.0", 33, 0, 1, 70.1],
                    [1, "00000000:2A:00.0", 35, 0, 1, 71.32],
                    [0, "00000000:18:00.0", 61, 100, 64231, 512.44],
                    [1, "00000000:2A:00.0", 63, 99, 64231, 498.01]]


# --- 7. lspci: a header glued after prose starts a device; a quoted LnkSta is not one -------

# Shaped after geerlingguy/raspberry-pi-pcie-devices#480 (a card's lspci -vv with
# "LnkSta: Speed 5GT/s (downgraded), Width x1 (downgraded)") and open-mpi/hwloc#653 (an A100's
# header with its class code), pasted the way issue comments lose a newline.
GLUED_HEADER = (
    "here is my card under load 62:00.0 VGA compatible controller [0300]: NVIDIA Corporation "
    "GA102 [GeForce RTX 3090] [10de:2204] (rev a1) (prog-if 00 [VGA controller])\n"
    "\tSubsystem: NVIDIA Corporation Device [10de:147d]\n"
    "\tNUMA node: 0\n"
    "\tCapabilities: [78] Express (v2) Legacy Endpoint, MSI 00\n"
    "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <1us\n"
    "\t\tLnkSta:\tSpeed 16GT/s (ok), Width x8 (downgraded)\n"
)

# Shaped after janhq/jan#183: a comment that quotes a LnkSta line in its prose, then the
# device's own lspci -vv block.
QUOTED_LNKSTA = (
    "My LnkSta: Speed 2.5GT/s (downgraded), Width x16 (ok) was what I saw yesterday; after "
    "a reboot:\n"
    "01:00.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] (rev a1)\n"
    "\tCapabilities: [68] Express (v2) Endpoint, MSI 00\n"
    "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
    "\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)\n"
)


def test_a_device_header_glued_after_prose_starts_the_device(tmp_path: Path) -> None:
    report = explain(tmp_path, GLUED_HEADER)
    devices = report["inputs"][0]["parsed"]["devices"]
    assert report["inputs"][0]["kind"] == "lspci"
    assert [d["address"] for d in devices] == ["0000:62:00.0"]
    assert devices[0]["sta_width"] == 8 and devices[0]["numa_node"] == 0
    found = [f for f in report["findings"] if f["code"] == "pcie-link-downgraded"]
    assert len(found) == 1 and found[0]["gpu"] == "0000:62:00.0"
    assert found[0]["line"] == 6


def test_a_lnksta_quoted_in_a_sentence_is_not_a_link_state(tmp_path: Path) -> None:
    report = explain(tmp_path, QUOTED_LNKSTA)
    devices = report["inputs"][0]["parsed"]["devices"]
    assert [d.get("address") for d in devices] == ["0000:01:00.0"]
    assert devices[0]["downgraded"] is False
    assert "pcie-link-downgraded" not in codes(report)
