"""NVIDIA Fabric Manager's log (``/var/log/fabricmanager.log``, or ``nv-fabricmanager`` in the
journal): ``fabric-manager-error`` in the ``gpu`` step.

Fabric Manager writes ``[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal
error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 33``; an
ERROR line, or a start that fails (``aborting fabric manager``, the unit's
``status=1/FAILURE``), is critical on a host with NVSwitches: their GPUs cannot use NVLink.
``NV_WARN_NOTHING_TO_DO`` means it found no NVSwitch to manage: on a host without one (PCIe
cards, an NVLink bridge, a standalone GH200) the service is not needed and the line is
``info``, unless the same log shows NVSwitches.  Shapes: leptonai/gpud
``fabric-manager/log_matcher.go`` and ``testdata/fabricmanager.log``, NVIDIA/gpu-operator#610,
data-infra/cube-studio#29, bottlerocket-os/bottlerocket-kernel-kit#142.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probes.rules.logrules.common import CRIT, INFO
from probes.rules.logrules.lines import LogLine
from probes.rules.result import ExplainFinding
from probes.triage import Code, Severity, Step

_CHEAP = re.compile(r"fabric ?manager|NV_WARN_NOTHING_TO_DO|\[ERROR\] \[tid|NVSwitch",
                    re.IGNORECASE)
_ERROR = re.compile(r"^\[(?P<time>[A-Z][a-z]{2} \d\d \d{4} \d\d:\d\d:\d\d)\] \[ERROR\] "
                    r"\[tid \d+\] (?P<msg>.+)$")
_NOTHING = re.compile(r"NV_WARN_NOTHING_TO_DO")
_START_FAILED = re.compile(
    r"aborting fabric manager|nvidia-fabricmanager\.service: (?:Main|Control) process exited"
    r".{0,200}?status=\d{1,6}/FAILURE|Failed to start NVIDIA fabric ?manager|"
    r"nv-fabricmanager .{0,200}?\" failed! Exit code", re.IGNORECASE)
_HAS_SWITCH = re.compile(r"NVSwitch (?:pci bus id|fatal|non-fatal|device \d)|found NVSwitch|"
                         r"Detected NVL5 system|NVLink (?:Switch|fabric) (?:initialized|"
                         r"registration)", re.IGNORECASE)
ACTION_ERROR = ("Drain the host; read /var/log/fabricmanager.log around the line (SXid, the "
                "NVSwitch and port it names), restart nvidia-fabricmanager and reset the GPUs; "
                "a fatal NVSwitch error that recurs needs the baseboard serviced")
ACTION_NOTHING = ("No NVSwitch to manage: on PCIe cards, NVLink bridges or a standalone GH200 "
                  "the service is not needed (systemctl disable nvidia-fabricmanager); on an "
                  "HGX/DGX with NVSwitches check the driver, and on Blackwell that NVLSM runs")


def cue(line: LogLine) -> bool:
    """Whether ``line`` could matter to this family (the live console skips the rest)."""
    return _CHEAP.search(line.text) is not None


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """Fabric Manager's errors, failed starts and nothing-to-do lines."""
    if not any(_CHEAP.search(line.text) for line in lines):
        return []
    switches = any(_HAS_SWITCH.search(line.text) for line in lines)
    nothing = next((line for line in lines if _NOTHING.search(line.text)), None)
    found: list[ExplainFinding] = []
    for line in lines:
        m = _ERROR.match(line.text)
        if m:
            found.append(_hit(line, CRIT, f"Fabric Manager error: {m.group('msg')[:200]}",
                              ACTION_ERROR, m.group("time")))
        elif _START_FAILED.search(line.text) and (switches or nothing is None):
            found.append(_hit(line, CRIT, "Fabric Manager failed to start: the GPUs cannot use "
                                          "NVLink through the NVSwitches", ACTION_ERROR))
    if nothing is not None:
        found.append(_hit(nothing, CRIT if switches else INFO,
                          "Fabric Manager found no NVSwitch to manage (NV_WARN_NOTHING_TO_DO)"
                          + ("" if not switches else ", yet the log shows NVSwitches"),
                          ACTION_ERROR if switches else ACTION_NOTHING))
    return found


def _hit(line: LogLine, severity: Severity, summary: str, action: str,
         time: str | None = None) -> ExplainFinding:
    return ExplainFinding(Step.GPU, Code.FABRIC_MANAGER_ERROR, severity, line.number,
                          line.raw.strip()[:600], summary, action, time=time or line.time)
