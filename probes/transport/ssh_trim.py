"""What an asyncssh client connection keeps after its login that it never reads again.

At 1,000 hosts a collector holds 1,000 connections, and each kept (asyncssh 2.x) both sides'
``KEXINIT`` packets (~1.45 KB each: every algorithm name) and the server's
``server-sig-algs`` set (~1.5 KB, the same at every host): ~4.4 KB a host (issue 38).

The packets feed the exchange hash of a key exchange only (``get_hash_prefix``), and asyncssh
writes both again at the start of every later one (its own ``_send_kexinit`` and the peer's
``_process_kexinit``), so between exchanges they are dead.  The server's signature names are
read to choose a signature for a key login, done by then; the set is swapped for one shared
frozenset of the same names.  These are asyncssh's private attributes: each is touched only
where it exists with the type it has, and a connection in a key exchange is left alone.
"""

from __future__ import annotations

from typing import Any

SIG_ALGS_MAX = 64
"""Distinct ``server-sig-algs`` sets kept shared (a fleet has a handful of sshd builds)."""
_sig_algs: dict[frozenset[bytes], frozenset[bytes]] = {}


def shared_sig_algs(names: frozenset[bytes]) -> frozenset[bytes]:
    """One frozenset for every connection whose server named the same algorithms."""
    got = _sig_algs.get(names)
    if got is None:
        if len(_sig_algs) >= SIG_ALGS_MAX:
            _sig_algs.clear()
        got = _sig_algs[names] = names
    return got


def trim_after_login(conn: Any) -> None:
    """Drop what ``conn`` (logged in) keeps only for a key exchange or a login."""
    if getattr(conn, "_kex", True) is None and getattr(conn, "_kex_complete", False):
        for name in ("_client_kexinit", "_server_kexinit"):
            if isinstance(getattr(conn, name, None), bytes):
                setattr(conn, name, b"")
    algs = getattr(conn, "_server_sig_algs", None)
    if isinstance(algs, set):
        conn._server_sig_algs = shared_sig_algs(frozenset(algs))
