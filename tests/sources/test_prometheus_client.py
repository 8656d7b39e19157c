"""The Prometheus HTTP client against a small asyncio server speaking the API's wire shapes:
the bearer token and the form it sends, a chunked answer, the API's own error text, TLS
with ``--ca-file``.  Bodies are copied from Prometheus 2.42's ``/api/v1/query`` answers
(values as strings, ``NaN`` for a missing reading; errors as ``status: error``)."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import urllib.parse
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from probes.sources.prometheus.client import PromClient, PromEndpoint, PrometheusError, number

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"Hostname": "gpu-a01", "gpu": "0", "instance": "10.0.0.1:9400"},
     "value": [1733300000.123, "61234"]},
    {"metric": {"Hostname": "gpu-a01", "gpu": "1", "instance": "10.0.0.1:9400"},
     "value": [1733300000.123, "NaN"]}]}}
BAD = {"status": "error", "errorType": "bad_data",
       "error": 'invalid parameter "query": 1:4: parse error: unexpected end of input'}

Handler = Callable[[str, dict[str, str], dict[str, str]], tuple[int, bytes, bool]]
"""(path, headers, form) -> (status, body, chunked)."""


async def _serve(handler: Handler, tls: ssl.SSLContext | None = None
                 ) -> AsyncIterator[int]:
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        path = head[0].split()[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (h.partition(":") for h in head[1:] if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        form = dict(urllib.parse.parse_qsl(body.decode()))
        status, payload, chunked = handler(path, headers, form)
        out = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        if chunked:
            half = len(payload) // 2
            parts = [payload[:half], payload[half:]]
            data = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) \
                + b"0\r\n\r\n"
            out += "Transfer-Encoding: chunked\r\n\r\n"
        else:
            data = payload
            out += f"Content-Length: {len(payload)}\r\n\r\n"
        writer.write(out.encode() + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(one, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_query_sends_the_token_and_a_form_and_reads_a_chunked_answer(
        tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, str], dict[str, str]]] = []

    def handler(path: str, headers: dict[str, str], form: dict[str, str]
                ) -> tuple[int, bytes, bool]:
        seen.append((path, headers, form))
        return 200, json.dumps(VECTOR).encode(), True

    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    async for port in _serve(handler):
        ep = PromEndpoint.from_options(f"http://127.0.0.1:{port}/prom/", str(token))
        client = PromClient(ep)
        got = await client.query('max by (Hostname, instance, gpu) (DCGM_FI_DEV_FB_USED)',
                                 at=1733300000.0)
    path, headers, form = seen[0]
    assert path == "/prom/api/v1/query"
    assert headers["authorization"] == "Bearer s3cret-token"
    assert form == {"query": "max by (Hostname, instance, gpu) (DCGM_FI_DEV_FB_USED)",
                    "time": "1733300000.000"}
    assert [i.metric["gpu"] for i in got] == ["0", "1"]
    assert number(got[0].value[1]) == 61234.0 and number(got[1].value[1]) is None
    assert client.queries == 1


async def test_the_apis_own_error_text_is_what_the_operator_reads() -> None:
    async for port in _serve(lambda *_: (400, json.dumps(BAD).encode(), False)):
        client = PromClient(PromEndpoint(f"http://127.0.0.1:{port}"))
        with pytest.raises(PrometheusError, match="HTTP 400: invalid parameter"):
            await client.query("max by (")


async def test_nothing_listening_is_a_prometheus_error_not_a_traceback() -> None:
    from tests.support.sshd import free_port

    client = PromClient(PromEndpoint(f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(PrometheusError, match=r"127\.0\.0\.1"):
        await client.query("up")


def test_bad_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PrometheusError, match="not an http"):
        PromEndpoint.from_options("ftp://x")
    with pytest.raises(PrometheusError, match="cannot read the bearer token"):
        PromEndpoint.from_options("http://x", str(tmp_path / "none"))
    two = tmp_path / "two"
    two.write_text("a\nb\n")
    with pytest.raises(PrometheusError, match="one-line"):
        PromEndpoint.from_options("http://x", str(two))


async def test_https_with_a_ca_file(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    async for port in _serve(lambda *_: (200, json.dumps(VECTOR).encode(), False), tls):
        url = f"https://127.0.0.1:{port}"
        got = await PromClient(PromEndpoint.from_options(url, ca_file=str(cert))).query("x")
        assert len(got) == 2
        with pytest.raises(PrometheusError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await PromClient(PromEndpoint.from_options(url)).query("x")


async def test_a_prometheus_that_fails_mid_run_is_a_source_fault_told_once() -> None:
    """Discovery answers, then every query gets a 503: each host is told, once, that the
    source is down (not that it is), and the source keeps retrying at its refresh instead
    of ending."""
    from probes.errors import WatcherFault
    from probes.sources.prometheus.fields import IDENTITY_LABELS
    from probes.sources.prometheus.source import PromFleetOptions, PromFleetSource
    from probes.wire.events import SourceHealth

    ids = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"Hostname": h, "instance": f"{h}:9400", "gpu": "0",
                    "UUID": f"GPU-{h}", "pci_bus_id": "00000000:18:00.0"},
         "value": [1733300000.0, "1"]} for h in ("gpu-a01", "gpu-a02")]}}
    names = {"status": "success", "data": ["DCGM_FI_DEV_FB_USED"]}
    calls: list[str] = []

    def handler(path: str, headers: dict[str, str], form: dict[str, str]
                ) -> tuple[int, bytes, bool]:
        calls.append(path)
        if "/label/" in path:
            return 200, json.dumps(names).encode(), False
        if "group by" in form.get("query", ""):
            assert all(lab in form["query"] for lab in IDENTITY_LABELS)
            return 200, json.dumps(ids).encode(), False
        return 503, b"Service Unavailable", False

    got: list[tuple[str, object]] = []
    async for port in _serve(handler):
        opts = PromFleetOptions(PromEndpoint(f"http://127.0.0.1:{port}"), refresh_s=0.05,
                                history_s=0)
        task = asyncio.create_task(PromFleetSource(opts).run(lambda h, i: got.append((h, i))))
        for _ in range(200):
            await asyncio.sleep(0.02)
            if sum("query" in c for c in calls) >= 4:
                break
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    downs = [(h, i) for h, i in got if isinstance(i, SourceHealth)]
    assert sorted(h for h, _ in downs) == ["gpu-a01", "gpu-a02"]  # told once, not per retry
    assert all(i.fault is WatcherFault.SOURCE_DOWN and i.source == "prometheus"
               and "HTTP 503" in i.reason for _, i in downs)
    assert sum("query" in c for c in calls) >= 4  # retried, not given up
