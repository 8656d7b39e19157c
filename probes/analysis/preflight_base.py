"""Preflight's vocabulary: a check's verdict and result, and what it knows of one host.

Kept apart from the checks so ``preflight`` (the checklist) and ``preflight_now`` (the
checks on the host's current state) share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from probes.analysis.findings import Finding
from probes.wire.samples import Hello, HostSample, IbPortSample


class CheckVerdict(str, Enum):
    """A check's outcome; ``skip`` means the host did not say enough to judge."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"

    @property
    def rank(self) -> int:
        """Order for "worst": fail > warn > pass > skip."""
        return {"skip": 0, "pass": 1, "warn": 2, "fail": 3}[self.value]


@dataclass(frozen=True)
class CheckResult:
    """One check on one host (or on the fleet: ``host`` is then the odd one out)."""

    host: str
    check: str
    verdict: CheckVerdict
    value: object
    """What was measured, JSON-ready (a number, a word, a list)."""
    threshold: str
    """What it was held to, in words ("≥ 2.0× GPU memory")."""
    detail: str
    """One sentence for the operator: what is wrong and where, or why it passes."""

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of one check."""
        return {"host": self.host, "check": self.check, "verdict": self.verdict.value,
                "value": self.value, "threshold": self.threshold, "detail": self.detail}


@dataclass(frozen=True)
class HostInput:
    """What preflight knows about one host now: its hello, its newest sample and the
    findings standing against it, or why there are none."""

    name: str
    hello: Hello | None
    sample: HostSample | None = None
    """The newest sample: GPU count, temperature and throttling are judged on it, so a GPU
    that fell off the bus after the hello fails the check."""
    expect_gpus: int | None = None
    failure: str | None = None
    """Why the agent gives no answer now (unreachable, refused, timed out, stale); with a
    hello, the host answered before and the other checks read that last answer."""
    findings: tuple[Finding, ...] = ()
    """What the core found on this host (a lost GPU, sustained throttling): the GPU
    verdicts of ``judge.judge_gpus`` read them, as every screen does."""
    ports: tuple[IbPortSample, ...] | None = None
    """The IB/RoCE ports as the newest ``fabric`` message showed them (None: the hello's)."""


@dataclass
class HostChecks:
    """Collects one host's results."""

    name: str
    out: list[CheckResult] = field(default_factory=list)

    def add(self, check: str, verdict: CheckVerdict, value: object, threshold: str,
            detail: str) -> None:
        """Record one check's result."""
        self.out.append(CheckResult(self.name, check, verdict, value, threshold, detail))


P, W, F, S = CheckVerdict.PASS, CheckVerdict.WARN, CheckVerdict.FAIL, CheckVerdict.SKIP
