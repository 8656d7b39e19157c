"""rigwatch agent: reads a GPU host and streams protocol-v1 NDJSON on stdout.

Standard library only, Python >= 3.8, so it can be sent to any host's stock ``python3``
over an SSH channel and run without writing a file.  It uses ``pynvml`` (nvidia-ml-py)
and ``psutil`` when the host has them and falls back to ``nvidia-smi`` and ``/proc``.
It is read-only: it never writes files, changes GPU settings or needs root.  Every GPU
call runs off the main thread with a deadline, so a hung driver never stops host and
disk samples.

It is written as this package of small modules and shipped as one source:
``probes/transport/bootstrap.py`` concatenates them (``rigwatch agent --print-source``
prints the result), and the console sends that over stdin and keeps stdin open; with
``--stdin-eof-exit`` the agent exits as soon as the console goes away.  Run it here as
``python3 -m probes.agent``, or ``python3 - --once < <(rigwatch agent --print-source)``.
The kernel log is followed read-only through ``journalctl``, else ``dmesg``, else a
syslog file, and the agent says which (and what refused it) in a ``logsource`` message.
The protocol is described in ``probes/wire/PROTOCOL.md``; the simulator (``--simulate``)
emits the same protocol for a realistic 8-GPU host, and real hosts are sent the agent
without it.
"""

from __future__ import annotations

# The package's API for the console and its tests; the modules are the agent's own parts.
from .main import main
from .output import AGENT_VERSION, PROTOCOL_VERSION
from .simulator import (
    LEAK_MIB_PER_H,
    SIM_BUS_IDS,
    SIM_SCENARIOS,
    Simulator,
    parse_scenarios,
    sim_topo_text,
)

__all__ = ["AGENT_VERSION", "LEAK_MIB_PER_H", "PROTOCOL_VERSION", "SIM_BUS_IDS", "SIM_SCENARIOS",
           "Simulator", "main", "parse_scenarios", "sim_topo_text"]
