"""Training-log rules (the ``model`` step): what the training program itself hit."""

from probes.rules.logrules.training.rules import EVIDENCE_MAX, parse_oom, scan, to_mib

__all__ = ["EVIDENCE_MAX", "parse_oom", "scan", "to_mib"]
