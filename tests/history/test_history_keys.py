"""The history's series vocabulary agrees with the samples, the codecs and the agent.

A misspelt field would otherwise draw an empty chart, and a clock-event bit that differs
between the agent and the console would file a throttle under the wrong reason.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import get_args

import pytest

from probes.agent.values import CLOCK_REASON_BITS
from probes.history import (
    DISK_FIELDS,
    GPU_FIELDS,
    GPU_STEP_FIELDS,
    HOST_FIELDS,
    REASON_BITS,
    REASON_OTHER,
    DiskField,
    GpuField,
    GpuStepField,
    HostField,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
    reason_mask,
)
from probes.history.keys import COARSE_CODECS, ProcField
from probes.wire.clock_reasons import CLOCK_REASONS, REASON_NAMES
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, HostStats
from tests.support.paths import REPO

ROOT = REPO


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(("fields", "literal"), [
    (GPU_FIELDS, GpuField), (GPU_STEP_FIELDS, GpuStepField), (HOST_FIELDS, HostField),
    (DISK_FIELDS, DiskField)], ids=["gpu", "gpu-step", "host", "disk"])
def test_each_field_tuple_lists_its_literal_once(fields: tuple[str, ...], literal: object) -> None:
    assert len(set(fields)) == len(fields)
    assert set(fields) == set(get_args(literal))


def test_gpu_fields_are_gpu_sample_fields() -> None:
    assert set(GPU_FIELDS) <= _names(GpuSample)
    assert set(GPU_STEP_FIELDS) <= _names(GpuSample)
    assert not set(GPU_FIELDS) & set(GPU_STEP_FIELDS)


def test_host_disk_and_process_fields_come_from_their_samples() -> None:
    assert set(HOST_FIELDS) - {"gpu_count"} <= _names(HostStats)
    assert {"util", "aqu_sz", "r_await", "w_await"} <= _names(DiskStats)
    assert set(get_args(ProcField)) <= _names(GpuProcess)


def test_every_dense_field_has_a_coarse_codec() -> None:
    dense = {*GPU_FIELDS, *HOST_FIELDS, *DISK_FIELDS, *get_args(ProcField)}
    assert set(COARSE_CODECS) == dense


def test_keys_keep_their_stored_spelling() -> None:
    assert gpu_key(3, "temp_c") == "gpu/3/temp_c"
    assert gpu_key(0, "clock_reasons") == "gpu/0/clock_reasons"
    assert host_key("cpu_pct") == "host/cpu_pct"
    assert disk_key("nvme0n1", "await") == "disk/nvme0n1/await"
    assert proc_key(2, 4242) == "proc/2/4242/used_mib"


def test_agent_clock_reason_bits_match_the_console() -> None:
    """The agent's standalone copy and the console's one definition are the same table."""
    agent = {name: bit for bit, name in CLOCK_REASON_BITS}
    assert len(agent) == len(CLOCK_REASON_BITS)
    assert agent == dict(REASON_BITS)
    assert set(REASON_NAMES) == set(REASON_BITS)
    bits = [r.bit for r in CLOCK_REASONS]
    assert len(set(bits)) == len(bits) and REASON_OTHER not in bits
    assert all(b & (b - 1) == 0 for b in bits)


def test_reason_mask_keeps_unknown_names_apart() -> None:
    assert reason_mask(["sw_power_cap", "hw_slowdown"]) == 0x4 | 0x8
    assert reason_mask(["fan_broke"]) == REASON_OTHER


def test_a_misspelt_field_is_a_type_error(tmp_path: Path) -> None:
    """``gpu_key(i, "temp_cc")`` fails mypy; the spelled field passes."""
    src = tmp_path / "keys_use.py"
    src.write_text(textwrap.dedent("""\
        from probes.history import disk_key, gpu_key
        gpu_key(0, "temp_c")
        gpu_key(0, "temp_cc")
        disk_key("sda", "wait")
        """))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "--config-file", str(ROOT / "pyproject.toml"),
         str(src)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert [e.split(":")[1] for e in errors] == ["3", "4"], out.stdout


class TestSharedKeys:
    """Every host's history holds the same key strings, one object each (issue 38)."""

    def test_keys_are_one_object_and_read_as_before(self) -> None:
        from probes.history import keys

        for idx, field in [(0, "temp_c"), (7, "state"), (63, "pcie_width")]:
            a, b = keys.gpu_key(idx, field), keys.gpu_key(idx, field)  # type: ignore[arg-type]
            assert a == f"gpu/{idx}/{field}" and a is b
        assert keys.host_key("cpu_pct") == "host/cpu_pct"
        assert keys.host_key("cpu_pct") is keys.host_key("cpu_pct")
        assert keys.disk_key("nvme0n1", "await") == "disk/nvme0n1/await"
        assert keys.disk_key("nvme0n1", "await") is keys.disk_key("nvme0n1", "await")

    def test_an_index_of_another_type_keeps_its_own_spelling(self) -> None:
        from probes.history import keys

        keys.gpu_key(1, "temp_c")
        assert keys.gpu_key(True, "temp_c") == "gpu/True/temp_c"
        assert keys.gpu_key(1.0, "temp_c") == "gpu/1.0/temp_c"  # type: ignore[arg-type]

    def test_two_hosts_share_their_keys(self) -> None:
        from probes.history import HostHistory
        from tests.history.test_history import feed
        from tests.history.test_history_budget import busy

        a, b = HostHistory(), HostHistory()
        feed(a, 40, 1.0, busy)
        feed(b, 40, 1.0, busy)
        a.flush()
        b.flush()
        ka, kb = sorted(a.store.keys), sorted(b.store.keys)
        assert ka == kb and len(ka) > 50
        procs = [k for k in ka if k.startswith("proc/")]
        assert procs  # a process's key is its own (pids differ between hosts)
        assert [x is y for x, y in zip(ka, kb, strict=True)] == [
            not k.startswith("proc/") for k in ka]

    def test_the_table_is_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from probes.history import keys

        monkeypatch.setattr(keys, "KEYS_SHARED_MAX", 10)
        monkeypatch.setattr(keys, "_shared", {})
        for i in range(100):
            assert keys.disk_key(f"d{i}", "util") == f"disk/d{i}/util"
        assert len(keys._shared) == 10
