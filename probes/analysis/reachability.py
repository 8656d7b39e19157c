"""Down is a finding: a host that cannot be watched, and one missing GPUs from the start.

A host that is unreachable, refuses our login or key, cannot run the agent, or has gone
silent is the most urgent thing on a fleet: nothing else about it can be checked.  So each
of these is a finding in triage's first step (GPU state), with an onset that stays put
across retries, a summary that leads with the verdict, the reason as evidence, and what an
ops engineer does next.  The same goes for a host that reports fewer GPUs than it should
(0 of 8 after a kernel update: the driver is not loaded).
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.analysis.findings import Finding
from probes.errors import DisconnectKind
from probes.triage import Code, Severity, Step

DOWN_CODES = frozenset({Code.HOST_UNREACHABLE, Code.HOST_AUTH_FAILED, Code.HOST_KEY_CHANGED,
                        Code.HOST_KEY_REFUSED, Code.AGENT_FAILED, Code.HOST_DOWN})
"""The codes of a host that cannot be watched at all (critical)."""
REACHABILITY_CODES = DOWN_CODES | {Code.HOST_STALE}
"""Every finding about whether the host can be watched, stale included."""

ACTION_UNREACHABLE = ("Check the host's power and BMC (ipmitool -H <bmc> chassis status), "
                      "then ping it and ssh -v to it from this machine: a refused port is sshd "
                      "down; no answer is the host or the network")
ACTION_SSH_REFUSED = ("The host answers but refuses SSH on its port: sshd is down (or listens "
                      "elsewhere). Restart it from the host's console or BMC (systemctl status "
                      "ssh; journalctl -u ssh), or check the port the inventory names; ping "
                      "and ssh -v from this machine show it is this host that answers")
ACTION_AUTH = ("Check the user and key the inventory names: ssh -i <key> <user>@<host> true; "
               "the key must be in the user's authorized_keys (or the ssh agent)")
ACTION_KEY_CHANGED = ("Treat as possible interception until proven otherwise: verify the new "
                      "key out of band (console, BMC, the host's owner: ssh-keygen -lf "
                      "/etc/ssh/ssh_host_ed25519_key.pub on the host) before ssh-keygen -R")
ACTION_KEY_REFUSED = ("Get the host's key from its owner or its console and add it to "
                      "known_hosts (or set host_key_checking: accept-new for new hosts)")
ACTION_AGENT = ("The agent needs python3 >= 3.8 on the host (python3 -V there); read the "
                "agent's stderr in the reason, and run the bootstrap by hand over ssh")
ACTION_DOWN = ("The stream ended: check the host (ssh to it, uptime, dmesg -T | tail) and "
               "whether the agent was killed (OOM killer, a reboot)")
ACTION_STALE = ("The agent or its link froze: ssh to the host and check load (uptime), "
                "memory and the agent process; the session reconnects on its own")
ACTION_NO_GPUS = ("The driver is probably not loaded (after a kernel update the DKMS module "
                  "may not be built): run nvidia-smi, lsmod | grep nvidia, dkms status, "
                  "dmesg | grep -i nvrm; rebuild the module for the running kernel")
ACTION_FEW_GPUS = ("A GPU fell off the bus before the agent started: count them on the bus "
                   "(lspci -d 10de: | grep -ci 3d), read dmesg | grep -iE 'xid|nvrm|fallen'; "
                   "a reset or a reboot may bring it back, else it needs service")

_BY_KIND: dict[DisconnectKind, tuple[Code, str, str]] = {
    DisconnectKind.UNREACHABLE: (Code.HOST_UNREACHABLE, "DOWN", ACTION_UNREACHABLE),
    DisconnectKind.AUTH_FAILED: (Code.HOST_AUTH_FAILED, "LOGIN REFUSED", ACTION_AUTH),
    DisconnectKind.AGENT_FAILED: (Code.AGENT_FAILED, "AGENT FAILED", ACTION_AGENT),
    DisconnectKind.STALLED: (Code.HOST_DOWN, "DOWN", ACTION_STALE),
    DisconnectKind.GARBLED: (Code.HOST_DOWN, "DOWN", ACTION_AGENT),
    DisconnectKind.DOWN: (Code.HOST_DOWN, "DOWN", ACTION_DOWN),
}
SUMMARY_REASON_CHARS = 120
"""The summary quotes the reason up to this long; the evidence holds all of it."""


@dataclass(frozen=True)
class Outage:
    """One spell of not streaming, from the first failure until the host streams again."""

    onset: float
    """When the host stopped streaming (kept across retries, whatever each retry says)."""
    kind: DisconnectKind
    reason: str
    """The latest attempt's reason, already sanitised (``Disconnected`` cleans it)."""
    retry_at: float | None = None
    """Console time of the next connection attempt; None when the session gave up."""


