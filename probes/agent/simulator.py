"""A simulated 8x H100 host whose trouble follows its scenarios (``--simulate``).

It is one HostSource beside RealHost, and the only module a real host's agent is sent
without: the bundle stays smaller and a real host cannot be told to make things up.
"""

from __future__ import annotations

import math
import platform
import random
import re
import time

from .kernel_log import QuietLog
from .source import HostSource, register_simulator

SIM_BUS_IDS = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
               "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0")
SIM_MEM_TOTAL = 81559.0
SIM_SM_MAX = 1980.0
SIM_POWER_LIMIT = 700.0
SIM_SCENARIOS = ("healthy", "leak", "throttle", "xid79", "nccl-timeout", "disk-saturated",
                 "link-downgrade", "low-ram", "driver-skew", "train", "no-environ",
                 "ib-port-down")
"""``no-environ``: the GPU processes are listed without their job (an agent that may not read
another user's /proc/PID/environ): where they run must come from the job's log."""
SIM_DEFAULT_GPU = {"leak": 3, "throttle": 5, "xid79": 6, "link-downgrade": 2, "ib-port-down": 3}
SIM_DEFAULT_AT = {"xid79": 300.0, "nccl-timeout": 600.0, "ib-port-down": 300.0}
SIM_NCCL_TIMEOUT_S = 600.0
"""``nccl-timeout``'s watchdog timeout (torch's default): its GPUs spin this long before."""
LEAK_MIB_PER_H = 600.0
SIM_STARVE_PERIOD_S = 150.0
"""``disk-saturated``: the GPUs wait on the loader for 40 % of every 150 s.  Not 120 s: the
demo samples every 60 simulated seconds (1 s at ×60), and 120 is a multiple of 60, so every
sample fell in the busy part and the starvation the demo promises never showed; 150 s puts
two of every five samples in the wait at any speed."""
THROTTLE_TAU_S = 600.0
SIM_MEM_BYTES = 2 * 1024 ** 4
SIM_LOW_RAM_BYTES = 768 * 1024 ** 3
"""``low-ram``: 1.2x the GPUs' 637 GiB, under the 1.5x a preflight asks for."""
SIM_SOFTWARE = {"nvcc": "12.4.131", "nccl": "2.21.5", "torch": "2.4.0",
                "cuda_runtime": "12.4.127", "fabric_manager": "550.90.07",
                "container_runtimes": ["docker", "nvidia-container-cli"]}
SIM_SKEW = {"driver_version": "535.183.01", "cuda_version": "12.2",
            "fabric_manager": "535.183.01", "nccl": "2.18.3"}
"""``driver-skew``: an older driver stack than the rest of a simulated fleet."""
SIM_BLOCK_DEVICES = (
    {"name": "nvme0n1", "size_bytes": 3840755982336, "rotational": False,
     "model": "SAMSUNG MZQL23T8HCLS-00A07", "transport": "nvme"},
    {"name": "nvme1n1", "size_bytes": 3840755982336, "rotational": False,
     "model": "SAMSUNG MZQL23T8HCLS-00A07", "transport": "nvme"},
    {"name": "sda", "size_bytes": 480103981056, "rotational": False,
     "model": "SAMSUNG MZ7L3480HCHQ-00A07", "transport": "sata"},
)


def _throttle_temp(t):
    """``throttle``: the GPU's temperature climbing towards 90.5 °C (no noise)."""
    return 62.0 + 28.5 * (1.0 - math.exp(-t / THROTTLE_TAU_S))


def _throttle_clock(temp):
    """The SM clock a GPU at ``temp`` throttles to (from 85 °C)."""
    return max(1100.0, SIM_SM_MAX - (temp - 84.0) * 110.0)


