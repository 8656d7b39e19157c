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
import errno
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from probes.errors import DisconnectKind, TransportError

T = TypeVar("T")
VERSION_PREFIX = b"SSH-"
PEEK_BYTES = 4096
MAX_PRE_BANNER_BYTES = 64 * 1024
"""Lines a server may send before its version line: more than this is not an SSH server."""
PARTIAL_WAIT_S = 0.02


_WHY: dict[int, str] = {
    errno.ECONNREFUSED: "connection refused by {where} (sshd down or port closed)",
    errno.EHOSTUNREACH: "no route to {where} (host down, or the network to it is broken)",
    errno.ENETUNREACH: "network unreachable for {where} (this machine has no route there)",
    errno.ETIMEDOUT: "no answer from {where} (host down, or a firewall drops the packets)",
    errno.ECONNRESET: "{where} reset the connection (sshd refusing: MaxStartups, a firewall?)",
    errno.ECONNABORTED: "{where} aborted the connection",
}
"""What an ops engineer reads for each connect failure, instead of Python's wording."""


def describe_os_error(host: str, port: int | None, exc: OSError) -> str:
    """A connect failure as a sentence with its likely cause: never "Connect call failed".

    asyncio's own text for a refused connect is ``Connect call failed ('10.0.0.7', 22)``;
    the reason is shown on the fleet table and read by people at 3 a.m.
    """
    where = f"{host}:{port}" if port is not None else host
    if isinstance(exc, socket.gaierror):
        return (f"cannot resolve {host}: {exc.strerror or 'name lookup failed'} "
                "(a typo, or not in DNS or /etc/hosts?)")
    code = exc.errno
    if code is None and isinstance(exc, ConnectionRefusedError):
        code = errno.ECONNREFUSED
    if code in _WHY:
        return _WHY[code].format(where=where)
    if isinstance(exc, ConnectionResetError) and exc.args and isinstance(exc.args[0], str):
        return f"{where} {exc.args[0]}"  # our own "closed the connection before its banner"
    why = os.strerror(code) if code else (str(exc) or type(exc).__name__)
    return f"{where}: {why}"


def describe_timeout(host: str, port: int | None, stage: str, timeout_s: float) -> str:
    """A wait that ran out, by the stage it was in."""
    where = f"{host}:{port}" if port is not None else host
    if stage == "name lookup":
        return f"name lookup for {host} took over {timeout_s:g} s (DNS server unreachable?)"
    if stage == "SSH banner":
        return (f"{where}: no SSH banner within {timeout_s:g} s "
                "(it accepts TCP but does not speak SSH)")
    return (f"no answer from {where} within {timeout_s:g} s "
            "(host down, or a firewall drops the packets)")


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


async def _version_line(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """Wait until the next bytes on ``sock`` are the server's ``SSH-`` version line.

    RFC 4253 lets a server send other lines first; they are read and dropped here (the
    client ignores them anyway), so a tarpit that drips endless lines (endlessh) never
    passes for a server.  The version line itself is only peeked at, for asyncssh.
    """
    skipping, dropped = False, 0
    while True:
        await _readable(loop, sock)
        data = sock.recv(PEEK_BYTES, socket.MSG_PEEK)
        if not data:
            raise ConnectionResetError("closed the connection before its SSH banner")
        if not skipping and data.startswith(VERSION_PREFIX):
            return
        if not skipping and VERSION_PREFIX.startswith(data):
            await asyncio.sleep(PARTIAL_WAIT_S)  # "SS": the rest of the line is on its way
            continue
        end = data.find(b"\n")
        taken = len(sock.recv(len(data) if end < 0 else end + 1))
        skipping, dropped = end < 0, dropped + taken
        if dropped > MAX_PRE_BANNER_BYTES:
            raise ConnectionError(f"sent {dropped} bytes and no SSH version line")


AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]