def continue_outage(outage: Outage | None, ts: float, kind: DisconnectKind, reason: str,
                    retry_at: float | None, silent_since: float | None = None) -> Outage:
    """The outage after one more failed attempt: a new one, or the same onset updated.

    ``silent_since`` is when the host last sent data if it had gone stale first: its outage
    began then, not when the session noticed.
    """
    if outage is not None:
        return Outage(outage.onset, kind, reason, retry_at)
    onset = ts if silent_since is None else min(ts, silent_since)
    return Outage(onset, kind, reason, retry_at)


def _is_changed_key(reason: str) -> bool:
    return "host key changed" in reason.lower() or "identification has changed" in reason.lower()


def _short(reason: str) -> str:
    """The reason cut for a one-line summary (the evidence keeps it whole)."""
    text = reason.strip()
    return text if len(text) <= SUMMARY_REASON_CHARS else text[:SUMMARY_REASON_CHARS - 1] + "…"


def down_finding(host: str, outage: Outage) -> Finding:
    """The critical finding of a host that cannot be watched."""
    if outage.kind is DisconnectKind.HOST_KEY_REFUSED:
        if _is_changed_key(outage.reason):
            return Finding(Step.GPU, Code.HOST_KEY_CHANGED, Severity.CRITICAL,
                           "HOST KEY CHANGED · possible interception (or a reinstall): refused",
                           host, evidence=outage.reason, ts=outage.onset,
                           action=ACTION_KEY_CHANGED)
        verdict = "HOST KEY REVOKED" if "revoked" in outage.reason.lower() \
            else "HOST KEY REFUSED"
        return Finding(Step.GPU, Code.HOST_KEY_REFUSED, Severity.CRITICAL,
                       f"{verdict} · {_short(outage.reason)}", host, evidence=outage.reason,
                       ts=outage.onset, action=ACTION_KEY_REFUSED)
    code, verdict, action = _BY_KIND.get(outage.kind, _BY_KIND[DisconnectKind.DOWN])
    if outage.kind is DisconnectKind.UNREACHABLE and "connection refused" in outage.reason.lower():
        action = ACTION_SSH_REFUSED  # a refusal is an answer: the host is up, sshd is not
    return Finding(Step.GPU, code, Severity.CRITICAL, f"{verdict} · {_short(outage.reason)}",
                   host, evidence=outage.reason, ts=outage.onset, action=action,
                   extra={"kind": outage.kind.value})


def stale_finding(host: str, silent_since: float, limit_s: float) -> Finding:
    """The warning of a host whose stream is open but silent past its limit."""
    return Finding(Step.GPU, Code.HOST_STALE, Severity.WARNING,
                   f"STALE · no data for over {limit_s:g} s: the values shown are old",
                   host, evidence=f"nothing received for more than {limit_s:g} s",
                   ts=silent_since, action=ACTION_STALE, extra={"limit_s": limit_s})


def gpu_count_finding(host: str, expected: int | None, reported: int,
                      ts: float) -> Finding | None:
    """The host reported fewer GPUs than ``expect_gpus`` from the start.

    GPUs it reported and then lost are ``gpu-lost``/``gpu-dropout`` (per GPU, with their
    bus id); this one counts the GPUs never reported at all, which have no bus id to name.
    """
    if expected is None or reported >= expected:
        return None
    if reported == 0:
        summary = f"0/{expected} GPUs · driver not loaded? (the host reports no GPU)"
        action = ACTION_NO_GPUS
    else:
        missing = expected - reported
        summary = (f"{reported}/{expected} GPUs · {missing} never reported "
                   f"(fell off the bus before the agent started?)")
        action = ACTION_FEW_GPUS
    return Finding(Step.GPU, Code.GPU_COUNT_SHORT, Severity.CRITICAL, summary, host,
                   evidence=f"{reported} of {expected} expected GPUs reported", ts=ts,
                   action=action, extra={"expected": expected, "reported": reported})
