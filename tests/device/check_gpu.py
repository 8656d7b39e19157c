"""Check the agent against a real NVIDIA GPU: run on the device machine, stdlib only.

Why: the NVML path and the nvidia-smi fallback were written against documentation and
fixtures; this compares both with what ``nvidia-smi --query-gpu`` says on the same card,
runs the explain parsers on this machine's real outputs, and measures the agent's cost
per sample.  Run ``tests/device/prepare.sh`` here first (it assembles the agent and fetches
the nvidia-ml-py wheel into ``.device/``), then on the device:
``python3 tests/device/check_gpu.py "$OUT"`` (see tests/device/README.md).
Exit status 0 when every exact field agrees; the printed table is the evidence.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEVICE = REPO / ".device"
AGENT = DEVICE / ("agent-sim.py" if os.environ.get("CHECK_GPU_DRY") == "1" else "agent.py")
TRUTH_FIELDS = ("index", "uuid", "pci.bus_id", "name", "memory.total", "memory.used",
                "temperature.gpu", "power.draw", "clocks.sm", "clocks.max.sm",
                "pcie.link.gen.max", "pcie.link.width.max", "serial", "vbios_version",
                "utilization.gpu")
OUTPUTS = {
    "smi-table.txt": ["nvidia-smi"],
    "smi-q.txt": ["nvidia-smi", "-q"],
    "smi-topo.txt": ["nvidia-smi", "topo", "-m"],
    "smi-dmon.txt": ["nvidia-smi", "dmon", "-c", "3"],
    "smi-csv.txt": ["nvidia-smi", "--query-gpu=" + ",".join(TRUTH_FIELDS), "--format=csv"],
    "lspci-vv.txt": ["lspci", "-vv"],
    "iostat-x.txt": ["iostat", "-x", "1", "2"],
    "nvlink-s.txt": ["nvidia-smi", "nvlink", "-s"],
    "nvlink-e.txt": ["nvidia-smi", "nvlink", "-e"],
    "ibstat.txt": ["ibstat"],
}
PARSERS = {"smi-table.txt": "smi_table", "smi-q.txt": "smi_q", "smi-topo.txt": "topo",
           "smi-dmon.txt": "dmon", "smi-csv.txt": "smi_csv", "lspci-vv.txt": "lspci",
           "iostat-x.txt": "iostat", "nvlink-s.txt": "nvlink", "nvlink-e.txt": "nvlink",
           "ibstat.txt": "ibstat"}
NVLINK_SPEED_TOL = 0.02
"""NVML's field 164 (MB/s) against nvidia-smi's GB/s: the same number, rounded."""
STREAM_SAMPLES = 20


def run(argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    return done.stdout + (("\n# stderr: " + done.stderr) if done.stderr.strip() else "")


def dry_truth() -> list[dict[str, str]]:
    """The rehearsal's "nvidia-smi": the simulated agent's own hello and sample as cells."""
    hello, sample = agent_once(True)
    live = {g["index"]: g for g in sample["gpus"]}
    return [{"index": str(g["index"]), "uuid": g["uuid"], "pci.bus_id": g["bus_id"],
             "name": g["name"], "memory.total": str(g["mem_total_mib"]),
             "memory.used": str(live[g["index"]]["mem_used_mib"]),
             "temperature.gpu": str(live[g["index"]]["temp_c"]),
             "power.draw": str(live[g["index"]]["power_w"]),
             "clocks.sm": str(live[g["index"]]["sm_clock_mhz"]),
             "clocks.max.sm": str(live[g["index"]]["sm_clock_max_mhz"]),
             "pcie.link.gen.max": str(live[g["index"]]["pcie_gen_max"]),
             "pcie.link.width.max": str(live[g["index"]]["pcie_width_max"]),
             "serial": g["serial"], "vbios_version": g["vbios"], "utilization.gpu": "0"}
            for g in hello["gpus"]]


def truth() -> list[dict[str, str]]:
    """nvidia-smi's own numbers, one dict per GPU, keyed by field name."""
    if DRY:
        return dry_truth()
    out = run(["nvidia-smi", "--query-gpu=" + ",".join(TRUTH_FIELDS),
               "--format=csv,noheader,nounits"])
    rows = []
    for line in out.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        rows.append(dict(zip(TRUTH_FIELDS, cells, strict=False)))
    return rows


