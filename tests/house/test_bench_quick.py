"""Benchmarks stay runnable: each runs in --quick mode and prints well-formed figures."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO
from tui.app import REDRAW_MIN_S


def _quick(bench: str, timeout: int) -> tuple[str, str]:
    """Run ``tests/bench/<bench>.py --quick``: its JSON line and its summary line."""
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "bench" / f"{bench}.py"),
                           "--quick"], capture_output=True, text=True, timeout=timeout,
                          check=True)
    first, summary = proc.stdout.splitlines()
    return first, summary


def test_agent_bench_quick() -> None:
    first, summary = _quick("bench_agent", timeout=120)
    data = json.loads(first)
    for mode in ("simulated-8gpu", "proc-only"):
        r = data["results"][mode]
        # Tiny per-sample costs can round to 0 in a short run; the comparison is what holds.
        assert r["stream_cpu_ms_per_sample"] >= 0
        assert r["exec_per_poll_cpu_ms"] > 10 * r["stream_cpu_ms_per_sample"]
    assert summary.startswith("agent: ")


def test_ssh_fanout_bench_quick() -> None:
    import os

    import pytest

    if not os.access("/usr/sbin/sshd", os.X_OK):
        pytest.skip("openssh-server is not installed")
    first, summary = _quick("bench_ssh_fanout", timeout=120)
    data = json.loads(first)["results"]["hosts_4"]
    assert data["streaming"]["host_samples"] >= data["hosts"]
    assert data["exec_per_poll"]["host_samples"] > 0
    assert data["console_ratio"] > 0 and data["host_ratio"] > 0
    assert summary.startswith("ssh fan-out: ")


def test_ui_bench_quick() -> None:
    first, summary = _quick("bench_ui", timeout=240)
    data = json.loads(first)["results"]
    loaded = data["hosts_256"]
    for case in (data["baseline"], data["hosts_64"], loaded):
        # presses were drawn (one not drawn within 10 s raises); a loaded machine fits fewer
        assert case["fleet"]["presses"] >= 3 and case["host"]["presses"] >= 3
    # the console keeps up with 256 hosts at 1 Hz, and the simulated trouble shows
    assert loaded["fleet"]["host_samples_per_s"] >= 0.9 * 256
    assert loaded["findings"] > 0
    assert loaded["fleet"]["cpu_pct"] < 90
    assert summary.startswith("ui: ")


def test_memory_soak_bench_quick() -> None:
    first, summary = _quick("bench_memory_soak", timeout=240)
    r = json.loads(first)["results"]
    assert r["host_samples"] == r["hosts"] * r["hours"] * 3600 / r["step_s"]
    # every item reached the file: the recording path ran for real
    st = r["recorder_status"]
    assert st["state"] == "off" and st["reason"] is None
    assert st["items_written"] == r["items_fed"] > r["host_samples"] and st["skipped"] == 0
    assert r["recording_mb"] > 0 and r["history_mb"] > 0
    # the leaking host's leak kept growing through the pool's repeats and was found
    assert r["findings_by_code"].get("memory-leak", 0) >= 1
    series = r["series"]
    assert len(series) >= 10 and series[-1][0] == r["hours"]
    assert r["rss_peak_mb"] >= r["rss_start_mb"] > 0
    # loose flatness: catches gross growth (keeping each line's dict adds ~300 MB/h here),
    # not drift; the tiers still fill in the second half of a 3 h run
    assert r["second_half_slope_pct_per_h"] < 15
    assert r["baseline_tuple_mb"] > 0 and r["baseline_dict_mb"] > r["baseline_tuple_mb"]
    assert summary.startswith("memory soak: ")


def test_ingest_bench_quick() -> None:
    first, summary = _quick("bench_ingest", timeout=240)
    data = json.loads(first)
    for key in ("hosts_16", "hosts_64"):
        r = data["results"][key]
        # every line went through the whole path: every host has history, the
        # schedule ran every detector on every host, the troubled templates were found
        assert r["host_samples"] == r["hosts"] * r["seconds"]
        assert r["hosts_with_history"] == r["hosts"]
        assert r["detector_schedule_entries"] >= r["hosts"]
        assert r["findings_at_end"] >= r["hosts"] // 4
        assert r["decode_us"] >= r["parse_us"] > 0 and r["apply_us"] > r["history_add_us"] > 0
        # the console's collector settings were in force, and few young collections ran
        assert r["gc_thresholds"] == data["gc"]["console"]
        assert r["gc_collections"][2] <= 2
        # a ratio, not a timing: about 2x keeping the raw dict here; the bounds catch a
        # broken baseline or a path gone pathological, with room for a noisy machine
        assert 0.5 < r["over_baseline"] < 15
    day = data["results"]["day_detectors"]
    assert day["findings"] >= 2 and day["ms_all_detectors"] > 0
    assert summary.startswith("ingest: ")


def test_widgets_bench_quick() -> None:
    first, summary = _quick("bench_widgets", timeout=120)
    results = json.loads(first)["results"]
    assert set(results) == {"thermal_8_gpus_160x48", "iostat_8_gpus_4_disks_600_points",
                            "topo_8_gpus_10_nics_158_cols", "topo_8_gpus_10_nics_78_cols"}
    for r in results.values():
        assert r["ms"] > 0 and r["baseline_ms"] > 0
        # a ratio, not a timing: about 2x (thermal, drawn) and 6-8x (pure renders) here; the
        # bounds catch a broken baseline or a render gone pathological on a noisy machine
        assert 0.3 < r["over_baseline"] < 60
    assert summary.startswith("widgets: ")


def test_explain_bench_quick() -> None:
    first, summary = _quick("bench_explain", timeout=240)
    (r,) = json.loads(first)["results"].values()
    # every line read and every Xid counted: the streamed read lost nothing
    assert r["parsed_lines"] == r["lines"] and r["xid_count"] == r["xid_lines"] > 0
    # bounded: about 55 MiB here whatever the size (the whole-file read grows ~10x the
    # input: about 120 MiB at this size, 2.1 GB at 200 MB); loose for a noisy machine
    assert r["peak_rss_mb"] < 0.8 * r["whole_file_peak_rss_mb"]
    assert r["peak_rss_mb"] < 150
    assert summary.startswith("explain: ")


def test_fleet_table_bench_quick() -> None:
    first, summary = _quick("bench_fleet_table", timeout=120)
    results = json.loads(first)["results"]
    for n in (64, 128):
        before, now = results[f"before_{n}"], results[f"now_{n}"]
        # counts, not timings: DataTable re-measured the column for each narrower cell
        assert before["passes"]["narrower"]["measures"] >= n * n // 2
        assert now["passes"]["narrower"]["measures"] <= n + 1
        for case in (before, now):
            assert all(p["cpu_s"] >= 0 for p in case["passes"].values())
            for storm in case["storms"].values():
                # every row was drawn in its new state; a storm redraws a few times, never
                # once per host: status redraws REDRAW_MIN_S apart (one at its start), the 1 s
                # ticks (one may fall in), and one due as the storm began (CI saw 5 in 0.56 s)
                t = storm["all_shown_s"]
                assert 1 <= storm["redraws"] <= t / REDRAW_MIN_S + 1 + t + 1 + 1 < n
    assert summary.startswith("fleet table: ")
