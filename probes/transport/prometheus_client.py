"""A small asyncio HTTP client for the Prometheus query API (``/api/v1/query[_range]``).

Stdlib streams and ``ssl`` only: a console on a bastion needs no HTTP stack for three
POSTs, and a heavyweight client (pandas, requests) would cost more than the queries.  The
same API is served by VictoriaMetrics and Thanos Query, so this reads them too.

Every request is one connection (``Connection: close``): a refresh sends a handful of
queries, and a dropped keep-alive connection would only add a retry path.  Responses are
decoded by ``msgspec`` into typed structs; values arrive as strings (``"1000"``, ``"NaN"``).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import msgspec

from probes.errors import TransportError

DEFAULT_TIMEOUT_S = 30.0
MAX_RESPONSE_BYTES = 1 << 30
"""A 10,000-host fleet's widest answer is tens of MiB; this bounds a server gone wrong."""
MAX_HEAD_BYTES = 64 * 1024


class PrometheusError(TransportError):
    """The Prometheus API cannot be reached, refused the query, or answered garbage."""


@dataclass(frozen=True)
class PromEndpoint:
    """Where the query API is and how to be let in."""

    url: str
    """Base URL, e.g. ``http://127.0.0.1:9090`` or ``https://prom.example/prometheus``."""
    bearer_token: str | None = None
    ca_file: str | None = None
    """A CA bundle to trust for ``https`` instead of the system's."""
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_options(cls, url: str, bearer_token_file: str | None = None,
                     ca_file: str | None = None) -> PromEndpoint:
        """The endpoint the command line names; the token is read from its file now.

        Raises:
            PrometheusError: the URL is not http(s) or the token file cannot be read.
        """
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PrometheusError(f"not an http(s) URL: {url!r}")
        token = None
        if bearer_token_file is not None:
            try:
                token = Path(bearer_token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise PrometheusError(f"{bearer_token_file}: cannot read the bearer token: "
                                      f"{exc.strerror or exc}") from None
            if not token or any(c in token for c in "\r\n"):
                raise PrometheusError(f"{bearer_token_file}: not a one-line bearer token")
        return cls(url.rstrip("/"), token, ca_file)


class VectorItem(msgspec.Struct, frozen=True):
    """One series of an instant query: its labels and ``[time, "value"]``."""

    metric: dict[str, str]
    value: tuple[float, str]


class MatrixItem(msgspec.Struct, frozen=True):
    """One series of a range query: its labels and every ``[time, "value"]``."""

    metric: dict[str, str]
    values: list[tuple[float, str]]


class _VectorData(msgspec.Struct):
    resultType: str
    result: list[VectorItem]


class _MatrixData(msgspec.Struct):
    resultType: str
    result: list[MatrixItem]


class _Vector(msgspec.Struct):
    status: str
    data: _VectorData | None = None
    error: str | None = None


class _Matrix(msgspec.Struct):
    status: str
    data: _MatrixData | None = None
    error: str | None = None


class _Failure(msgspec.Struct):
    status: str = ""
    errorType: str = ""
    error: str = ""


class _LabelValues(msgspec.Struct):
    status: str
    data: list[str] = []
    error: str | None = None


_LABEL_VALUES = msgspec.json.Decoder(_LabelValues)
_VECTOR = msgspec.json.Decoder(_Vector)
_MATRIX = msgspec.json.Decoder(_Matrix)
_FAILURE = msgspec.json.Decoder(_Failure)


def number(text: str) -> float | None:
    """A sample value as Prometheus writes it; None for NaN (a stale or absent reading)."""
    try:
        v = float(text)
    except ValueError:
        return None
    return None if v != v else v


class PromClient:
    """Queries one Prometheus; each call is one HTTP request.  ``queries`` counts them."""

    def __init__(self, endpoint: PromEndpoint) -> None:
        self.endpoint = endpoint
        parts = urllib.parse.urlsplit(endpoint.url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/")
        self._ssl: ssl.SSLContext | None = None
        if self._tls:
            self._ssl = ssl.create_default_context(cafile=endpoint.ca_file)
        self.queries = 0
        """HTTP requests sent so far (the bench prints them per refresh)."""
        self.bytes_read = 0

    async def query(self, promql: str, at: float | None = None) -> list[VectorItem]:
        """An instant query's series (``resultType`` vector) at time ``at`` (None: now)."""
        form = {"query": promql}
        if at is not None:
            form["time"] = f"{at:.3f}"
        body = await self._post("/api/v1/query", form)
        try:
            got = _VECTOR.decode(body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a vector answer to {promql!r}: {exc}") from None
        if got.status != "success" or got.data is None:
            raise PrometheusError(f"query {promql!r} failed: {got.error or got.status}")
        return got.data.result

    async def query_body(self, promql: str, at: float | None = None) -> bytes:
        """An instant query's answer as sent, for a caller with its own decoder (the
        per-GPU answers of a refresh, ``prometheus_rows``)."""
        form = {"query": promql}
        if at is not None:
            form["time"] = f"{at:.3f}"
        return await self._post("/api/v1/query", form)

    async def query_range_body(self, promql: str, start: float, end: float,
                               step_s: float) -> bytes:
        """A range query's answer as sent (see ``query_body``)."""
        return await self._post("/api/v1/query_range", {
            "query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
            "step": f"{step_s:g}"})

    async def _vector(self, body: bytes, promql: str) -> list[VectorItem]:
        try:
            got = _VECTOR.decode(body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a vector answer to {promql!r}: {exc}") from None
        if got.status != "success" or got.data is None:
            raise PrometheusError(f"query {promql!r} failed: {got.error or got.status}")
        return got.data.result

    async def query_range(self, promql: str, start: float, end: float,
                          step_s: float) -> list[MatrixItem]:
        """A range query's series (``resultType`` matrix) from ``start`` to ``end``."""
        form = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                "step": f"{step_s:g}"}
        body = await self._post("/api/v1/query_range", form)
        try:
            got = _MATRIX.decode(body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a matrix answer to {promql!r}: {exc}") from None
        if got.status != "success" or got.data is None:
            raise PrometheusError(f"query_range {promql!r} failed: {got.error or got.status}")
        return got.data.result

    async def label_values(self, label: str, match: str, start: float, end: float
                           ) -> list[str]:
        """Values of ``label`` among series matching ``match`` in [start, end]: read from
        the index, not by evaluating the series (``/api/v1/label/<name>/values``)."""
        body = await self._post(f"/api/v1/label/{urllib.parse.quote(label)}/values",
                                {"match[]": match, "start": f"{start:.3f}",
                                 "end": f"{end:.3f}"}, method="GET")
        try:
            got = _LABEL_VALUES.decode(body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a label-values answer: {exc}") from None
        if got.status != "success":
            raise PrometheusError(f"label values of {label} failed: {got.error or got.status}")
        return got.data

    async def _post(self, path: str, form: dict[str, str], method: str = "POST") -> bytes:
        """POST a form (long selectors do not fit a URL) and return a 2xx body.

        Raises:
            PrometheusError: no connection, a timeout, an HTTP error or a malformed answer.
        """
        self.queries += 1
        try:
            return await asyncio.wait_for(self._exchange(path, form, method),
                                          self.endpoint.timeout_s)
        except asyncio.TimeoutError:
            raise PrometheusError(f"{self.endpoint.url}: no answer within "
                                  f"{self.endpoint.timeout_s:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise PrometheusError(f"{self.endpoint.url}: {exc.strerror or exc}"
                                  if isinstance(exc, OSError) and exc.strerror
                                  else f"{self.endpoint.url}: {exc}") from None

    async def _exchange(self, path: str, form: dict[str, str], method: str) -> bytes:
        body = "&".join(f"{_quoted(k)}={_quoted(v)}" for k, v in form.items()).encode()
        target = f"{self._prefix}{path}"
        if method == "GET":  # the label-values endpoint takes no form
            target, body = f"{target}?{body.decode()}", b""
        head = [f"{method} {target} HTTP/1.1", f"Host: {self._host}:{self._port}",
                "Content-Type: application/x-www-form-urlencoded",
                f"Content-Length: {len(body)}", "Accept: application/json",
                "Accept-Encoding: identity", "Connection: close", "User-Agent: rigwatch"]
        if self.endpoint.bearer_token:
            head.append(f"Authorization: Bearer {self.endpoint.bearer_token}")
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=self._ssl, limit=MAX_HEAD_BYTES,
            server_hostname=self._host if self._tls else None)
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            status, headers = await _read_head(reader)
            payload = await _read_body(reader, headers)
        finally:
            writer.close()
        self.bytes_read += len(payload)
        if not 200 <= status < 300:
            raise PrometheusError(f"{self.endpoint.url}{path}: HTTP {status}: "
                                  f"{_failure_text(payload)}")
        return payload


def _failure_text(payload: bytes) -> str:
    """The API's own error text where it sent one (a 400 for bad PromQL says what)."""
    try:
        failure = _FAILURE.decode(payload)
        if failure.error:
            return failure.error[:300]
    except msgspec.DecodeError:
        pass
    return payload[:200].decode("utf-8", "replace").strip() or "no text"


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        raise PrometheusError("the server closed the connection or sent an over-long "
                              "header") from None
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise PrometheusError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader)
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit() or int(length) > MAX_RESPONSE_BYTES:
            raise PrometheusError(f"bad or too large Content-Length: {length[:20]!r}")
        try:
            return await reader.readexactly(int(length))
        except asyncio.IncompleteReadError:
            raise PrometheusError("the answer was cut short") from None
    data = await reader.read(MAX_RESPONSE_BYTES + 1)
    if len(data) > MAX_RESPONSE_BYTES:
        raise PrometheusError("the answer is too large")
    return data


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    try:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # trailers are never sent by Prometheus
                return b"".join(parts)
            total += size
            if total > MAX_RESPONSE_BYTES:
                raise PrometheusError("the answer is too large")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        raise PrometheusError("the chunked answer was malformed or cut short") from None


@lru_cache(maxsize=512)
def _quoted(text: str) -> str:
    """A form field quoted once: a shard's selector (tens of KB at 10,000 hosts) goes out
    unchanged in every read, and quoting it each time was a tenth of a read's CPU."""
    return urllib.parse.quote_plus(text)
