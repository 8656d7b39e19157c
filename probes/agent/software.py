"""Versions a training job depends on (nvcc, NCCL, torch, CUDA) and ``nvidia-smi topo -m``."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil

from .commands import read_text, rooted, run_command

SOFTWARE_TIMEOUT_S = 3.0
CONTAINER_RUNTIMES = ("docker", "podman", "containerd", "nvidia-container-cli", "enroot",
                      "apptainer", "singularity")
NCCL_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64",
                 "/usr/lib/aarch64-linux-gnu")
_NVCC_RELEASE = re.compile(r"release\s+([\d.]+)(?:,\s*V(\d+(?:\.\d+)+))?")
_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)*)\b")
_NCCL_LIB = re.compile(r"^libnccl\.so\.(\d+)\.(\d+)\.(\d+)$")


def package_version(*names):
    """The installed version of the first of these Python distributions that exists, read
    from its metadata (nothing is imported); None before 3.8 or when none is installed."""
    try:
        from importlib import metadata
    except ImportError:
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # PackageNotFoundError, or a broken dist-info
            continue
    return None


def tool_output(argv):
    """stdout and stderr of ``argv`` when it exits 0 within SOFTWARE_TIMEOUT_S, else None."""
    rc, out, err = run_command(argv, SOFTWARE_TIMEOUT_S)
    return out + "\n" + err if rc == 0 else None


def parse_nvcc_version(text):
    """'Cuda compilation tools, release 12.4, V12.4.131' -> '12.4.131' (else '12.4')."""
    m = _NVCC_RELEASE.search(text or "")
    if not m:
        return None
    return m.group(2) or m.group(1)


def nvcc_version(root):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        fallback = rooted(root, "/usr/local/cuda/bin/nvcc")
        nvcc = fallback if os.access(fallback, os.X_OK) else None
    return parse_nvcc_version(tool_output([nvcc, "--version"])) if nvcc else None


def nccl_version(root):
    """NCCL of the pip wheels, else the highest ``libnccl.so.2.X.Y`` in the usual lib dirs."""
    version = package_version("nvidia-nccl-cu12", "nvidia-nccl-cu11")
    if version:
        return version
    found = []
    for top in NCCL_LIB_DIRS:
        for path in glob.glob(os.path.join(rooted(root, top), "libnccl.so.*")):
            m = _NCCL_LIB.match(os.path.basename(path))
            if m:
                found.append(tuple(int(x) for x in m.groups()))
    return ".".join(str(x) for x in max(found)) if found else None


def cuda_runtime_version(root):
    """CUDA runtime of the pip wheels, else /usr/local/cuda's version.json (its cudart
    entry, which numbers like the wheel: 12.4.127; else the toolkit's 12.4.1), else
    version.txt (CUDA 10 and 11.0)."""
    version = package_version("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")
    if version:
        return version
    text = read_text(rooted(root, "/usr/local/cuda/version.json"))
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        doc = {}
    for key in ("cuda_cudart", "cuda"):
        entry = doc.get(key) if isinstance(doc, dict) else None
        value = entry.get("version") if isinstance(entry, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)*)",
                  read_text(rooted(root, "/usr/local/cuda/version.txt")) or "")
    return m.group(1) if m else None


def fabric_manager_version():
    fm = shutil.which("nv-fabricmanager")
    m = _VERSION.search(tool_output([fm, "--version"]) or "") if fm else None
    return m.group(1) if m else None


def software_versions(root):
    """Versions a training job depends on, found without importing or running its code:
    package metadata, library file names, ``--version`` of a tool (each bounded)."""
    return {"nvcc": nvcc_version(root), "nccl": nccl_version(root),
            "torch": package_version("torch"), "cuda_runtime": cuda_runtime_version(root),
            "container_runtimes": [n for n in CONTAINER_RUNTIMES if shutil.which(n)],
            "fabric_manager": fabric_manager_version()}


TOPO_TIMEOUT_S = 10.0
MAX_TOPO_BYTES = 64 * 1024


def capture_topology(smi):
    """``nvidia-smi topo -m`` as printed; the console parses it.  None when it fails."""
    if not smi:
        return None
    rc, out, _ = run_command([smi, "topo", "-m"], TOPO_TIMEOUT_S)
    if rc != 0 or not out.strip():
        return None
    return out[:MAX_TOPO_BYTES]
