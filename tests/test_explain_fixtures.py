"""Every sample in ``shared/fixtures`` gives its expected answer through ``explain``."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.explain.run import explain_bytes, to_document
from tests.conftest import SHARED
from tests.explain_expect import expectation, finding_set, fixture_input, subset_mismatches

SAMPLES = sorted((SHARED / "fixtures").glob("*/*.txt")) if (SHARED / "fixtures").is_dir() else []


def _explain(path: Path) -> dict[str, object]:
    return to_document([explain_bytes(path.name, fixture_input(path))])


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path) -> None:
    want = expectation(sample)
    doc = _explain(sample)
    inputs = doc["inputs"]
    assert isinstance(inputs, list)
    got = inputs[0]
    assert got["kind"] == want["kind"]
    assert subset_mismatches(want["parsed"], got["parsed"]) == []
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert finding_set(findings) == finding_set(want["findings"])


def test_there_are_samples_to_check() -> None:
    if not (SHARED / "fixtures").is_dir():
        pytest.skip("shared fixtures not present")
    assert len(SAMPLES) >= 60
