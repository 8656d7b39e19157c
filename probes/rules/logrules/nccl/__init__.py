"""NCCL / torch.distributed log rules (the ``nccl`` step): read records, then fold them."""

from probes.rules.logrules.nccl.parse import EVIDENCE_MAX, parse, scan

__all__ = ["EVIDENCE_MAX", "parse", "scan"]
