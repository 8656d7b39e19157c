"""The client key pairs of an identity file, loaded once for all its connections (issue 38).

Given the file's path, asyncssh reads and parses the private key (and looks for its
``.pub`` and ``-cert.pub``) again for every connection: at a thousand hosts that is a
thousand copies of the same key (2.7 KB each, measured).  Here the pairs are loaded once
per file and handed to each connection as a shallow copy: the parsed key is shared, while
the per-connection state asyncssh sets on a pair while it authenticates (the signature
algorithm it chose with that server) stays the connection's own.  A change to the key
file or its ``.pub``/``-cert.pub`` (mtime, size or inode) loads them again.

Loading is asyncssh's own (``load_keypairs`` with the arguments its connection options
use when no ssh_config is read), and anything it refuses (a missing file, an encrypted
key, no key in the file) is left to asyncssh at connect time, so the error a user sees is
the same as before.  Host key checking does not pass through here.
"""
from __future__ import annotations

import copy
import os
from typing import Any

import asyncssh

_Stamp = tuple[tuple[int, int, int] | None, ...]

_LOADED: dict[str, tuple[_Stamp, list[Any]]] = {}
"""path -> (the files' stamps when loaded, the pairs asyncssh loaded from them)."""


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def client_keys(path: str) -> list[Any]:
    """``client_keys`` for a connection that authenticates with the identity at ``path``:
    the file's key pairs (each connection its own copy), or ``[path]`` where asyncssh
    should load it itself (and say what is wrong with it)."""
    stamp = (_stamp(path), _stamp(path + ".pub"), _stamp(path + "-cert.pub"))
    if stamp[0] is None:
        return [path]
    hit = _LOADED.get(path)
    if hit is None or hit[0] != stamp:
        try:
            pairs = list(asyncssh.load_keypairs([path], None, (), False, False))
        except Exception:  # asyncssh raises it again when it connects
            _LOADED.pop(path, None)
            return [path]
        if not pairs:
            return [path]
        hit = _LOADED[path] = (stamp, pairs)
    return [copy.copy(p) for p in hit[1]]