def agent_env(nvml: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheels = sorted(DEVICE.glob("nvidia_ml_py-*.whl"))
    if nvml and wheels:
        env["PYTHONPATH"] = str(wheels[-1])
    return env


DRY = os.environ.get("CHECK_GPU_DRY") == "1"
"""Rehearsal without a GPU: the simulator's agent, checked against its own numbers."""
SIM_ARGS = ["--simulate", "healthy"] if DRY else []


def agent_once(nvml: bool) -> tuple[dict, dict]:
    """(hello, sample) from ``agent.py --once`` with or without pynvml importable."""
    out = subprocess.run([sys.executable, str(AGENT), "--once", *SIM_ARGS], capture_output=True,
                         text=True, timeout=120, env=agent_env(nvml)).stdout
    msgs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    hello = next(m for m in msgs if m.get("type") == "hello")
    sample = next(m for m in msgs if m.get("type") == "sample")
    return hello, sample


def num(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def bus(text: str | None) -> str:
    """``00000000:18:00.0`` and ``0000:18:00.0`` name the same device."""
    t = (text or "").lower()
    dom, _, rest = t.partition(":")
    return f"{int(dom, 16):04x}:{rest}" if rest and dom else t


def compare(label: str, hello: dict, sample: dict, smi: list[dict[str, str]]) -> list[str]:
    """Rows of 'field gpu agent smi verdict'; exact fields FAIL on mismatch, live ones say
    how far apart they are (the two reads are a moment apart)."""
    lines, fails = [], 0
    facts = {g["index"]: g for g in hello.get("gpus", [])}
    live = {g["index"]: g for g in sample.get("gpus", [])}
    if len(facts) != len(smi):
        lines.append(f"FAIL {label} gpu count: agent {len(facts)}, nvidia-smi {len(smi)}")
        fails += 1
    for row in smi:
        i = int(row["index"])
        f, s = facts.get(i, {}), live.get(i, {})
        exact = [("uuid", f.get("uuid"), row["uuid"]),
                 ("bus_id", bus(f.get("bus_id")), bus(row["pci.bus_id"])),
                 ("name", f.get("name"), row["name"]),
                 ("serial", f.get("serial"), row["serial"]),
                 ("vbios", f.get("vbios"), row["vbios_version"]),
                 ("pcie_gen_max", s.get("pcie_gen_max"), num(row["pcie.link.gen.max"])),
                 ("pcie_width_max", s.get("pcie_width_max"), num(row["pcie.link.width.max"]))]
        for name, a, b in exact:
            same = a == b or (isinstance(a, (int, float)) and b is not None and float(a) == b)
            fails += 0 if same else 1
            mark = "ok  " if same else "FAIL"
            lines.append(f"{mark} {label} gpu{i} {name:<14} agent={a!r} smi={b!r}")
        near = [("mem_total_mib", f.get("mem_total_mib"), num(row["memory.total"]), 1.0),
                ("mem_used_mib", s.get("mem_used_mib"), num(row["memory.used"]), 256.0),
                ("temp_c", s.get("temp_c"), num(row["temperature.gpu"]), 3.0),
                ("power_w", s.get("power_w"), num(row["power.draw"]), 25.0),
                ("sm_clock_max_mhz", s.get("sm_clock_max_mhz"), num(row["clocks.max.sm"]), 1.0)]
        for name, a, b, tol in near:
            if a is None or b is None:
                ok = a is None and b is None
                mark = "ok  " if ok else "FAIL"
                lines.append(f"{mark} {label} gpu{i} {name:<14} agent={a!r} smi={b!r} (missing)")
                fails += 0 if ok else 1
                continue
            ok = abs(float(a) - b) <= tol
            fails += 0 if ok else 1
            mark = "ok  " if ok else "FAIL"
            lines.append(f"{mark} {label} gpu{i} {name:<14} agent={float(a):.1f} smi={b:.1f} "
                         f"(±{tol:g})")
    lines.append(f"{'FAIL' if fails else 'PASS'} {label}: {fails} mismatches")
    return lines


def compare_nvlink(label: str, sample: dict, out_dir: Path) -> list[str]:
    """The agent's NVLink per GPU (NVML: links up and field 164's speed, never run on a real
    GPU before) against ``nvidia-smi nvlink -s`` read by explain's parser."""
    text = out_dir / "nvlink-s.txt"
    if not text.exists() or not text.read_text().strip():
        return [f"info {label} nvlink: nvidia-smi nvlink -s printed nothing (no NVLink here)"]
    sys.path.insert(0, str(REPO))
    from probes.rules.parsers.nvlink import parse_nvlink

    smi = {g.index: g for g in parse_nvlink(text.read_text().splitlines())}
    lines, fails = [], 0
    for g in sample.get("gpus", []):
        links = g.get("nvlink")
        want = smi.get(g["index"])
        if want is None:
            continue
        up = sum(1 for lk in want.links.values() if lk.state == "active")
        speeds = sorted({lk.speed_gbs for lk in want.links.values() if lk.speed_gbs})
        if links is None:
            lines.append(f"info {label} gpu{g['index']} nvlink: not in this sample "
                         f"(smi: {up} up at {speeds} GB/s)")
            continue
        got_up = sum(1 for ln in links if ln[1])
        got_speeds = sorted({ln[2] for ln in links if ln[2]})
        ok_up = got_up == up
        ok_speed = len(got_speeds) == len(speeds) and all(
            abs(got_speeds[i] - b) <= NVLINK_SPEED_TOL * b for i, b in enumerate(speeds))
        fails += (not ok_up) + (not ok_speed)
        lines.append(f"{'ok  ' if ok_up and ok_speed else 'FAIL'} {label} gpu{g['index']} "
                     f"nvlink up agent={got_up} smi={up}; GB/s agent={got_speeds} smi={speeds}")
    lines.append(f"{'FAIL' if fails else 'PASS'} {label} nvlink: {fails} mismatches")
    return lines


def overhead(nvml: bool) -> str:
    """CPU seconds per sample of the streaming agent, from the child's own rusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(AGENT), "--interval", "1", "--count",
                           str(STREAM_SAMPLES), *SIM_ARGS], capture_output=True, text=True,
                          timeout=STREAM_SAMPLES * 10, env=agent_env(nvml))
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    n = sum(1 for line in proc.stdout.splitlines() if '"type":"sample"' in line
            or '"type": "sample"' in line)
    path = "nvml" if nvml else "nvidia-smi"
    return (f"{path}: {n} samples in {wall:.1f} s wall, {cpu:.2f} s CPU (agent + its "
            f"nvidia-smi children) = {1000 * cpu / max(n, 1):.1f} ms CPU per sample, "
            f"{100 * cpu / wall:.2f} % of one core; peak RSS of any child "
            f"{after.ru_maxrss // 1024} MiB")


def parsers(out_dir: Path) -> list[str]:
    """Each explain parser on this machine's real output: does it read, what does it find."""
    sys.path.insert(0, str(REPO))
    lines = []
    for fname, module in PARSERS.items():
        path = out_dir / fname
        if not path.exists():
            continue
        try:
            mod = __import__("probes.rules.parsers." + module, fromlist=["explain"])
            text = path.read_text(errors="replace").splitlines()
            result = mod.explain(text)
            found = [(f.code, f.severity.value) for f in result.findings][:6]
            lines.append(f"parser {module:<8} on {fname:<14}: {len(result.findings)} "
                         f"findings {found}")
        except Exception as exc:  # a parser that throws on real output is the finding here
            lines.append(f"parser {module:<8} on {fname:<14}: RAISED {exc!r}")
    return lines


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    report: list[str] = [f"python {sys.version.split()[0]}, agent {AGENT}"]
    for fname, argv in OUTPUTS.items():
        if shutil.which(argv[0]):
            (out_dir / fname).write_text(run(argv))
    if not DRY and shutil.which("nvidia-smi") is None:
        print("no nvidia-smi here: run this on the device machine (or CHECK_GPU_DRY=1)")
        return 2
    smi = truth()
    report.append(f"nvidia-smi sees {len(smi)} GPU(s)")
    status = 0
    for nvml in (True, False):
        label = "nvml" if nvml else "smi-fallback"
        try:
            hello, sample = agent_once(nvml)
            (out_dir / (f"agent-once-{label}.json")).write_text(
                json.dumps({"hello": hello, "sample": sample}, indent=1))
            report.append("{} probes: {}".format(label, json.dumps(hello.get("probes"))))
            rows = compare(label, hello, sample, smi)
            status |= 0 if rows[-1].startswith("PASS") else 1
            report += rows
            if not DRY:
                nv = compare_nvlink(label, sample, out_dir)
                status |= 1 if nv[-1].startswith("FAIL") else 0
                report += nv
            report.append(overhead(nvml))
        except Exception as exc:  # report and go on: the other path still tells something
            report.append(f"FAIL {label}: {exc!r}")
            status = 1
    report += parsers(out_dir)
    text = "\n".join(report)
    (out_dir / "report.txt").write_text(text + "\n")
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
