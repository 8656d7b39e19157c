"""The parsed shape of an ``nvidia-smi`` table: GPUs, processes, MIG devices, the whole table.

These are the contract's ``parsed`` objects (``to_parsed``), shared by the reader
(``smi_table``) and the findings (``smi_table_findings``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class SmiTableGpu:
    """One GPU of the GPU box; None where the table shows N/A or ERR! or was cut off.

    ``err_fields`` names the fields that read ``ERR!``; ``line`` and ``text`` are the GPU's
    first row (1-based input line) for evidence.
    """

    index: int
    name: str | None = None
    bus_id: str | None = None
    persistence: str | None = None
    fan_pct: float | None = None
    temp_c: float | None = None
    perf: str | None = None
    power_w: float | None = None
    power_cap_w: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    util_pct: float | None = None
    compute_mode: str | None = None
    mig_mode: str | None = None
    ecc_uncorr: int | None = None
    disp_a: str | None = None
    err_fields: tuple[str, ...] = ()
    line: int = 0
    text: str = ""

    def to_parsed(self) -> dict[str, object]:
        """The contract's GPU object (evidence fields left out)."""
        out = asdict(self)
        out["err_fields"] = list(self.err_fields)
        del out["line"], out["text"]
        return out


@dataclass(frozen=True)
class SmiTableProcess:
    """One row of the Processes box; ``gi``/``ci`` are None before MIG-era drivers."""

    gpu: int | None
    gi: int | None
    ci: int | None
    pid: int | None
    type: str | None
    name: str | None
    mem_mib: float | None

    def to_parsed(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class SmiTableMigDevice:
    """One MIG instance of the ``MIG devices:`` box (two rows: memory, then BAR1)."""

    gpu: int
    gi: int | None
    ci: int | None
    mig_dev: int | None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    bar1_used_mib: float | None = None
    bar1_total_mib: float | None = None
    sm: int | None = None
    ecc_uncorr: int | None = None
    line: int = 0
    text: str = ""

    def to_parsed(self) -> dict[str, object]:
        out = asdict(self)
        del out["line"], out["text"]
        return out


@dataclass(frozen=True)
class SmiTable:
    """Everything the table says.

    ``gpus`` is the merged view of every snapshot; ``gpu_rows`` keeps every GPU row read
    (findings look at all of them); ``error_lines`` are the 1-based lines of ``errors``.
    """

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple[SmiTableGpu, ...] = ()
    processes: tuple[SmiTableProcess, ...] = ()
    errors: tuple[str, ...] = ()
    mig_devices: tuple[SmiTableMigDevice, ...] = ()
    timestamp: str | None = None
    gpu_rows: tuple[SmiTableGpu, ...] = ()
    error_lines: tuple[int, ...] = ()
    smi_version: str | None = None

    def to_parsed(self) -> dict[str, object]:
        """The contract's ``parsed`` object."""
        out: dict[str, object] = {
            "driver_version": self.driver_version, "cuda_version": self.cuda_version,
            "gpus": [g.to_parsed() for g in self.gpus],
            "processes": [p.to_parsed() for p in self.processes],
            "errors": list(self.errors)}
        if self.mig_devices:
            out["mig_devices"] = [m.to_parsed() for m in self.mig_devices]
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        return out
