"""``judge_gpu`` keeps judgements by their inputs (a fleet tick judges every GPU): the kept
answer must be exactly what judging again gives, for every input the verdicts read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from probes.analysis import judge
from probes.analysis.judge import GpuVerdict, TempLevel, judge_gpu
from probes.analysis.limits import DetectorLimits
from probes.triage import Code, Severity
from probes.wire.samples import GpuState
from tests.support.tui_fakes import gpu


def _fresh(*args: object, **kw: object) -> judge.GpuJudgement:
    judge._memo.clear()
    return judge_gpu(*args, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("change", [
    {"temp_c": 88.0}, {"temp_mem_c": 99.0}, {"state": GpuState.LOST},
    {"clock_reasons": ("hw_thermal_slowdown",)}, {"pcie_width": 8}, {"util_pct": 5.0},
    {"mem_used_mib": 79_000.0}, {"power_w": 690.0},
])
def test_every_input_the_verdicts_read_is_part_of_the_key(change: dict[str, object]) -> None:
    base = replace(gpu(3, 10), clock_reasons=("sw_power_cap",), pcie_gen=4, pcie_gen_max=5,
                   util_pct=95.0)
    judge_gpu(base, 90.0, (), None)  # kept
    other = replace(base, **change)
    assert judge_gpu(other, 90.0, (), None) == _fresh(other, 90.0, (), None)


def test_codes_leak_and_limits_are_part_of_the_key() -> None:
    g = replace(gpu(1, 5), temp_c=80.0)
    plain = judge_gpu(g, 90.0, (), None)
    assert plain.verdict is GpuVerdict.OK
    leaking = judge_gpu(g, 90.0, (Code.MEMORY_LEAK,), Severity.WARNING)
    assert leaking.verdict is GpuVerdict.LEAKING and leaking.leak is Severity.WARNING
    assert judge_gpu(g, 90.0, (Code.CLOCKS_THROTTLED,), None).throttled
    strict = DetectorLimits(temp_margin_c=15.0)
    assert judge_gpu(g, 90.0, (), None, strict).temp is TempLevel.HOT
    assert judge_gpu(g, 90.0, (), None).temp is not TempLevel.HOT
    assert judge_gpu(g, 90.0, (), None) is plain  # and the kept one comes back


def test_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge, "_MEMO_MAX", 8)
    judge._memo.clear()
    for t in range(50):
        judge_gpu(replace(gpu(0, 1), temp_c=float(t)), 90.0, (), None)
    assert len(judge._memo) <= 8
