"""Pure parsers for text an operator pastes or the agent captures; no I/O.

Each module takes the input's lines (``str.splitlines()`` of the decoded text, not yet
cleaned) and returns a ``probes.rules.result.KindResult``: the contract's ``parsed``
summary plus the ``gpu``-step findings it implies.  Parsers never raise on bad input: a
truncated table gives what it has, garbage gives empty lists.
"""
