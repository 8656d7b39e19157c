"""The agent's output: one JSON object per line on stdout, and probe errors rate-limited."""

from __future__ import annotations

import json
import os
import threading
import time

from .commands import exit_now

AGENT_VERSION = "0.1.0"
PROTOCOL_VERSION = 1


class Writer(object):
    """Writes one JSON object per line; exits the process when stdout is gone."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj):
        line = json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n"
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                exit_now(0)


def watch_stdin_eof():
    """Exit when the console closes our stdin, so no orphan stays on the host."""

    def run():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        exit_now(0)

    t = threading.Thread(target=run, name="stdin-eof", daemon=True)
    t.start()


class ProbeErrors(object):
    """Sends ``error`` messages; the same message repeats at most once a minute."""

    def __init__(self, writer):
        self.w = writer
        self._seen = {}

    def report(self, probe, message):
        key = (probe, message)
        now = time.monotonic()
        if now - self._seen.get(key, -1e9) < 60.0:
            return
        self._seen[key] = now
        self.w.send({"type": "error", "v": PROTOCOL_VERSION, "ts": time.time(), "probe": probe,
                     "message": message[:2000]})


COMPACT_VERSION = 2
"""``--wire 2``: the compact protocol (PROTOCOL.md, "Wire protocol v2")."""
GPU_STATIC = ("index", "uuid", "state", "bus_id", "mem_total_mib", "power_limit_w",
              "sm_clock_max_mhz", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max",
              "mem_clock_max_mhz", "pstate", "ecc_corrected_volatile",
              "ecc_uncorrected_volatile", "ecc_corrected_aggregate", "ecc_uncorrected_aggregate",
              "retired_pages_pending", "remap_correctable", "remap_uncorrectable",
              "remap_pending", "remap_failure", "nvlink_up", "nvlink_links", "persistence",
              "pcie_replay", "processes")
"""GPU fields that rarely move (``processes``: each one's pid, name and user): sent in a
``static`` message, again only when one changes."""
GPU_MOVING = ("mem_used_mib", "util_pct", "mem_util_pct", "temp_c", "power_w", "sm_clock_mhz",
              "temp_mem_c", "mem_clock_mhz", "pcie_tx_kbs", "pcie_rx_kbs", "clock_reasons",
              "process_used_mib")
"""GPU fields sent every tick, in this order (``process_used_mib``: each static process's
memory, in the static list's order).  The console's copy is derived from its field table
(``probes/wire/fields.py``); this one is standalone (the agent imports nothing of ours) and
``tests/wire/test_metric_table.py`` holds the two equal."""
PROCESS_COLUMNS = ("pid", "name", "user", "slurm_job", "slurm_step", "slurm_task", "rank",
                   "local_rank", "world_size", "master_addr", "cuda_visible_devices",
                   "container", "runtime", "pod", "environ")
"""A process in ``static``; its ``used_mib`` moves and travels in ``process_used_mib``."""
HOST_STATIC = ("mem_total_bytes", "swap_total_bytes")
HOST_MOVING = ("cpu_pct", "load1", "load5", "load15", "mem_used_bytes", "swap_used_bytes",
               "swap_in_pages_s", "swap_out_pages_s")
DISK_COLUMNS = ("name", "r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util")


def compact_columns():
    """The column lists a v2 hello declares (``columns``)."""
    return {"gpu_static": list(GPU_STATIC), "gpu": list(GPU_MOVING),
            "process": list(PROCESS_COLUMNS), "host_static": list(HOST_STATIC),
            "host": list(HOST_MOVING), "disk": list(DISK_COLUMNS)}


def _gpu_static(g):
    row = [g.get(c) for c in GPU_STATIC]
    row[_STATE_AT] = g.get("state", "ok")  # v1 reads a missing state as ok, null as unknown
    procs = row[_PROCS_AT]
    if isinstance(procs, list):
        row[_PROCS_AT] = [[p.get(c) for c in PROCESS_COLUMNS] if isinstance(p, dict) else p
                          for p in procs]
    return row


_STATE_AT = GPU_STATIC.index("state")
_PROCS_AT = GPU_STATIC.index("processes")


def _short(v):
    """A whole float as an int (``60000.0`` -> ``60000``): the console reads both alike."""
    if type(v) is float and v.is_integer() and -1e15 < v < 1e15:
        return int(v)
    return v


def _gpu_moving(g):
    row = []
    for c in GPU_MOVING:
        if c == "process_used_mib":
            procs = g.get("processes")
            row.append([_short(p.get("used_mib")) if isinstance(p, dict) else None
                        for p in procs] if isinstance(procs, list) else None)
        else:
            row.append(_short(g.get(c)))
    return row


class CompactEncoder(object):
    """Turns a v1 sample message into v2's: a ``static`` message when the static part
    changed (and before the first sample), then the sample as one JSON array."""

    def __init__(self):
        self._static = None

    def encode(self, msg):
        """The messages to send for the v1 sample ``msg``, in order."""
        gpus = msg.get("gpus") or []
        host = msg.get("host") or {}
        static = {"gpus": [_gpu_static(g) for g in gpus],
                  "host": [host.get(c) for c in HOST_STATIC]}
        out = []
        if static != self._static:
            self._static = static
            out.append(dict({"type": "static", "v": COMPACT_VERSION, "ts": msg["ts"]}, **static))
        row = [msg["seq"], msg["ts"], [_gpu_moving(g) for g in gpus],
               [_short(host.get(c)) for c in HOST_MOVING],
               [[name] + [_short(d.get(c)) for c in DISK_COLUMNS[1:]]
                for name, d in (msg.get("disks") or {}).items()]]
        if "pcie" in msg:
            row.append(msg["pcie"])
        out.append(row)
        return out
