"""``rigwatch explain``: recognise pasted command output or a log, parse it, report findings.

The output contract is ``shared/EXPLAIN-CONTRACT.md`` (version 1).  Parsers live in
``probes.rules.parsers`` and log rules in ``probes.rules.logrules``; this package detects the
kind of each input, runs the right one and assembles the JSON document.
"""
