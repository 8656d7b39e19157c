"""Every sample in ``tests/fixtures/samples`` gives its expected answer via ``rigwatch explain``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.support.explain_expect import expectation, finding_set, fixture_input, subset_mismatches
from tui.cli import main

SAMPLES = sorted(FIXTURES.glob("*/*.txt"))


@pytest.mark.parametrize("sample", SAMPLES,
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    want = expectation(sample)
    given = tmp_path / sample.name
    given.write_bytes(fixture_input(sample))
    assert main(["explain", "--json", str(given)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    doc = json.loads(captured.out)
    assert doc["version"] == 1
    (got,) = doc["inputs"]
    assert got["path"] == str(given)
    assert got["kind"] == want["kind"]
    assert subset_mismatches(want["parsed"], got["parsed"]) == []
    assert finding_set(doc["findings"]) == finding_set(want["findings"])
    for f in doc["findings"]:
        assert f["source"] == str(given) and f["severity"] in ("critical", "warning", "info")
        assert isinstance(f["line"], int) and f["line"] >= 1 and f["evidence"]


def test_there_are_samples_to_check() -> None:
    assert len(SAMPLES) >= 60
