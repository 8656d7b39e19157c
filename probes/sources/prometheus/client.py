"""A small asyncio HTTP client for the Prometheus query API (``/api/v1/query[_range]``).

Stdlib streams and ``ssl`` only: a console on a bastion needs no HTTP stack for three
POSTs, and a heavyweight client (pandas, requests) would cost more than the queries.  The
same API is served by VictoriaMetrics and Thanos Query, so this reads them too.

Every request is one connection (``Connection: close``): a refresh sends a handful of
queries, and a dropped keep-alive connection would only add a retry path.  Responses are
decoded by ``msgspec`` into typed structs; values arrive as strings (``"1000"``, ``"NaN"``).

A metrics server's answer is data from elsewhere (the security review of 2026-12-06, P2-P13):
an answer is capped at what the fleet's size needs (:func:`answer_cap`, set by the source
once it knows the fleet) and the bytes of all answers being read count against one budget;
a body without a length is read to its end within the cap; a value that is not a finite
reading in 0..2**53 is no value (:func:`reading`); a lone surrogate escape in one label does
not make the answer unreadable; the server's error text is cleaned before anyone sees it;
and a URL with a user name or password is refused (the client never sends them).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from probes.errors import TransportError
from probes.wire.sanitize import clean_text

DEFAULT_TIMEOUT_S = 30.0
DISCOVERY_MAX_BYTES = 64 << 20
"""The most one answer may be before the fleet's size is known, and for the discovery
queries: 10,000 hosts of 8 GPUs list their identity labels in about 24 MiB."""
SERIES_BYTES = 1024
"""What one series may take in an answer: its labels (a per-GPU answer keeps three, about
90 bytes; identity labels about 300)."""
POINT_BYTES = 48
"""What one ``[time, "value"]`` may take (about 25 bytes)."""
ANSWER_BASE_BYTES = 1 << 20
CONCURRENT_ANSWERS = 4
"""Answers the source reads at once (its queries in flight): the budget of bytes being
read together is this many answers' caps."""
MAX_HEAD_BYTES = 64 * 1024
MAX_READING = float(2 ** 53)
"""The largest value read: beyond it a float no longer holds every integer (an Xid code, a
counter), and no GPU reading comes near it."""


def answer_cap(series: int, points: int = 1) -> int:
    """The most one answer over ``series`` GPU series of ``points`` points each may be.

    The series the fleet is known to have are doubled, and a thousand added, so a fleet
    that grows between two discoveries (every twenty refreshes) is still read: 1,000 hosts
    of 8 GPUs get 17 MiB for an instant answer, 48 MiB for a 32-point history."""
    return ANSWER_BASE_BYTES + (2 * series + 1024) * (SERIES_BYTES + points * POINT_BYTES)


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
            raise PrometheusError(f"not an http(s) URL: {shown_url(url)!r}")
        if parts.username is not None or parts.password is not None:
            # never sent (no basic auth here) and never to be shown: refused outright
            raise PrometheusError(f"{shown_url(url)}: a user name or password in the URL is "
                                  "not used (put a token in --bearer-token-file instead)")
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


class _VectorData(msgspec.Struct):
    resultType: str
    result: list[VectorItem]


class _Vector(msgspec.Struct):
    status: str
    data: _VectorData | None = None
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
_FAILURE = msgspec.json.Decoder(_Failure)


