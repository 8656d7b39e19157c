"""The NCCL rules' typed records: what :func:`parse` reads from lines and ``fold`` tells."""

from __future__ import annotations

from dataclasses import dataclass

from probes.rules.logrules.common import CRIT
from probes.rules.logrules.nccl.patterns import WRAPPERS
from probes.triage import Severity


@dataclass(frozen=True)
class Where:
    """Which line a record is on and which rank, host and GPU the log says it belongs to."""

    line: int
    evidence: str
    host: str | None = None
    rank: int | None = None
    gpu: str | None = None
    time: str | None = None


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeout:
    """A collective that the watchdog (or gloo) gave up on.

    ``kind`` is ``collective`` (``Watchdog caught collective operation timeout``), ``work``
    (``Timeout at NCCL work``), ``heartbeat`` (the watchdog itself hung), ``gloo``,
    ``nccl`` (``ncclTimeout``) or ``ambiguous`` (``Exception (either an error or timeout)
    detected by watchdog``: a follow-up line that does not say which).
    """

    where: Where
    kind: str
    seq: int | None = None
    op_type: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    pg: str | None = None


@dataclass(frozen=True)
class NetError:
    """A transport failure: ``category`` picks the advice, ``transport`` names the fabric."""

    where: Where
    transport: str
    category: str
    detail: str
    severity: Severity = CRIT
    status: int | None = None
    peer: str | None = None
    call: str | None = None


@dataclass(frozen=True)
class NcclError:
    """An NCCL error that is not a transport failure (or not yet known to be one).

    ``wrapper`` kinds (system, remote, abort) are how NCCL and torch re-report a failure
    logged elsewhere; ``last_error`` is the ``Last error:`` text that follows, if any.
    """

    where: Where
    kind: str
    detail: str = ""
    last_error: str | None = None

    @property
    def wrapper(self) -> bool:
        return self.kind in WRAPPERS


@dataclass(frozen=True)
class RankFailure:
    """A launcher's report of one dead rank (or, for ``ChildFailedError``, of the job)."""

    where: Where
    launcher: str
    rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    signal: str | None = None
    pid: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class NcclReport:
    """Every record of one input, in line order."""

    timeouts: tuple[Timeout, ...] = ()
    net_errors: tuple[NetError, ...] = ()
    errors: tuple[NcclError, ...] = ()
    failures: tuple[RankFailure, ...] = ()
    init_complete: tuple[int, ...] = ()
    """Lines of ``Init COMPLETE``: a communicator came up after what was warned before."""
