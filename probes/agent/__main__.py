"""``python -m probes.agent``: run the agent here."""

from .main import main

main()
