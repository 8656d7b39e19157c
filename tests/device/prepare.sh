#!/usr/bin/env bash
# Run here (not on the device): assemble the real agent and fetch nvidia-ml-py's wheel into
# .device/ (git-ignored), which the device run carries: the device reaches no registry.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device
.venv/bin/rigwatch agent --print-source > .device/agent.py
.venv/bin/rigwatch agent --print-source --with-simulator > .device/agent-sim.py  # CHECK_GPU_DRY=1 rehearsal
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .device nvidia-ml-py
ls -l .device
