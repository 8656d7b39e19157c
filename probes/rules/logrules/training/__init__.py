"""Training-log rules (the ``model`` step): what the training program itself hit.

:mod:`.rules` reads each line (records in :mod:`.records`, tracebacks in :mod:`.frames`);
:mod:`.tell` words the lines of one code as one finding.
"""

from probes.rules.logrules.common import EVIDENCE_MAX
from probes.rules.logrules.training.records import OomReport, parse_oom, to_mib
from probes.rules.logrules.training.rules import cue, scan

__all__ = ["EVIDENCE_MAX", "OomReport", "cue", "parse_oom", "scan", "to_mib"]
