"""``rigwatch explain`` memory against input size: peak RSS of the real command on kernel logs.

Prints one JSON object and one summary line.  Each size is a kernel log shaped like the
review's (about 52 bytes a line, one ``NVRM: Xid … 79`` line in a thousand), explained by
``python -m tui.cli explain --json FILE`` in its own process; peak RSS is that process's
own ``ru_maxrss`` (``os.wait4``).  The baseline is the old path, which read the whole file
and held every line (``explain_bytes(open(path).read())``), run on the smallest size only:
it grows about ten times the input (2.1 GB for 200 MB).

    python tests/bench/bench_explain.py [--quick] [--sizes-mb 50,100,200]

Measured on the 2-core CI box (2026-12-03): 12 MB → 55 MiB, 50 MB → 58 MiB, 200 MB (2.78 M
lines, 2776 Xid lines all counted) → 57 MiB peak RSS in 80 s; the whole-file read of the
same 200 MB peaked at 1690 MiB in 88 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LINE = "Dec  3 16:59:{s:02d} gpu-a01 kernel: [{t:12.6f}] nvme0n1: I/O {i:08d} ok\n"
XID = ("Dec  3 16:59:{s:02d} gpu-a01 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=0, "
       "GPU has fallen off the bus.\n")
BASELINE = ("import sys; from probes.explain.run import explain_bytes; "
            "r = explain_bytes(sys.argv[1], open(sys.argv[1], 'rb').read()); "
            "print(len(r.result.findings))")


def write_log(path: Path, mb: float) -> tuple[int, int]:
    """A kernel log of about ``mb`` MB; returns (lines, Xid lines)."""
    target = int(mb * 1_000_000)
    lines = xids = size = 0
    with path.open("w") as f:
        chunk = []
        while size < target:
            s = lines % 60
            text = XID.format(s=s) if lines % 1000 == 999 else LINE.format(
                s=s, t=lines / 1000, i=lines)
            xids += lines % 1000 == 999
            chunk.append(text)
            size += len(text)
            lines += 1
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk = []
        f.write("".join(chunk))
    return lines, xids


def peak_rss(argv: list[str]) -> tuple[float, float, str]:
    """(peak RSS in MiB, wall seconds, stdout) of one process."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} exited with {proc.returncode}")
    return usage.ru_maxrss / 1024, wall, text


def run(sizes: list[float], baseline: bool) -> dict[str, object]:
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mb in sizes:
            path = Path(tmp) / f"kern-{mb:g}mb.log"
            lines, xids = write_log(path, mb)
            rss, wall, out = peak_rss([sys.executable, "-m", "tui.cli", "explain", "--json",
                                       str(path)])
            doc = json.loads(out)
            (xid,) = [f for f in doc["findings"] if f["code"] == "xid"]
            r: dict[str, object] = {
                "input_mb": round(path.stat().st_size / 1e6, 1), "lines": lines,
                "parsed_lines": doc["inputs"][0]["parsed"]["lines"],
                "xid_lines": xids, "xid_count": xid.get("count", 1),
                "peak_rss_mb": round(rss, 1), "wall_s": round(wall, 1)}
            if baseline and mb == min(sizes):
                base_rss, base_wall, _ = peak_rss([sys.executable, "-c", BASELINE, str(path)])
                r["whole_file_peak_rss_mb"] = round(base_rss, 1)
                r["whole_file_wall_s"] = round(base_wall, 1)
            results[f"mb_{mb:g}"] = r
            path.unlink()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (the test run)")
    ap.add_argument("--sizes-mb", default=None, help="comma-separated sizes in MB")
    args = ap.parse_args()
    sizes = ([float(x) for x in args.sizes_mb.split(",")] if args.sizes_mb else
             [12.0] if args.quick else [50.0, 100.0, 200.0])
    results = run(sizes, baseline=True)
    print(json.dumps({"bench": "explain", "quick": args.quick, "results": results}))
    shown = ", ".join(f"{r['input_mb']} MB → {r['peak_rss_mb']} MiB RSS in {r['wall_s']} s"
                      for r in results.values())  # type: ignore[index]
    first = results[f"mb_{min(sizes):g}"]
    print(f"explain: {shown}; whole-file read of {first['input_mb']} MB: "  # type: ignore[index]
          f"{first['whole_file_peak_rss_mb']} MiB")  # type: ignore[index]


if __name__ == "__main__":
    main()