def parse_scenarios(text):
    """'leak:3,xid79:6@120' -> [{'name': 'leak', 'gpu': 3, 'at': None}, ...]."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = re.match(r"^([a-z0-9-]+)(?::(\d+))?(?:@(\d+(?:\.\d+)?))?$", item)
        if not m or m.group(1) not in SIM_SCENARIOS:
            raise ValueError("unknown scenario %r (known: %s; form NAME[:GPU][@SECONDS])"
                             % (item, ", ".join(SIM_SCENARIOS)))
        name = m.group(1)
        gpu = int(m.group(2)) if m.group(2) else SIM_DEFAULT_GPU.get(name)
        if gpu is not None and not 0 <= gpu < len(SIM_BUS_IDS):
            raise ValueError("scenario %r: GPU index must be 0-%d" % (item, len(SIM_BUS_IDS) - 1))
        at = float(m.group(3)) if m.group(3) else SIM_DEFAULT_AT.get(name)
        out.append({"name": name, "gpu": gpu, "at": at})
    return out or [{"name": "healthy", "gpu": None, "at": None}]


def sim_topo_text():
    """``nvidia-smi topo -m`` of an HGX H100 with one NDR HCA per GPU."""
    n = 8
    head = ["GPU%d" % i for i in range(n)] + ["NIC%d" % i for i in range(n)]
    lines = ["\t" + "\t".join(head) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]

    def path(a, b):
        if a == b:
            return "X"
        return "NODE" if (a < 4) == (b < 4) else "SYS"

    for i in range(n):
        cells = ["X" if i == j else "NV18" for j in range(n)]
        cells += ["PIX" if i == j else path(i, j) for j in range(n)]
        aff = "0-55,112-167\t0" if i < 4 else "56-111,168-223\t1"
        lines.append("GPU%d\t" % i + "\t".join(cells) + "\t" + aff + "\t\tN/A")
    for i in range(n):
        cells = ["PIX" if i == j else path(i, j) for j in range(n)]
        cells += [path(i, j) for j in range(n)]
        lines.append("NIC%d\t" % i + "\t".join(cells))
    lines += ["", "Legend:", "", "  X    = Self",
              "  SYS  = Connection traversing PCIe as well as the SMP interconnect between "
              "NUMA nodes (e.g., QPI/UPI)",
              "  NODE = Connection traversing PCIe as well as the interconnect between PCIe "
              "Host Bridges within a NUMA node",
              "  PIX  = Connection traversing at most a single PCIe bridge",
              "  NV#  = Connection traversing a bonded set of # NVLinks", "", "NIC Legend:", ""]
    lines += ["  NIC%d: mlx5_%d" % (i, i) for i in range(n)]
    return "\n".join(lines) + "\n"


TRAIN_LOG = "job:/var/log/train/rank0.log"
"""``train``: where the simulated job's log lives on the host."""
TRAIN_EVERY_S = 60.0
"""A progress line per simulated minute (one per demo tick)."""
TRAIN_TPS_PER_GPU = 3900.0
"""Tokens/s per H100 of the simulated job (an 8B model under FSDP) at full clocks."""
def _stamp(ts):
    """Python logging's ``2026-12-04 03:14:07,123`` for epoch ``ts`` (a simulated host's
    zone is UTC: its hello says so)."""
    return "%s,%03d" % (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)),
                        int(ts * 1000) % 1000)


def _glog(ts):
    """torch/c10's glog stamp ``1202 03:14:07.123456`` for epoch ``ts`` (UTC)."""
    return "%s.%06d" % (time.strftime("%m%d %H:%M:%S", time.gmtime(ts)),
                        int(ts * 1e6) % 1000000)


