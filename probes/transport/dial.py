"""TCP connect and the server's first bytes, bounded on their own: what a tarpit never sends.

A host that accepts TCP but never speaks SSH (a tarpit, a wedged sshd, a firewall that
answers for dead addresses) would otherwise hold one of the fleet's few handshake slots
for the whole ``connect_timeout``; 128 of them listed first held back every host after
them (review finding 9).  So the connect and the wait for the server's banner happen
here, before the slot is taken, within ``banner_timeout_s`` (a few seconds: a live sshd
sends its banner at once); only a socket with a banner waiting on it goes on to the
handshake, whose key exchange and login are what the slots ration.  The banner is only
peeked at, so asyncssh reads it as if it had connected itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

from probes.errors import DisconnectKind, TransportError


class NoBanner(TransportError):
    """TCP connect or the server's first bytes did not come in time."""

    title = "Host unreachable"
    kind = DisconnectKind.UNREACHABLE


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def _open(host: str, port: int, stage: list[str]) -> socket.socket:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _name, addr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            stage[0] = "TCP connect"
            await loop.sock_connect(sock, addr)
            stage[0] = "SSH banner"
            await _readable(loop, sock)
            if not sock.recv(1, socket.MSG_PEEK):
                raise ConnectionResetError("closed the connection before its SSH banner")
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()  # timed out or cancelled: never leak the socket
            raise
    raise error


async def dial(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connected socket on which the server has already sent its first bytes.

    Raises:
        NoBanner: resolving, connecting or the banner failed or took over ``timeout_s``.
    """
    stage = ["name lookup"]
    try:
        return await asyncio.wait_for(_open(host, port, stage), timeout_s)
    except asyncio.TimeoutError:
        what = ("no SSH banner" if stage[0] == "SSH banner" else f"{stage[0]} timed out")
        raise NoBanner(f"{host}:{port}: {what} within {timeout_s:g} s"
                       + (" (it accepts TCP but does not speak SSH)"
                          if stage[0] == "SSH banner" else "")) from None
    except OSError as exc:  # asyncio's strerror is "Connect call failed (addr)": say why
        why = os.strerror(exc.errno) if exc.errno else str(exc) or type(exc).__name__
        raise NoBanner(f"{host}:{port}: {why}") from None


def close_quietly(sock: socket.socket | None) -> None:
    """Close a socket nobody took over (harmless when asyncssh already closed it)."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()
