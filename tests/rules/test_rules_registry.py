"""The live console and ``explain`` read one registry of log-rule families and of parsers."""

from __future__ import annotations

from probes.explain import detect
from probes.rules.logrules import fabric_manager, kernel, nccl, nccl_tests, training
from probes.rules.logrules.families import (
    FAMILIES,
    KERNEL_SOURCE,
    LogKind,
    families_for,
    scan_lines,
)
from probes.rules.logrules.lines import log_lines
from probes.rules.logrules.live import LiveLogScanner
from probes.rules.parsers import dmon

XID_LINE = ("[ 4187.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
            "GPU has fallen off the bus.")
NCCL_LINE = ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
             "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")
OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
            "GPU 0 has a total capacity of 79.15 GiB of which 1.00 GiB is free.")


def test_every_family_is_in_the_one_registry_in_triage_order() -> None:
    assert [(f.name, f.reads, f.scan) for f in FAMILIES] == [
        ("kernel", LogKind.KERNEL, kernel.scan),
        ("fabric-manager", LogKind.JOB, fabric_manager.scan),
        ("nccl", LogKind.JOB, nccl.scan),
        ("nccl-tests", LogKind.JOB, nccl_tests.scan),
        ("training", LogKind.JOB, training.scan),
    ]


def test_a_source_routes_to_its_families() -> None:
    assert [f.name for f in families_for(KERNEL_SOURCE)] == ["kernel"]
    assert [f.name for f in families_for("job:/var/log/train.log")] == [
        "fabric-manager", "nccl", "nccl-tests", "training"]
    every = {f for f in FAMILIES if f.reads is LogKind.KERNEL} | set(families_for("job:x"))
    assert every == set(FAMILIES)


def test_live_and_explain_find_the_same_codes_through_the_registry() -> None:
    lines = [XID_LINE, NCCL_LINE, OOM_LINE]
    explained = {f.code for f in detect.parse_as("log", lines).findings}
    assert explained == {"xid", "nccl-timeout", "cuda-oom"}
    assert {f.code for f in scan_lines(log_lines(lines))} == explained
    live: dict[str, set[str]] = {}
    for source in (KERNEL_SOURCE, "job:/x"):
        scanner = LiveLogScanner()
        for n, line in enumerate(lines):
            scanner.add(source, line, float(n))
        live[source] = {h.finding.code for h in scanner.scan()}
    assert live[KERNEL_SOURCE] == {"xid"}
    assert live["job:/x"] == {"nccl-timeout", "cuda-oom"}
    assert live[KERNEL_SOURCE] | live["job:/x"] == explained


def test_parsers_are_tried_in_the_documented_order_with_their_kinds() -> None:
    assert [r.kind for r in detect.RECOGNISERS] == [
        "nvidia-smi-csv", "dmon", "dcgmi-diag", "nvidia-smi-table", "nvidia-smi-q", "ibstat",
        "nvlink", "topo", "lspci", "iostat", "nccl-tests"]
    assert detect.KINDS[-2:] == ("pmon", "log")
    assert next(r for r in detect.RECOGNISERS if r.kind == "dmon").kind_of is dmon.kind_of
