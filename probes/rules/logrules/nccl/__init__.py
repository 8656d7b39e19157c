"""NCCL / torch.distributed log rules: the ``nccl`` step of triage, in two phases.

Lines are first read into typed records (``parse``: :mod:`.patterns` says what each looks
like, :mod:`.records` what it holds), then the records are folded into at most one finding
per code (``scan``, in :mod:`.fold`), told for the whole incident.
"""

from probes.rules.logrules.common import EVIDENCE_MAX
from probes.rules.logrules.nccl.fold import scan
from probes.rules.logrules.nccl.parse import cue, parse
from probes.rules.logrules.nccl.records import NcclReport

__all__ = ["EVIDENCE_MAX", "NcclReport", "cue", "parse", "scan"]
