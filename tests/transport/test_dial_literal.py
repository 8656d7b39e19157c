"""A dialled IP address written as one is not sent to ``getaddrinfo`` on a worker thread
(#38 item 5): ``literal_address`` answers what ``socket.getaddrinfo(host, port,
type=SOCK_STREAM)`` answers — the same single entry, field for field — for every address
it takes, over thousands of random and hand-picked texts; everything else (names, short
forms, scoped addresses, junk) is left to ``getaddrinfo``.  Negative control: a copy that
keeps the address as written (not in its own form) is told apart."""

from __future__ import annotations

import asyncio
import ipaddress
import random
import socket
from typing import Any

import pytest

from probes.transport import dial
from probes.transport.dial import literal_address

HAND = ["127.0.0.1", "10.0.0.7", "0.0.0.0", "255.255.255.255", "1.2.3.4", "::1", "::",
        "::ffff:10.0.0.1", "FE80::1", "fe80::1", "0:0:0:0:0:0:0:1", "2001:DB8::A:0:1",
        "2001:db8:0:0:1:0:0:1", "::ffff:0:0", "64:ff9b::1.2.3.4", "1::", "1:2:3:4:5:6:7:8",
        "127.1", "0x7f.0.0.1", "017.0.0.1", "127.000.000.001", "1.2.3.256", "1.2.3",
        " 127.0.0.1", "127.0.0.1 ", "127.0.0.1\n", "localhost", "gpu-node-17",
        "fe80::1%lo", "fe80::1%1", "[::1]", ":::", "1:2:3:4:5:6:7:8:9", "::1::", "",
        "1.2.3.4.", "٣.1.1.1", "::1\x00"]


def _random_texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            out.append(str(ipaddress.IPv4Address(rng.getrandbits(32))))
        elif kind == 1:
            a = ipaddress.IPv6Address(rng.getrandbits(128) >> rng.choice((0, 64, 96, 112)))
            out.append(rng.choice((a.compressed, a.exploded, a.exploded.upper())))
        elif kind == 2:
            out.append(".".join(str(rng.randrange(300)) for _ in range(rng.choice((2, 3, 4, 5)))))
        elif kind == 3:  # zero-padded or mixed groups
            groups = [format(rng.getrandbits(16), rng.choice(("x", "04x", "X")))
                      for _ in range(rng.choice((3, 7, 8)))]
            out.append(":".join(groups) if len(groups) == 8 else ":".join(groups) + "::")
        else:
            chars = "0123456789abcdef.:%x "
            out.append("".join(rng.choice(chars) for _ in range(rng.randrange(1, 20))))
    return out


def _resolved(host: str, port: int) -> list[Any] | None:
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None


def _same(answer: Any, host: str, port: int) -> bool:
    got = _resolved(host, port)
    return got is not None and [tuple(e) for e in got] == [tuple(e) for e in answer]


def _check(literal: Any, texts: list[str]) -> tuple[int, list[str]]:
    taken, wrong = 0, []
    for i, host in enumerate(texts):
        port = (22, 2222, 65535, 0)[i % 4]
        answer = literal(host, port)
        if answer is None:
            continue
        taken += 1
        if not _same(answer, host, port):
            wrong.append(host)
    return taken, wrong


def test_it_answers_as_getaddrinfo_for_every_address_it_takes() -> None:
    texts = HAND + _random_texts(random.Random(13), 4000)
    taken, wrong = _check(literal_address, texts)
    assert wrong == []
    assert taken > 1500  # not vacuous: most of the random addresses were taken
    for name in ("localhost", "gpu-node-17", "127.1", "fe80::1%lo", "[::1]", " 127.0.0.1"):
        assert literal_address(name, 22) is None  # left to getaddrinfo


def test_negative_control_the_address_as_written() -> None:
    def as_written(host: str, port: int) -> Any:
        got = literal_address(host, port)
        if got is None:
            return None
        family, kind, proto, name, addr = got[0]
        return [(family, kind, proto, name, (host, *addr[1:]))]

    _taken, wrong = _check(as_written, HAND + _random_texts(random.Random(13), 400))
    assert wrong  # "FE80::1", exploded forms: not getaddrinfo's own text


def test_a_literal_host_is_dialled_without_the_resolver_and_a_name_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    async def run() -> None:
        server = await asyncio.start_server(_banner, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        resolve = loop.getaddrinfo

        async def spy(host: Any, *a: Any, **kw: Any) -> Any:
            asked.append(host)
            return await resolve(host, *a, **kw)

        monkeypatch.setattr(loop, "getaddrinfo", spy)
        async with server:
            for host in ("127.0.0.1", "localhost"):
                sock = await dial.dial(host, port, 5.0)
                assert sock.recv(4, socket.MSG_PEEK) == b"SSH-"
                sock.close()

    asyncio.run(run())
    assert asked == ["localhost"]


async def _banner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"SSH-2.0-test\r\n")
    await writer.drain()
    await reader.read()
    writer.close()
