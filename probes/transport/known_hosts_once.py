"""A known_hosts file parsed once for all connections while its text is unchanged (issue 38).

Given the file's path, asyncssh reads and parses it again for every connection (its connect
matches the host against ``read_known_hosts(path)``).  A fleet's file holds a line per host,
so at 1024 hosts each handshake parsed ~1024 lines (7.7 ms measured): the collector's
start-up grew with the square of the fleet, ~8 s of one core for the connect storm.  Here
the file is still read for every connection, as asyncssh reads it (text, the locale's
encoding), but parsed only when its text differs from the text parsed last; the connection
gets what asyncssh would have built from that text (``import_known_hosts``), one object
shared by the connections (asyncssh only reads it: each connection copies the keys that
match its host into its own sets).  So a key recorded by accept-new, or an edit by hand,
counts from the next connection on, as before.  A file that cannot be read, decoded or
parsed is left to asyncssh (the path comes back), so the error a user sees is asyncssh's.
"""

from __future__ import annotations

import asyncssh

_PARSED: dict[str, tuple[str, asyncssh.SSHKnownHosts]] = {}
"""path -> (the text parsed last, what it parsed to)."""


def known_hosts(path: str) -> asyncssh.SSHKnownHosts | str:
    """``known_hosts`` for a connection checked against the file at ``path``: its parsed
    entries, or ``path`` itself where asyncssh should read (and refuse) it."""
    try:
        with open(path) as f:  # asyncssh's read_file(path, "r")
            text = f.read()
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return path
    held = _PARSED.get(path)
    if held is not None and held[0] == text:
        return held[1]
    try:
        parsed = asyncssh.import_known_hosts(text)
    except Exception:  # asyncssh raises it again at connect, as it always did
        return path
    _PARSED[path] = (text, parsed)
    return parsed
