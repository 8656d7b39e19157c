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


def test_peers_are_part_of_the_key_when_the_maximum_is_not_collected() -> None:
    g = replace(gpu(2, 0), pcie_width=8, pcie_width_max=None, pcie_gen_max=None)
    assert judge_gpu(g, None, (), None, peers=(5, 16)).link is Severity.WARNING
    assert judge_gpu(g, None, (), None, peers=(5, 8)).link is None
    assert judge_gpu(g, None, (), None).link is None


@pytest.mark.parametrize(("used", "power"), [(77_520.0, 665.0), (77_400.0, 664.0)])
def test_memory_and_power_verdicts_from_the_memo_match_judging_again(used: float,
                                                                     power: float) -> None:
    """Memory and power enter the key as their verdicts, inlined: at the limits' edges
    (95 % of 81,600 MiB, 95 % of 700 W) the kept answer is still judging's."""
    g = replace(gpu(0, 0), mem_total_mib=81_600.0, power_limit_w=700.0)
    for u in (used, used + 0.5, used - 0.5):
        for p in (power, power + 0.5, power - 0.5):
            other = replace(g, mem_used_mib=u, power_w=p)
            assert judge_gpu(other, None, (), None) == _fresh(other, None, (), None)