def literal_address(host: str, port: int) -> list[AddrInfo] | None:
    """What ``getaddrinfo(host, port, type=SOCK_STREAM)`` answers for an IP address written
    as one (``inet_pton``'s strict form, no ``%scope``), without asking it: asyncio runs
    every ``getaddrinfo`` on a worker thread, a thread hand-off per connection at start-up
    (#38 item 5), where asyncio's own ``create_connection`` skips it for such a host as
    here.  None for anything else (names, ``127.1``, scoped addresses): those are
    resolved."""
    if "%" in host:
        return None
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            text = socket.inet_ntop(family, socket.inet_pton(family, host))  # its own form
        except (OSError, ValueError):  # ValueError: an embedded NUL
            continue
        addr: tuple[Any, ...] = (text, port) if family == socket.AF_INET else (text, port, 0, 0)
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", addr)]
    return None


async def _open(host: str, port: int, stage: list[str]) -> socket.socket:
    loop = asyncio.get_running_loop()
    infos = literal_address(host, port) or \
        await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _name, addr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            stage[0] = "TCP connect"
            await loop.sock_connect(sock, addr)
            stage[0] = "SSH banner"
            await _version_line(loop, sock)
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
        raise NoBanner(describe_timeout(host, port, stage[0], timeout_s)) from None
    except OSError as exc:  # asyncio's strerror is "Connect call failed (addr)": say why
        raise NoBanner(describe_os_error(host, port, exc)) from None


def close_quietly(sock: socket.socket | None) -> None:
    """Close a socket nobody took over (harmless when asyncssh already closed it)."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()


class BannerWatch:
    """A ProxyJump tunnel that notes when the target's first bytes come through it.

    Behind a jump host there is no socket of ours to peek at: the target's stream arrives
    on an SSH channel of the hop.  asyncssh accepts any object with ``create_connection``
    as a tunnel, so this one passes the hop's through and wraps the new connection's
    protocol just enough to set ``seen`` on its first data; everything else is forwarded.
    """

    def __init__(self, tunnel: Any) -> None:
        self._tunnel = tunnel
        self.seen = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tunnel, name)  # asyncssh asks a tunnel for its logger

    async def create_connection(self, session_factory: Callable[[], Any], host: str,
                                port: int) -> tuple[Any, Any]:
        made: list[Any] = []

        def factory() -> _FirstData:
            made.append(session_factory())
            return _FirstData(made[0], self.seen)

        chan, _ = await self._tunnel.create_connection(factory, host, port)
        return chan, made[0]


class _FirstData:
    """The target connection's protocol as the hop's channel sees it; notes first data."""

    def __init__(self, inner: Any, seen: asyncio.Event) -> None:
        self._inner = inner
        self._seen = seen
        self._head = bytearray(b"\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def data_received(self, data: bytes, datatype: Any = None) -> None:
        # Seen means a line starting "SSH-", as for a direct dial: a tarpit dripping other
        # lines (endlessh) is not a server.  Only the first 64 KiB are looked at.
        if not self._seen.is_set() and len(self._head) <= MAX_PRE_BANNER_BYTES:
            self._head += data
            if b"\n" + VERSION_PREFIX in self._head:
                self._seen.set()
        self._inner.data_received(data, datatype)


async def banner_within(connecting: Awaitable[T], watch: BannerWatch, where: str,
                        timeout_s: float) -> T:
    """Await ``connecting`` (a connect through ``watch``), giving up after ``timeout_s``
    without the target's first bytes: a tarpit behind a jump host holds the caller's
    handshake slot only that long.

    Raises:
        NoBanner: nothing came from the target in time.
    """
    task = asyncio.ensure_future(connecting)
    seen = asyncio.ensure_future(watch.seen.wait())
    try:
        await asyncio.wait({task, seen}, timeout=timeout_s,
                           return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and not seen.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise NoBanner(f"{where}: no SSH banner within {timeout_s:g} s "
                           "(it accepts TCP but does not speak SSH)")
        return await task
    finally:
        seen.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
