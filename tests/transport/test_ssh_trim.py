"""A logged-in connection drops its key exchange packets and shares the server's signature
names (``ssh_trim``, issue 38: ~4.4 KB a host in a collector), and still re-keys with a real
OpenSSH sshd: asyncssh writes both packets again at every exchange.  Negative control: a
packet dropped inside an exchange breaks it, so the re-keys here did read them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from probes.transport import ssh_trim
from probes.transport.ssh_trim import shared_sig_algs, trim_after_login
from tests.support.sshd import SSHD, Sshd, keygen, make_sshd

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason="openssh-server is not installed (.ci/run installs it)")
PAYLOAD = 96 * 1024
"""Sent to ``cat``: with ``rekey_bytes`` 16 KiB the client starts several exchanges."""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sshd, Path, Path]]:
    root = tmp_path_factory.mktemp("trim")
    key, known = root / "client_ed25519", root / "known_hosts"
    keygen(key)
    server = make_sshd(root / "target", key, known)
    yield server, key, known
    server.stop()


async def _login(world: tuple[Sshd, Path, Path]) -> Any:
    server, key, known = world
    return await asyncssh.connect("127.0.0.1", server.port, username="root",
                                  client_keys=[str(key)], known_hosts=str(known), config=None,
                                  rekey_bytes=16 * 1024)


async def _echo_through(conn: Any, drop_inside: bool = False) -> tuple[int | None, int]:
    """(bytes ``wc`` counted back, or None when the connection broke; exchanges the client
    started) for PAYLOAD sent.  ``drop_inside``: the client's packet dropped right after it
    is sent, inside the exchange (what an unsafe trim would do)."""
    started = 0
    send = conn._send_kexinit

    def counting() -> None:
        nonlocal started
        started += 1
        send()
        if drop_inside:
            conn._client_kexinit = b""

    conn._send_kexinit = counting
    try:
        result = await conn.run("wc -c", input=b"x" * PAYLOAD, encoding=None, timeout=30)
    except (asyncssh.Error, OSError):
        return None, started
    out = result.stdout.split()
    return (int(out[0]) if out else None), started


async def test_a_trimmed_connection_drops_its_packets_and_still_rekeys(
        sshd: tuple[Sshd, Path, Path]) -> None:
    conn = await _login(sshd)
    try:
        assert len(conn._client_kexinit) > 500 and len(conn._server_kexinit) > 500
        assert conn._server_sig_algs
        names = frozenset(conn._server_sig_algs)
        trim_after_login(conn)
        assert conn._client_kexinit == b"" and conn._server_kexinit == b""
        assert conn._server_sig_algs == names
        assert conn._server_sig_algs is shared_sig_algs(frozenset(names))  # one for all
        counted, exchanges = await _echo_through(conn)
        assert counted == PAYLOAD and exchanges >= 3
        again = await conn.run("echo still", timeout=10)  # after the exchanges: alive
        assert again.stdout == "still\n"
        trim_after_login(conn)
        assert conn._client_kexinit == b""
    finally:
        conn.close()
        await conn.wait_closed()


async def test_a_packet_dropped_inside_an_exchange_breaks_it(
        sshd: tuple[Sshd, Path, Path]) -> None:
    conn = await _login(sshd)
    trim_after_login(conn)
    try:
        counted, exchanges = await _echo_through(conn, drop_inside=True)
        assert exchanges >= 1 and counted is None  # the hash mismatched: the link closed
    finally:
        conn.close()
        await conn.wait_closed()


def test_a_connection_in_an_exchange_or_of_another_shape_is_left_alone() -> None:
    class InKex:
        def __init__(self) -> None:
            self._kex = object()
            self._kex_complete = False
            self._client_kexinit = b"k" * 900
            self._server_kexinit = b"s" * 900
            self._server_sig_algs = {b"ssh-ed25519"}

    c = InKex()
    trim_after_login(c)
    assert c._client_kexinit == b"k" * 900 and c._server_kexinit == b"s" * 900
    assert c._server_sig_algs == frozenset({b"ssh-ed25519"})
    trim_after_login(object())  # none of the attributes: nothing to do, no error


def test_the_shared_sets_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ssh_trim, "SIG_ALGS_MAX", 4)
    for i in range(20):
        got = shared_sig_algs(frozenset({b"a", str(i).encode()}))
        assert got == frozenset({b"a", str(i).encode()})
        assert len(ssh_trim._sig_algs) <= 4
