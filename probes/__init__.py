"""The headless core of rigwatch: agent, transports, wire protocol, samples, findings.

Nothing here imports Textual or Rich (``tests/test_import_hygiene.py`` enforces it),
so scripts, ``rigwatch snapshot`` and ``rigwatch explain`` run without a terminal.
"""

__version__ = "0.1.0"
