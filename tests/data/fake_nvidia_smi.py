#!/usr/bin/python3
"""A stand-in for nvidia-smi on PATH, answering --query-gpu from a real capture's values.

Mode comes from FAKE_SMI_MODE:
  csv       8 GPUs, values from the H100 capture in tests/fixtures/samples (FAKE_SMI_FIXTURE)
  old       like csv, but rejects the newer field names as an older driver does
  hang      never answers (a driver stuck in D state, as far as the caller can tell)
  nohandle  GPU 0000:8A:00.0 is gone: the device-handle error, other GPUs still answer
  allgone   only the device-handle error, no table at all (exit 255)
`nvlink -s` / `nvlink -e` print 18 links per GPU as an H100 driver does; FAKE_SMI_NVLINK
"inactive3" makes GPU 0's link 3 `<inactive>` (shape: Azure/azhpc-diagnostics#73,
NVIDIA/srt-slurm#307).
--query-compute-apps answers from FAKE_SMI_APPS ("BUS=PID:MIB,BUS=PID:MIB"; MIB may be
[N/A]), in the order given, as `nvidia-smi --query-compute-apps=gpu_bus_id,pid,used_memory
--format=csv,noheader,nounits` prints them (no index: the GPU is named by bus id only).
"""
import os
import re
import sys
import time

MODE = os.environ.get("FAKE_SMI_MODE", "csv")
if os.environ.get("FAKE_SMI_MODE_FILE") and os.path.exists(os.environ["FAKE_SMI_MODE_FILE"]):
    with open(os.environ["FAKE_SMI_MODE_FILE"]) as _f:
        MODE = _f.read().strip()
ALIASES = {"clocks.sm": "clocks.current.sm", "gpu_name": "name",
           "clocks_throttle_reasons.active": "clocks_event_reasons.active"}
OLD_REJECTS = {"clocks_event_reasons.active", "pcie.link.gen.gpucurrent"}
BUS_IDS = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
           "00000000:8A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]


def fixture_row():
    with open(os.environ["FAKE_SMI_FIXTURE"]) as f:
        lines = f.read().split("\n# ---\n", 1)[1].splitlines()
    names = [re.sub(r" \[.*\]$", "", h.strip()) for h in lines[0].split(",")]
    values = [v.strip() for v in lines[1].split(", ")]
    return dict(zip(names, values))


def main():
    args = sys.argv[1:]
    if MODE == "hang":
        time.sleep(3600)
    if args[:1] == ["nvlink"]:
        return nvlink(args[1:])
    apps = next((a for a in args if a.startswith("--query-compute-apps=")), None)
    if apps is not None:
        for item in filter(None, os.environ.get("FAKE_SMI_APPS", "").split(",")):
            bus, _, rest = item.partition("=")
            pid, _, mib = rest.partition(":")
            print("%s, %s, %s" % (bus, pid, mib))
        return 0
    query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    if query is None:
        print("| NVIDIA-SMI 590.48.01      Driver Version: 590.48.01      CUDA Version: 13.1  |")
        return 0
    fields = query.split(",")
    if MODE == "old":
        for f in fields:
            if f in OLD_REJECTS:
                print('Field "%s" is not a valid field to query.' % f)
                return 2
    if MODE == "allgone":
        print("Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error")
        return 255
    nounits = "nounits" in next((a for a in args if a.startswith("--format=")), "")
    row = fixture_row()
    for i, bus in enumerate(BUS_IDS):
        if MODE == "nohandle" and i == 4:
            print("Unable to determine the device handle for GPU 0000:8A:00.0: Unknown Error")
            continue
        out = []
        for f in fields:
            v = row.get(ALIASES.get(f, f), "[N/A]")
            if f == "index":
                v = str(i)
            elif f == "pci.bus_id":
                v = bus
            elif f == "uuid":
                v = v[:-2] + "%02d" % i
            elif f == "memory.used":
                v = "%d MiB" % (1000 * (i + 1))
            if nounits:
                v = re.sub(r"^(-?[\d.]+) (MiB|W|%|MHz|us|C)$", r"\1", v)
            out.append(v)
        print(", ".join(out))
    return 0


def nvlink(args):
    uuid = fixture_row().get("uuid", "GPU-0")
    for i in range(len(BUS_IDS)):
        print("GPU %d: NVIDIA H100 80GB HBM3 (UUID: %s%02d)" % (i, uuid[:-2], i))
        for link in range(18):
            down = os.environ.get("FAKE_SMI_NVLINK") == "inactive3" and (i, link) == (0, 3)
            if "-s" in args:
                print("\t Link %d: %s" % (link, "<inactive>" if down else "26.562 GB/s"))
            else:
                for name in ("Replay", "Recovery", "CRC"):
                    print("\t Link %d: %s Errors: 0" % (link, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
