"""``python -m probes.agent``: run the agent here (the package imports the simulator)."""

from .main import main

main()