def sim_nccl_tests_lines(hosts, bus_ids, gpus_per_host, peak_busbw):
    """``all_reduce_perf -b 1M -e 8G -f 2`` output as nccl-tests prints it (src/util.cu)."""
    n = len(hosts) * gpus_per_host
    out = ["# nccl-tests version 2.13.11 nccl-headers=22105 nccl-library=22105",
           "# Collective test starting: all_reduce_perf",
           "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8589934592 step: 2(factor) warmup "
           "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for h, host in enumerate(hosts):
        for d in range(gpus_per_host):
            b = bus_ids[d]
            out.append("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s:%s:%s] "
                       "NVIDIA H100 80GB HBM3" % (h * gpus_per_host + d, 41000 + d, host, d,
                                                  b[0:4], b[5:7], b[8:10]))
    out += ["#", "#                                                              out-of-place"
            "                       in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw "
            "#wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
            "            (us)  (GB/s)  (GB/s)       "]
    total = 0.0
    rows = 0
    size = 1 << 20
    while size <= 8 << 30:
        busbw = peak_busbw * size / (size + 48.0 * (1 << 20))
        algbw = busbw * n / (2.0 * (n - 1))
        us = size / algbw / 1e3
        cells = ("%.1f" % us if us < 1e5 else "%.0f" % us, "%.2f" % algbw, "%.2f" % busbw)
        out.append("%12d  %12d  %8s  %6s  %6s  %7s  %6s  %6s  %6d  %7s  %6s  %6s  %6d"
                   % (size, size // 4, "float", "sum", -1, cells[0], cells[1], cells[2], 0,
                      cells[0], cells[1], cells[2], 0))
        total += busbw
        rows += 1
        size *= 2
    out += ["# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : %g " % round(total / rows, 4),
            "#", "# Collective test concluded: all_reduce_perf"]
    return out


class TrainJob:
    """``train``: the host's job log — an nccl-tests check, then torchtitan's progress lines.

    The job runs at its slowest GPU's pace (``pace``: 1.0 at full clocks), as synchronous
    data-parallel training does, so a throttling GPU slows every line after it.
    """

    def __init__(self, hostnames, bus_ids, gpus_per_host=8, tps_per_gpu=TRAIN_TPS_PER_GPU,
                 peak_busbw=480.0, mem_gib=61.02, seed=0):
        self.hosts = list(hostnames)
        self.bus_ids = bus_ids
        self.gpus = gpus_per_host
        self.world = gpus_per_host * len(self.hosts)
        self.tps = tps_per_gpu
        self.busbw = peak_busbw
        self.mem = mem_gib
        self.rng = random.Random("train-%d" % seed)
        self.next_at = None
        self.step = 0
        self.start = 0.0
        """Epoch of the run's simulated second 0 (its stamps are ``start + t``)."""

    def lines(self, t, pace=1.0):
        """The lines the job printed since the last call, up to simulated time ``t``."""
        out = []
        if self.next_at is None:
            out.append("[rank0]:[titan] %s - root - INFO - Starting job: llama3_8b, world "
                       "size: %d" % (_stamp(self.start + t), self.world))
            if self.world > 1:
                out += sim_nccl_tests_lines(self.hosts, self.bus_ids, self.gpus, self.busbw)
            self.next_at = t
        while t >= self.next_at:
            self.step += 10
            tps = self.tps * pace * (1.0 + self.rng.uniform(-0.015, 0.015))
            out.append("[rank0]:[titan] %s - root - INFO - step: %d  loss: %7.4f  memory: "
                       "%.2fGiB(%.2f%%)  tps: {:,}  tflops: %.2f  mfu: %.2f%%".format(int(tps))
                       % (_stamp(self.start + self.next_at), self.step,
                          2.1 + 8.0 / (1 + self.step / 200.0),
                          self.mem, 100.0 * self.mem / 79.19, tps * 0.0977, tps * 0.00988))
            self.next_at += TRAIN_EVERY_S
        return out


@register_simulator
class Simulator(HostSource):
    """A realistic 8x H100 host whose trouble follows its scenarios; deterministic per seed.

    Time is simulated: ``t`` drives every reading, a sample's ``ts`` is the run's start
    plus ``t`` (so a leak reads in simulated MiB/h), and no sample waits for counters.
    """

    SCENARIOS = SIM_SCENARIOS
    parse_scenarios = staticmethod(parse_scenarios)

    def __init__(self, scenarios, seed, hostname):
        self.scen = scenarios
        self.names = set(s["name"] for s in scenarios)
        self.seed = seed
        self.rng = random.Random(seed)
        self.hostname = hostname or "sim-%d" % seed
        self.job = str(48200 + seed)
        """Each simulated host runs one 8-rank Slurm job step on bare metal."""
        ids = random.Random("uuid-%d" % seed)
        self.uuids = ["GPU-%08x-%04x-%04x-%04x-%012x" % (
            ids.getrandbits(32), ids.getrandbits(16), ids.getrandbits(16),
            ids.getrandbits(16), ids.getrandbits(48)) for _ in SIM_BUS_IDS]
        self.base_mem = [60000.0 + 512.0 * ((seed * 7 + i * 3) % 9) for i in range(8)]
        serials = random.Random("serial-%d" % seed).getrandbits(24)
        self.serials = ["1654%09d" % ((serials * 8 + i) % 10 ** 9) for i in range(8)]
        self.mem_bytes = SIM_LOW_RAM_BYTES if "low-ram" in self.names else SIM_MEM_BYTES
        self.fired = set()
        self.start = 0.0
        """Epoch of the run's simulated second 0 (set by ``timestamp``)."""
        self.train = TrainJob([self.hostname], SIM_BUS_IDS, seed=seed) \
            if "train" in self.names else None

    @classmethod
    def from_args(cls, args):
        return cls(parse_scenarios(args.simulate), args.seed, args.hostname)

    def probes(self):
        return {"simulator": {"available": True}}

    def scenarios(self):
        return [s["name"] for s in self.scen]

    def timestamp(self, start, t):
        self.start = start
        if self.train is not None:
            self.train.start = start
        return start + t

    def clock(self, speed):
        """A simulated host's clock is its own: ``speed`` simulated seconds a second from
        the hello, stamps in UTC, no kernel boot (its kernel lines carry no ``[sec.usec]``)."""
        return {"speed": speed, "utc_offset_s": 0, "boot_time": None}

    def kernel_log(self, mode, send, error):
        return QuietLog(send, "simulated", "simulated kernel events")

    def _get(self, name):
        for s in self.scen:
            if s["name"] == name:
                return s
        return None

    def facts(self):
        """Two Xeon 8480+ sockets (112 cores: 14 per GPU), 2 TiB RAM (768 GiB with
        ``low-ram``), an HGX H100 board with NVSwitches (hence a fabric manager)."""
        skew = "driver-skew" in self.names
        software = dict(SIM_SOFTWARE, container_runtimes=list(SIM_SOFTWARE["container_runtimes"]))
        if skew:
            software.update(fabric_manager=SIM_SKEW["fabric_manager"], nccl=SIM_SKEW["nccl"])
        facts = {
            "hostname": self.hostname, "kernel": "5.15.0-119-generic",
            "os": "Ubuntu 22.04.4 LTS", "python": platform.python_version(),
            "driver_version": SIM_SKEW["driver_version"] if skew else "550.90.07",
            "cuda_version": SIM_SKEW["cuda_version"] if skew else "12.4",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_cores_logical": 224,
            "cpu_cores_physical": 112, "mem_total_bytes": self.mem_bytes,
            "swap_total_bytes": 8 * 1024 ** 3, "swap_used_bytes": 0,
            "software": software, "block_devices": [dict(d) for d in SIM_BLOCK_DEVICES],
        }
        facts["numa_nodes"] = 2
        gpus = [{"index": i, "uuid": self.uuids[i], "bus_id": b, "name": "NVIDIA H100 80GB HBM3",
                 "mem_total_mib": SIM_MEM_TOTAL, "temp_slowdown_c": 90, "temp_shutdown_c": 92,
                 "pcie_gen_max_gpu": 5, "serial": self.serials[i], "vbios": "96.00.89.00.01",
                 "persistence_mode": True, "ecc_mode": True, "ecc_mode_pending": True,
                 "mig_mode": False, "power_limit_default_w": SIM_POWER_LIMIT}
                for i, b in enumerate(SIM_BUS_IDS)]
        return facts, gpus

    def _util(self, t):
        if "disk-saturated" in self.names:
            phase = t % SIM_STARVE_PERIOD_S
            return 97.0 if phase < 0.6 * SIM_STARVE_PERIOD_S else 3.0
        return 96.0

    def _chain(self, i, t):
        """GPU behind a PCIe switch behind a root port, as on an HGX baseboard."""
        bus = SIM_BUS_IDS[i]
        dn = self._get("link-downgrade")
        width = 8 if dn is not None and dn["gpu"] == i else 16
        node = 0 if i < 4 else 1
        cpus = "0-55,112-167" if node == 0 else "56-111,168-223"
        b = int(bus[5:7], 16)
        return [
            {"address": bus, "speed_gts": 32.0, "width": width, "max_speed_gts": 32.0,
             "max_width": 16, "numa_node": node, "local_cpulist": cpus},
            {"address": "0000:%02x:00.0" % (b - 1), "speed_gts": 32.0, "width": width,
             "max_speed_gts": 32.0, "max_width": 16, "numa_node": node, "local_cpulist": cpus},
            {"address": "0000:%02x:00.0" % (b - 2), "speed_gts": 32.0, "width": 16,
             "max_speed_gts": 32.0, "max_width": 16, "numa_node": node, "local_cpulist": cpus},
            {"address": "0000:%02x:01.0" % (b - 3), "speed_gts": 32.0, "width": 16,
             "max_speed_gts": 32.0, "max_width": 16, "numa_node": node, "local_cpulist": cpus},
        ]

    def pcie(self, t):
        return dict((SIM_BUS_IDS[i], self._chain(i, t)) for i in range(len(SIM_BUS_IDS)))

    def topology(self):
        """What a real HGX H100 host's hello carries beyond the GPU list."""
        nics = []
        for i in range(8):
            b = int(SIM_BUS_IDS[i][5:7], 16)
            nics.append({"name": "mlx5_%d" % i, "kind": "infiniband",
                         "address": "0000:%02x:00.0" % (b + 1), "numa_node": 0 if i < 4 else 1,
                         "ports": [{"port": 1, "state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)",
                                    "link_layer": "InfiniBand", "phys_state": "5: LinkUp"}],
                         "node_guid": "a088:c203:00%02x:%04x" % (self.seed % 256, 0xeab8 + i),
                         "hca_type": "MT4129",  # a ConnectX-7 under the GPU's own PCIe switch
                         "bridges": ["0000:%02x:01.0" % (b - 1), "0000:%02x:00.0" % (b - 2),
                                     "0000:%02x:01.0" % (b - 3)]})
        return {"pcie": self.pcie(0.0), "nics": nics, "topo_text": sim_topo_text(),
                "datasets": [{"path": "/data", "device": "nvme0n1", "free_bytes": 1911260446720,
                              "total_bytes": 3777893457920}]}

    def fabric(self, t):
        """Eight ConnectX-7 NDR ports, 18 NVLinks a GPU; ``ib-port-down`` takes the port
        beside its GPU down (one flap counted, then polling) and sends that at once."""
        s = self._get("ib-port-down")
        down = s["gpu"] if s is not None and t >= s["at"] else None
        last = getattr(self, "fab", None)
        self.fab_n = getattr(self, "fab_n", 0) + 1
        if last is not None and last[1] == down and self.fab_n % 30:
            return None
        self.fab = (t, down)
        flap = last is not None and last[1] != down
        ports = [{"hca": "mlx5_%d" % i, "port": 1, "state": "DOWN" if i == down else "ACTIVE",
                  "phys_state": "Polling" if i == down else "LinkUp",
                  "rate_gbs": 10.0 if i == down else 400.0, "link_layer": "InfiniBand",
                  "errors": {"link_downed": 1} if i == down and flap else {},
                  "rx_bytes_s": 0.0 if i == down else 2.1e10,
                  "tx_bytes_s": 0.0 if i == down else 2.1e10, "xmit_wait_s": 0.0}
                 for i in range(8)]
        out = {"interval_s": t - last[0] if last else None, "ports": ports}
        if self.fab_n % 300 == 1:  # NVLink (steady here) on the first and every 10th message
            out["nvlink"] = [{"gpu": g, "links": [[k, 1, 26.562, 0, 0, 0] for k in range(18)]}
                             for g in range(8)]
        return out

    def sample(self, t):
        r = self.rng
        lost = self._get("xid79")
        nccl = self._get("nccl-timeout")
        # the collective hangs when it is issued, the watchdog's timeout before it fires
        hung = nccl is not None and t >= nccl["at"] - SIM_NCCL_TIMEOUT_S
        gpus = []
        for i in range(len(SIM_BUS_IDS)):
            if lost is not None and lost["gpu"] == i and t >= lost["at"]:
                continue
            util = min(100.0, max(0.0, self._util(t) + r.uniform(-2.5, 2.5)))
            if hung:
                util = 100.0
            temp = 52.0 + 14.0 * util / 100.0 + r.uniform(-1.0, 1.0)
            power = 150.0 + 480.0 * util / 100.0 + r.uniform(-20.0, 20.0)
            if hung:
                power = 160.0 + r.uniform(-5.0, 5.0)
            clock = SIM_SM_MAX
            reasons = [] if util > 5 else ["gpu_idle"]
            mem = self.base_mem[i]
            th = self._get("throttle")
            if th is not None and th["gpu"] == i:
                temp = _throttle_temp(t) + r.uniform(-0.5, 0.5)
                if temp >= 85.0:
                    reasons = ["sw_thermal_slowdown"]
                    if temp >= 88.0:
                        reasons.append("hw_thermal_slowdown")
                    clock = _throttle_clock(temp)
                    power *= clock / SIM_SM_MAX
            lk = self._get("leak")
            if lk is not None and lk["gpu"] == i:
                grown = LEAK_MIB_PER_H * t / 3600.0
                mem = min(SIM_MEM_TOTAL - 2.0, mem + 2.0 * math.floor(grown / 2.0))
            dn = self._get("link-downgrade")
            width = 8 if dn is not None and dn["gpu"] == i else 16
            gpus.append({
                "index": i, "uuid": self.uuids[i], "state": "ok",
                "mem_used_mib": mem, "mem_total_mib": SIM_MEM_TOTAL,
                "util_pct": round(util, 1), "mem_util_pct": round(util * 0.55, 1),
                "temp_c": round(temp, 1), "power_w": round(power, 1),
                "power_limit_w": SIM_POWER_LIMIT, "sm_clock_mhz": round(clock),
                "sm_clock_max_mhz": SIM_SM_MAX, "clock_reasons": reasons,
                "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": width, "pcie_width_max": 16,
                "temp_mem_c": round(temp + 6.0, 1), "mem_clock_mhz": 2619.0,
                "mem_clock_max_mhz": 2619.0, "pstate": "P0",
                "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
                "ecc_corrected_aggregate": 0, "ecc_uncorrected_aggregate": 0,
                "retired_pages_pending": None, "remap_correctable": 0,
                "remap_uncorrectable": 0, "remap_pending": False, "remap_failure": False,
                "nvlink_up": 18, "nvlink_links": 18, "persistence": True, "pcie_replay": 0,
                "processes": [self._process(i, mem)],
            })
        return gpus, self._host(t), self._disks(t)

    def _process(self, i, mem):
        """GPU ``i``'s process: rank ``i`` of the host's job, or, with ``no-environ``, a
        process whose environment the agent could not read."""
        if "no-environ" in self.names:
            return {"pid": 41000 + i, "name": "python", "user": "train",
                    "used_mib": round(mem - 520.0, 1), "environ": False}
        return {"pid": 41000 + i, "name": "python", "user": "train",
                "used_mib": round(mem - 520.0, 1), "slurm_job": self.job,
                "slurm_step": "0", "slurm_task": i, "rank": i, "local_rank": i,
                "world_size": 8, "master_addr": self.hostname,
                "cuda_visible_devices": "0,1,2,3,4,5,6,7", "environ": True}

    def _host(self, t):
        r = self.rng
        return {
            "cpu_pct": round(34.0 + r.uniform(-4.0, 4.0), 1),
            "load1": round(41.0 + r.uniform(-3, 3), 2), "load5": 40.5, "load15": 40.1,
            "mem_used_bytes": int(420 * 1024 ** 3 + r.uniform(0, 2) * 1024 ** 3),
            "mem_total_bytes": self.mem_bytes, "swap_used_bytes": 0,
            "swap_total_bytes": 8 * 1024 ** 3, "swap_in_pages_s": 0.0, "swap_out_pages_s": 0.0,
        }

    def _disks(self, t):
        r = self.rng
        if "disk-saturated" in self.names:
            data = {"r_s": round(24000 + r.uniform(-800, 800), 1), "w_s": 2.0,
                    "rkb_s": round(3.1e6 + r.uniform(-1e5, 1e5), 1), "wkb_s": 16.0,
                    "r_await": round(28.0 + r.uniform(-6, 6), 2), "w_await": 0.4,
                    "aqu_sz": round(31.0 + r.uniform(-4, 4), 2),
                    "util": round(min(100.0, 99.0 + r.uniform(0, 1)), 1)}
        else:
            data = {"r_s": round(820 + r.uniform(-60, 60), 1), "w_s": 3.0,
                    "rkb_s": round(2.1e5 + r.uniform(-1e4, 1e4), 1), "wkb_s": 24.0,
                    "r_await": round(0.4 + r.uniform(0, 0.1), 2), "w_await": 0.3,
                    "aqu_sz": 0.33, "util": round(18.0 + r.uniform(-3, 3), 1)}
        quiet = {"r_s": 0.0, "w_s": round(12 + r.uniform(-2, 2), 1), "rkb_s": 0.0,
                 "wkb_s": round(180 + r.uniform(-20, 20), 1), "r_await": 0.0, "w_await": 0.6,
                 "aqu_sz": 0.01, "util": 0.8}
        return {"nvme0n1": data, "nvme1n1": dict(quiet), "sda": dict(quiet)}

    def _slowest_clock_share(self, t):
        """A synchronous job runs at its slowest GPU's pace: the throttled one's clock."""
        th = self._get("throttle")
        if th is None or _throttle_temp(t) < 85.0:
            return 1.0
        return _throttle_clock(_throttle_temp(t)) / SIM_SM_MAX

    def events(self, t):
        out = []
        if self.train is not None:
            out += [(TRAIN_LOG, line) for line in self.train.lines(t, self._slowest_clock_share(t))]
        lost = self._get("xid79")
        if lost is not None and t >= lost["at"] and "xid79" not in self.fired:
            self.fired.add("xid79")
            bus = SIM_BUS_IDS[lost["gpu"]]
            out.append(("kernel", "NVRM: Xid (PCI:%s): 79, pid='<unknown>', name=<unknown>, "
                                  "GPU has fallen off the bus." % bus[:-2]))
            out.append(("kernel", "NVRM: GPU %s: GPU has fallen off the bus." % bus))
        nccl = self._get("nccl-timeout")
        if nccl is not None and t >= nccl["at"] and "nccl" not in self.fired:
            self.fired.add("nccl")
            out.append(("job:/var/log/train/rank3.log",
                        "[rank3]:[E%s 140213 ProcessGroupNCCL.cpp:616] " % _glog(self.start + t) +
                        "[Rank 3] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=262144000, "
                        "NumelOut=262144000, Timeout(ms)=600000) ran for 600081 milliseconds "
                        "before timing out."))
        return out
