"""Acting on a finding: drain or resume a Slurm node, with the finding as evidence, a
confirmation, the node's state read back, and an append-only audit trail.

The only commands run are ``scontrol update`` (drain, resume) and the reads that verify them
(``sinfo``), each with an argv and a timeout through ``probes.config.slurm_cli``.  A GPU reset
is only ever a plan (``reset_plan``): rigwatch shows it, an operator runs it.
"""
