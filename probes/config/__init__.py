"""What the operator writes about hosts: the inventory, Slurm-style host lists, values
validated with file:line:col, and what ``~/.ssh/config`` adds."""
