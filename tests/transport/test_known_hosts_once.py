"""known_hosts parsed once while its text is unchanged (issue 38, start-up): ``known_hosts_once``.

asyncssh used to read and parse the file for every connection (``read_known_hosts(path)``);
the console now parses it once per text.  What a connection checks against must be what
asyncssh built from the path: random files (names, ``[addr]:port``, hashed names, patterns
and negations, ``@cert-authority``, ``@revoked``, comments, unparseable keys asyncssh skips)
queried for many hosts, addresses and ports give the same keys in the same order both ways;
a file rewritten (even to the same length and time) counts from the next connection on; a
file asyncssh refuses is left to it.  Negative control: a cache keyed by the path alone
keeps the old entries after an edit.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import random
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from probes.config.fleet import HostSpec, SshOptions, TransportName
from probes.transport import known_hosts_once as kho
from probes.transport.ssh import SshTransport

KEYS = [asyncssh.generate_private_key(alg).export_public_key().decode().strip()
        for alg in ("ssh-ed25519", "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-ed25519")]
NAMES = ["gpu001", "gpu002", "gpu003.example.com", "10.0.0.7", "10.0.0.8", "::1"]


def _hashed(name: str, rng: random.Random) -> str:
    salt = rng.randbytes(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def _line(rng: random.Random) -> str:
    name = rng.choice(NAMES)
    pattern = rng.choice((
        name, f"[{name}]:{rng.choice((22, 2222, 40001))}", _hashed(name, rng),
        f"{name},{rng.choice(NAMES)}", "gpu00?", "*.example.com", "gpu*,!gpu002", "*"))
    key = rng.choice(KEYS) if rng.random() < 0.95 else "ssh-ed25519 AAAAnot-a-key"
    marker = rng.choice(("", "", "", "@cert-authority ", "@revoked "))
    return rng.choice((f"{marker}{pattern} {key}", "# a comment", "", f"  {pattern} {key}  "))


def _text(rng: random.Random) -> str:
    return "\n".join(_line(rng) for _ in range(rng.randint(0, 40))) + "\n"


def _keys(result: Any) -> list[list[bytes]]:
    return [[k.public_data if hasattr(k, "public_data") else repr(k).encode() for k in part]
            for part in result]


def _queries(rng: random.Random) -> list[tuple[str, str, int | None]]:
    return [(rng.choice([*NAMES, "other"]), rng.choice(("10.0.0.7", "10.0.0.8", "", "::1")),
             rng.choice((None, 22, 2222, 40001))) for _ in range(30)]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kho, "_PARSED", {})


def test_the_entries_are_asyncssh_own_for_random_files(tmp_path: Path) -> None:
    rng = random.Random(38)
    path = tmp_path / "known_hosts"
    matched = 0
    for _ in range(120):
        path.write_text(_text(rng))
        got = kho.known_hosts(str(path))
        assert isinstance(got, asyncssh.SSHKnownHosts)
        own = asyncssh.read_known_hosts(str(path))
        for q in _queries(rng):
            a, b = _keys(got.match(*q)), _keys(own.match(*q))
            assert a == b, q
            matched += any(a)
    assert matched > 500  # the queries did find keys


def test_parsed_once_while_the_text_is_the_same(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(f"gpu001 {KEYS[0]}\n")
    calls = []
    real = asyncssh.import_known_hosts
    def counted(text: str) -> asyncssh.SSHKnownHosts:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(asyncssh, "import_known_hosts", counted)
    first = kho.known_hosts(str(path))
    assert all(kho.known_hosts(str(path)) is first for _ in range(50))
    assert len(calls) == 1


def _edits_seen() -> bool:
    """Whether an edit to the same length and time (and an append) is seen next time."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "known_hosts"
        path.write_text(f"gpu001 {KEYS[0]}\n")
        st = os.stat(path)
        before = kho.known_hosts(str(path))
        path.write_text(f"gpu002 {KEYS[0]}\n")  # same length
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = kho.known_hosts(str(path))
        assert not isinstance(before, str) and not isinstance(after, str)
        renamed = _keys(after.match("gpu002", "", None)) != [[]] * 7
        with open(path, "a") as f:
            f.write(f"gpu003 {KEYS[1]}\n")  # as accept-new records a key
        appended = kho.known_hosts(str(path))
        assert not isinstance(appended, str)
        return renamed and any(_keys(appended.match("gpu003", "", None)))


def test_an_edit_counts_from_the_next_connection() -> None:
    assert _edits_seen()


def test_negative_control_a_cache_by_path_alone_misses_the_edit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    by_path: dict[str, Any] = {}

    def stale(path: str) -> Any:
        if path not in by_path:
            by_path[path] = asyncssh.read_known_hosts(path)
        return by_path[path]

    monkeypatch.setattr(kho, "known_hosts", stale)
    assert not _edits_seen()


def test_what_asyncssh_refuses_is_left_to_it(tmp_path: Path) -> None:
    bad_marker = tmp_path / "bad_marker"
    bad_marker.write_text(f"@nope gpu001 {KEYS[0]}\n")
    not_utf8 = tmp_path / "not_utf8"
    not_utf8.write_bytes(b"gpu001 \xff\xfe\n")
    one_word = tmp_path / "one_word"
    one_word.write_text("gpu001\n")
    for path in (bad_marker, not_utf8, one_word, tmp_path, tmp_path / "missing"):
        assert kho.known_hosts(str(path)) == str(path)
        with pytest.raises((ValueError, OSError)):
            asyncssh.read_known_hosts(str(path))
    assert kho._PARSED == {}


@pytest.mark.parametrize("where", ["inventory", "default", "ssh_config", "missing"])
def test_the_transport_hands_asyncssh_the_parsed_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """An inventory's file and asyncssh's default (``~/.ssh/known_hosts``) go parsed; with
    ssh_config asyncssh reads what the user's config names; no file: no entries, as before."""
    monkeypatch.setenv("HOME", str(tmp_path))
    own = tmp_path / "fleet_known_hosts"
    default = tmp_path / ".ssh" / "known_hosts"
    default.parent.mkdir()
    for f in (own, default):
        f.write_text(f"gpu001 {KEYS[0]}\n")
    if where == "missing":
        default.unlink()
    ssh = SshOptions(address="127.0.0.1", user="root",
                     known_hosts=str(own) if where == "inventory" else None,
                     ssh_config=where == "ssh_config")
    spec = HostSpec(name="gpu001", transport=TransportName.SSH, ssh=ssh)
    opts = SshTransport(spec, [])._options("root")
    if where == "ssh_config":
        assert "known_hosts" not in opts
        return
    got = opts["known_hosts"]
    assert isinstance(got, asyncssh.SSHKnownHosts)
    assert any(_keys(got.match("gpu001", "", None))) == (where != "missing")
    if where != "missing":
        path = own if where == "inventory" else default
        assert kho._PARSED[str(path)][1] is got
