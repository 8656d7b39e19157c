"""Where the tests' files are, from the repository root: a test file's own folder is its
stage (``tests/<stage>/``), so no test computes a path from ``__file__``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
TEST_DATA = TESTS / "data"
"""Inputs the tests build on: fake binaries, fake NVML, log samples (``healthy/``, ``fabric/``)."""
TEST_FIXTURES = TESTS / "fixtures"
"""Samples shaped like real machines' output (``samples/``), proc trees (``proc/``)."""