def shown_url(url: str) -> str:
    """``url`` as it may be shown: any ``user:password@`` replaced by ``***@``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return clean_text(url)
    return clean_text(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl())


def reading(v: float) -> float | None:
    """A GPU reading as a value, or None: NaN (stale or absent), ±Inf, a negative number
    (no GPU quantity is) and anything beyond ``MAX_READING`` are no value.  One series'
    bad value then costs that series, never the read (``int(inf)`` stopped every host)."""
    return v if 0.0 <= v <= MAX_READING else None


def number(text: str) -> float | None:
    """A sample value as Prometheus writes it (``"61234"``, ``"NaN"``, ``"+Inf"``), as
    :func:`reading` judges it."""
    try:
        v = float(text)
    except ValueError:
        return None
    return reading(v)


_LONE_SURROGATE = re.compile(
    rb"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _pair_or_replacement(m: re.Match[bytes]) -> bytes:
    return m.group() if m.group(1) else b"\\ufffd"


def decode_lenient(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """``decoder.decode(body)``; an answer refused for a lone UTF-16 surrogate escape (a
    label value ``"\\ud800"``: one series of one exporter) is decoded again with each lone
    escape as U+FFFD, so the rest of the fleet is still read.

    Raises:
        msgspec.DecodeError: the answer is malformed otherwise.
    """
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        if "surrogate" not in str(exc) or b"\\u" not in body:
            raise
    return decoder.decode(_LONE_SURROGATE.sub(_pair_or_replacement, body))


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
        self.series: int | None = None
        """The GPU series the fleet has (``expect``); None until it is known."""
        self.in_flight = 0
        """Bytes of the answers being read now, together."""
        self.most_in_flight = 0
        self._caps: list[int] = []
        """The caps of the answers being read now."""

    def expect(self, series: int) -> None:
        """The fleet has ``series`` GPU series: its answers are capped by that
        (:func:`answer_cap`), not by ``DISCOVERY_MAX_BYTES``."""
        self.series = max(0, series)

    def cap(self, points: int = 1, discovery: bool = False) -> int:
        """The most one answer may be (a range answer of ``points`` points a series)."""
        if discovery or self.series is None:
            return max(DISCOVERY_MAX_BYTES,
                       answer_cap(self.series, points) if self.series is not None else 0)
        return answer_cap(self.series, points)

    @property
    def flight_cap(self) -> int:
        """The most the answers being read together may hold: as many answers as the
        source reads at once, each at the largest cap among those being read."""
        return CONCURRENT_ANSWERS * max(self._caps, default=self.cap())

    async def query(self, promql: str, at: float | None = None) -> list[VectorItem]:
        """An instant query's series (``resultType`` vector) at time ``at`` (None: now).
        Read with the discovery cap: it lists the fleet (the identity labels)."""
        form = {"query": promql}
        if at is not None:
            form["time"] = f"{at:.3f}"
        body = await self._post("/api/v1/query", form, cap=self.cap(discovery=True))
        return self._vector(body, promql)

    async def query_body(self, promql: str, at: float | None = None) -> bytes:
        """An instant query's answer as sent, for a caller with its own decoder (the
        per-GPU answers of a refresh, ``prometheus_rows``)."""
        form = {"query": promql}
        if at is not None:
            form["time"] = f"{at:.3f}"
        return await self._post("/api/v1/query", form, cap=self.cap())

    async def query_range_body(self, promql: str, start: float, end: float,
                               step_s: float) -> bytes:
        """A range query's answer as sent (see ``query_body``)."""
        points = int((end - start) / step_s) + 1 if step_s > 0 else 1
        return await self._post("/api/v1/query_range", {
            "query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
            "step": f"{step_s:g}"}, cap=self.cap(max(1, points)))

    def _vector(self, body: bytes, promql: str) -> list[VectorItem]:
        try:
            got = decode_lenient(_VECTOR, body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a vector answer to {promql!r}: {exc}") from None
        if got.status != "success" or got.data is None:
            raise PrometheusError(f"query {promql!r} failed: "
                                  f"{clean_text(got.error or got.status)[:300]}")
        result: list[VectorItem] = got.data.result
        return result

    async def label_values(self, label: str, match: str, start: float, end: float
                           ) -> list[str]:
        """Values of ``label`` among series matching ``match`` in [start, end]: read from
        the index, not by evaluating the series (``/api/v1/label/<name>/values``)."""
        body = await self._post(f"/api/v1/label/{urllib.parse.quote(label)}/values",
                                {"match[]": match, "start": f"{start:.3f}",
                                 "end": f"{end:.3f}"}, method="GET",
                                cap=self.cap(discovery=True))
        try:
            got = decode_lenient(_LABEL_VALUES, body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a label-values answer: {exc}") from None
        if got.status != "success":
            raise PrometheusError(f"label values of {label} failed: "
                                  f"{clean_text(got.error or got.status)[:300]}")
        return [clean_text(v) for v in got.data]

    async def _post(self, path: str, form: dict[str, str], method: str = "POST",
                    cap: int = DISCOVERY_MAX_BYTES) -> bytes:
        """POST a form (long selectors do not fit a URL) and return a 2xx body of at most
        ``cap`` bytes.

        Raises:
            PrometheusError: no connection, a timeout, an HTTP error, an answer over its
                cap (or over the bytes all answers being read may hold), or malformed.
        """
        self.queries += 1
        held = [0]
        self._caps.append(cap)
        try:
            return await asyncio.wait_for(self._exchange(path, form, method, cap, held),
                                          self.endpoint.timeout_s)
        except asyncio.TimeoutError:
            raise PrometheusError(f"{self.endpoint.url}: no answer within "
                                  f"{self.endpoint.timeout_s:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise PrometheusError(f"{self.endpoint.url}: {exc.strerror or exc}"
                                  if isinstance(exc, OSError) and exc.strerror
                                  else f"{self.endpoint.url}: {exc}") from None
        finally:
            self.in_flight -= held[0]
            self._caps.remove(cap)

    def _hold(self, held: list[int], n: int, cap: int) -> None:
        """Count ``n`` more bytes of an answer; refuse it past its cap, or when the answers
        being read together would hold more than ``flight_cap``."""
        held[0] += n
        self.in_flight += n
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if held[0] > cap:
            raise PrometheusError(self._too_large(cap))
        if self.in_flight > self.flight_cap:
            raise PrometheusError(f"the answers being read hold over "
                                  f"{self.flight_cap / 2**20:.0f} MiB together, more than "
                                  f"{self._fleet_text()} need: refused")

    def _too_large(self, cap: int) -> str:
        return (f"an answer over {cap / 2**20:.1f} MiB, more than {self._fleet_text()} "
                "need: refused (a Prometheus gone wrong, or a match that selects more than "
                "one fleet)")

    def _fleet_text(self) -> str:
        return ("a fleet of unknown size may" if self.series is None
                else f"{self.series} GPU series")

    async def _exchange(self, path: str, form: dict[str, str], method: str, cap: int,
                        held: list[int]) -> bytes:
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
            payload = await self._read_body(reader, headers, cap, held)
        finally:
            writer.close()
        self.bytes_read += len(payload)
        if not 200 <= status < 300:
            raise PrometheusError(f"{self.endpoint.url}{path}: HTTP {status}: "
                                  f"{_failure_text(payload)}")
        return payload

    async def _read_body(self, reader: asyncio.StreamReader, headers: dict[str, str],
                         cap: int, held: list[int]) -> bytes:
        """The body: by its chunks, by its length, or (HTTP/1.0, a proxy) to its end."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return await self._read_chunked(reader, cap, held)
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit() or len(length) > 18:
                raise PrometheusError(f"bad Content-Length: {clean_text(length[:20])!r}")
            self._hold(held, int(length), cap)
            try:
                return await reader.readexactly(int(length))
            except asyncio.IncompleteReadError:
                raise PrometheusError("the answer was cut short") from None
        parts: list[bytes] = []
        while part := await reader.read(1 << 16):
            self._hold(held, len(part), cap)
            parts.append(part)
        return b"".join(parts)

    async def _read_chunked(self, reader: asyncio.StreamReader, cap: int,
                            held: list[int]) -> bytes:
        parts: list[bytes] = []
        try:
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")  # trailers are never sent by Prometheus
                    return b"".join(parts)
                self._hold(held, size, cap)  # before the chunk is read
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            raise PrometheusError("the chunked answer was malformed or cut short") from None


def _failure_text(payload: bytes) -> str:
    """The API's own error text where it sent one (a 400 for bad PromQL says what),
    cleaned: a server's text may hold escapes meant for the operator's terminal."""
    try:
        failure = _FAILURE.decode(payload)
        if failure.error:
            return clean_text(failure.error[:300])
    except msgspec.DecodeError:
        pass
    return clean_text(payload[:200].decode("utf-8", "replace").strip()) or "no text"


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        raise PrometheusError("the server closed the connection or sent an over-long "
                              "header") from None
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if (len(parts) < 2 or not parts[0].startswith("HTTP/") or len(parts[1]) != 3
            or not parts[1].isdigit()):
        raise PrometheusError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


@lru_cache(maxsize=512)
def _quoted(text: str) -> str:
    """A form field quoted once: a shard's selector (tens of KB at 10,000 hosts) goes out
    unchanged in every read, and quoting it each time was a tenth of a read's CPU."""
    return urllib.parse.quote_plus(text)
