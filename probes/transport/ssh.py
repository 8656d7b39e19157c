"""SSH transport: one asyncssh connection per host, the agent sent over the session's stdin.

Nothing is copied to or installed on the host: the exec request is the bootstrap
command (every word ``shlex.quote``d), the agent's source follows on stdin, and stdin
stays open so the agent exits when the channel closes.  Host keys are verified
against known_hosts unless the inventory says otherwise; ``accept-new`` records a
first-seen key (asyncssh has no such mode, so it is done here) and a changed key is
always refused: a host that any known_hosts entry speaks for (hashed, a pattern, an
authority; ``known_hosts.py`` decides as asyncssh does) is never new, and a ``@revoked``
key is never recorded.  The same rules hold for every ProxyJump hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh

from probes.config.fleet import HostKeyChecking, HostSpec
from probes.errors import DisconnectKind, TransportError
from probes.transport.bootstrap import bootstrap_command, shipped_source
from probes.transport.client_keys import client_keys
from probes.transport.dial import (
    BannerWatch,
    banner_within,
    close_quietly,
    describe_os_error,
    dial,
)
from probes.transport.known_hosts import Lookup, known_hosts_name, lookup, refusal
from probes.transport.known_hosts_once import known_hosts as known_hosts_once
from probes.transport.ssh_keepalive import lazy_keepalive
from probes.transport.ssh_push import PushProcess, Sink
from probes.transport.ssh_trim import trim_after_login
from probes.transport.stderr_tail import StderrTail

READ_CHUNK = 64 * 1024
CIPHERS = ("aes256-gcm@openssh.com", "aes128-gcm@openssh.com", "chacha20-poly1305@openssh.com",
           "aes256-ctr", "aes192-ctr", "aes128-ctr")
"""asyncssh's own list, AES-GCM first: with AES instructions (every x86 and Grace server)
encrypting a 7 KB sample packet took 3 µs here against 15 µs for ChaCha20-Poly1305,
which asyncssh does in three calls per packet.  Both are authenticated ciphers; sshd
takes the first one it also offers."""
log = logging.getLogger(__name__)


class HostUnreachable(TransportError):
    """TCP connect, handshake or login did not complete."""

    title = "Host unreachable"
    kind = DisconnectKind.UNREACHABLE


class AuthFailed(TransportError):
    """The server refused every key we offered."""

    title = "Authentication failed"
    kind = DisconnectKind.AUTH_FAILED


class HostKeyRefused(TransportError):
    """The server's host key is unknown (strict) or has changed."""

    title = "Host key refused"
    kind = DisconnectKind.HOST_KEY_REFUSED


class AgentFailed(TransportError):
    """The connection works but the agent could not run (no python, crashed)."""

    title = "Agent failed"
    kind = DisconnectKind.AGENT_FAILED


def _hop(text: str, default_user: str | None) -> tuple[str | None, str, int]:
    """``[user@]host[:port]`` -> (user, host, port)."""
    user, _, rest = text.rpartition("@")
    host, port = rest, 22
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else 22
    elif rest.count(":") == 1:
        host, p = rest.split(":")
        port = int(p)
    return (user or default_user), host, port


def _known_hosts_path(spec: HostSpec) -> Path:
    return Path(os.path.expanduser(spec.ssh.known_hosts or "~/.ssh/known_hosts"))


def _readable_file(path: Path) -> bool:
    """asyncssh's test for its default known_hosts (else it checks against no entries)."""
    return path.is_file() and os.access(path, os.R_OK)


