"""``python -m probes.agent``: run the agent here (the package imports the simulator)."""

from .main import main

if __name__ == "__main__":  # importing this module (a package walk) must not start an agent
    main()