class SshTransport:
    """Start the agent on a host over SSH and read its stdout in chunks."""

    def __init__(self, spec: HostSpec, agent_args: list[str],
                 gate: asyncio.Semaphore | None = None) -> None:
        self.spec = spec
        self.agent_args = agent_args
        self._gate = gate
        self._conns: list[asyncssh.SSHClientConnection] = []
        self._proc: PushProcess | None = None
        self._stderr = StderrTail()
        self._peer: dict[tuple[str, int], str] = {}
        """(host, port) -> the address it was dialled at, for known_hosts' address entries."""
        self.notes: list[str] = []
        """Things the operator should know (a recorded new host key, checking off)."""

    # ---- connecting -----------------------------------------------------------------

    def _options(self, user: str | None) -> dict[str, Any]:
        o = self.spec.ssh
        opts: dict[str, Any] = {
            "username": user,
            "connect_timeout": o.connect_timeout_s,
            "login_timeout": o.login_timeout_s,
            "keepalive_interval": o.keepalive_interval_s,
            "keepalive_count_max": o.keepalive_count_max,
            "config": () if o.ssh_config else None,
        }
        if not o.ssh_config:
            # A user's ssh_config may name its own Ciphers; without one, AES-GCM first.
            opts["encryption_algs"] = CIPHERS
        if o.identity:
            path = os.path.expanduser(o.identity)
            # Without ssh_config, the pairs loaded once for every connection (issue 38);
            # with it, asyncssh reads the file as the config says (IdentitiesOnly...).
            opts["client_keys"] = [path] if o.ssh_config else client_keys(path)
        if o.host_key_checking is HostKeyChecking.OFF:
            opts["known_hosts"] = None
        elif not _known_hosts_path(self.spec).exists():
            # No file yet: every key is unknown (asyncssh would fail on the missing file).
            opts["known_hosts"] = asyncssh.import_known_hosts("")
        elif o.known_hosts:
            # parsed once while unchanged, not once a connection (issue 38, start-up)
            opts["known_hosts"] = known_hosts_once(os.path.expanduser(o.known_hosts))
        elif not o.ssh_config and _readable_file(default := _known_hosts_path(self.spec)):
            # asyncssh's own default file (~/.ssh/known_hosts where readable), the same way
            opts["known_hosts"] = known_hosts_once(str(default))
        return {k: v for k, v in opts.items() if v is not None or k in ("known_hosts", "config")}

    async def _connect_one(self, user: str | None, host: str, port: int | tuple[()],
                           tunnel: asyncssh.SSHClientConnection | None
                           ) -> asyncssh.SSHClientConnection:
        opts = self._options(user)
        shown = port if isinstance(port, int) else 22
        sock: socket.socket | None = None
        try:
            target = self._direct_target(host, port) if tunnel is None else None
            if target is not None:
                # Outside the gate: a tarpit costs this host its banner timeout, no slot.
                sock = await dial(*target, self.spec.ssh.banner_timeout_s)
                if isinstance(port, int):
                    self._peer[(host, port)] = str(sock.getpeername()[0])
            async with self._gate or contextlib.nullcontext():
                if tunnel is None:
                    return await self._connect_checked(host, port, tunnel, opts, sock)
                # Behind a hop: the slot is held, but only a banner timeout for a tarpit.
                watch = BannerWatch(tunnel)
                return await banner_within(
                    self._connect_checked(host, port, watch, opts), watch, f"{host}:{shown}",
                    self.spec.ssh.banner_timeout_s)
        except asyncssh.PermissionDenied as exc:
            raise AuthFailed(f"{user or '?'}@{host}:{shown}: permission denied "
                             f"({exc.reason}); check the key or the ssh agent") from None
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._key_refusal(host, shown, str(exc)) from None
        except asyncssh.KeyExchangeFailed as exc:
            # asyncssh offers only the key types known_hosts holds for the host (certificates
            # alone, under @cert-authority): no common type is a refused key, not a lost host.
            if "host key" in exc.reason and \
                    self._lookup(host, shown).known:
                raise self._key_refusal(host, shown, exc.reason) from None
            raise HostUnreachable(f"{host}:{shown}: {_reason(exc)}") from None
        except asyncio.TimeoutError:  # before OSError: it is one since Python 3.11
            raise HostUnreachable(
                f"{host}:{shown}: the SSH handshake or login timed out "
                "(host down or overloaded, or a firewall drops the packets)") from None
        except OSError as exc:  # never asyncio's "Connect call failed (addr)"
            raise HostUnreachable(describe_os_error(host, shown, exc)) from None
        except asyncssh.Error as exc:
            raise HostUnreachable(f"{host}:{shown}: {_reason(exc)}") from None
        except BaseException:
            close_quietly(sock)
            raise

    def _direct_target(self, host: str, port: int | tuple[()]) -> tuple[str, int] | None:
        """Where this hop's TCP connect goes, or None when asyncssh must make it itself.

        With ``ssh_config``, ``~/.ssh/config`` may rename the host (HostName), set its port,
        or route it through a ProxyJump or ProxyCommand: asyncssh's own reading of it says.
        """
        if not self.spec.ssh.ssh_config:
            return (host, port) if isinstance(port, int) else None
        try:
            o = asyncssh.SSHClientConnectionOptions(host=host, port=port, config=(),
                                                    client_keys=None, known_hosts=None)
        except (asyncssh.Error, OSError, ValueError):
            return None  # asyncssh will say what is wrong with the config when it connects
        if o.tunnel or o.proxy_command or not isinstance(o.port, int):
            return None
        return str(o.host), o.port

    async def _connect_checked(self, host: str, port: int | tuple[()],
                               tunnel: asyncssh.SSHClientConnection | BannerWatch | None,
                               opts: dict[str, Any], sock: socket.socket | None = None
                               ) -> asyncssh.SSHClientConnection:
        try:
            if sock is not None:
                return await asyncssh.connect(host, port, sock=sock, **opts)
            return await asyncssh.connect(host, port, tunnel=tunnel or (), **opts)
        except asyncssh.HostKeyNotVerifiable as exc:
            if self.spec.ssh.host_key_checking is not HostKeyChecking.ACCEPT_NEW:
                raise
            if not isinstance(port, int):
                raise  # accept-new needs the real port; with ssh_config give it explicitly
            # A host any entry speaks for (hashed, a pattern, an authority) is not new: its
            # key changed, and accept-new refuses exactly that (OpenSSH does the same).
            if self._lookup(host, port).known or \
                    "revoked" in str(exc).lower():
                raise
            path = _known_hosts_path(self.spec)
            await self._record_new_key(host, port, tunnel, opts, path)
            opts = {**opts, "known_hosts": str(path)}
            return await asyncssh.connect(host, port, tunnel=tunnel or (), **opts)

    async def _record_new_key(self, host: str, port: int,
                              tunnel: asyncssh.SSHClientConnection | BannerWatch | None,
                              opts: dict[str, Any], path: Path) -> None:
        key = await asyncio.wait_for(
            asyncssh.get_server_host_key(host, port, tunnel=tunnel or (), config=opts["config"]),
            opts["connect_timeout"])
        if key is None:
            raise HostUnreachable(f"{host}:{port}: no host key offered")
        look = self._lookup(host, port)
        if look.known or look.revoked_entry(key) is not None:
            # Revoked (never appended), or an entry appeared since the first look.
            raise HostKeyRefused(refusal(look, port, host, presented=key))
        line = f"{known_hosts_name(host, port)} {key.export_public_key().decode().strip()}\n"
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(line)
        note = (f"recorded new host key for {known_hosts_name(host, port)} "
                f"({key.get_fingerprint()}) in {path}")
        self.notes.append(note)
        log.warning("%s", note)

    def _lookup(self, host: str, port: int) -> Lookup:
        """The known_hosts entries for a host by name and, once dialled, by its address."""
        return lookup(_known_hosts_path(self.spec), host, port, self._peer.get((host, port), ""))

    def _key_refusal(self, host: str, port: int, reason: str = "") -> HostKeyRefused:
        """asyncssh refused the key: say whether it is unknown, changed or revoked."""
        return HostKeyRefused(refusal(self._lookup(host, port),
                                      port, host, reason))

    async def _connect(self) -> asyncssh.SSHClientConnection:
        o = self.spec.ssh
        tunnel: asyncssh.SSHClientConnection | None = None
        for hop in o.jump:
            user, host, hop_port = _hop(hop, o.user)
            tunnel = await self._connect_one(user, host, hop_port, tunnel)
            lazy_keepalive(tunnel)
            trim_after_login(tunnel)
            self._conns.append(tunnel)
        # With ssh_config, an unset port (and user, jump, key) is left to ~/.ssh/config.
        target_port: int | tuple[()] = o.port or (() if o.ssh_config else 22)
        conn = await self._connect_one(o.user, o.address or self.spec.name, target_port, tunnel)
        lazy_keepalive(conn)
        trim_after_login(conn)
        self._conns.append(conn)
        return conn

    async def start(self) -> None:
        """Connect (through any jump hosts), start the agent and send its source.

        Raises:
            HostUnreachable, AuthFailed, HostKeyRefused: connecting failed.
            AgentFailed: the exec request or the source write failed.
        """
        if self.spec.ssh.host_key_checking is HostKeyChecking.OFF:
            self.notes.append(f"{self.spec.name}: host key checking is OFF; the connection "
                              "is not protected against interception")
        conn = await self._connect()  # each hop's handshake takes the shared gate
        source = shipped_source(self.agent_args)
        cmd = bootstrap_command(self.spec.python or "python3", self.agent_args, len(source))
        try:
            # create_process's own step, with a process that can push its stdout
            _chan, proc = await conn.create_session(PushProcess, cmd, encoding=None)
        except (asyncssh.Error, OSError) as exc:
            raise AgentFailed(f"cannot start the agent: {_reason(exc)}") from None
        assert isinstance(proc, PushProcess)
        self._proc = proc
        self._stderr.follow(proc.stderr, (asyncssh.Error, OSError))
        try:
            proc.stdin.write(source)
            await proc.stdin.drain()
        except (asyncssh.Error, OSError, BrokenPipeError):
            # It died before reading its source (no python there): say why it died.
            await self.exit_reason()
            raise AgentFailed("agent exited before it started") from None

    # ---- streaming ------------------------------------------------------------------

    async def chunks_to(self, sink: Sink) -> None:
        """Hand each raw stdout chunk to ``sink`` as it arrives, until the agent's stdout
        closes (the session's way: no task switch per chunk, ``ssh_push``); raises what
        ``sink`` raised, or HostUnreachable when the stream broke."""
        assert self._proc is not None
        await self._proc.push_to(sink, _broke)

    async def chunks(self) -> AsyncIterator[bytes]:
        """Yield raw stdout chunks until the channel or the agent's stdout closes."""
        assert self._proc is not None
        for chunk in self._proc.held_chunks():
            yield chunk
        while True:
            try:
                chunk = await self._proc.stdout.read(READ_CHUNK)
            except (asyncssh.Error, OSError) as exc:
                raise _broke(exc) from None
            if not chunk:
                return
            yield chunk

    def stderr_tail(self) -> str:
        """The agent's last stderr line (a missing python, a traceback's last line)."""
        return self._stderr.last_line()

    async def exit_reason(self) -> str:
        """Why the stream ended; raises AgentFailed when the agent itself failed."""
        proc = self._proc
        if proc is None:
            return "not started"
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait_closed(), 2.0)
        await self._stderr.settle()
        status, tail = proc.exit_status, self.stderr_tail()
        signal = proc.exit_signal[0] if proc.exit_signal else None
        if signal:  # asyncssh's status is then -1; the signal is what the operator needs
            raise AgentFailed(f"agent killed by signal {signal}" + (f": {tail}" if tail else ""))
        if status not in (None, 0):
            raise AgentFailed(f"agent exited with status {status}" + (f": {tail}" if tail else ""))
        if status is None:
            return "connection closed"
        return "agent exited with status 0"

    async def stop(self) -> None:
        """Close the agent's stdin and every connection; the agent exits at EOF."""
        if self._proc is not None:
            with contextlib.suppress(asyncssh.Error, OSError):
                self._proc.stdin.write_eof()
            self._proc.close()
        for conn in reversed(self._conns):
            conn.close()
            with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(conn.wait_closed(), 3.0)
        self._conns.clear()
        self._stderr.stop()


def _broke(exc: BaseException) -> HostUnreachable:
    return HostUnreachable(f"stream broke: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, asyncssh.DisconnectError):
        return exc.reason or type(exc).__name__
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__
