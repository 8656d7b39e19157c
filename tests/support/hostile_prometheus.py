"""A hostile Prometheus: the query API's shapes, with the variants the security review of
2026-12-06 served (P2, P3, P4, P6, P11) on 127.0.0.1.

It runs as its own process (``hostile_prometheus()`` starts and stops it by pid), so a test
measures the client's memory, not the server's.  The variant is the URL's first path
segment: ``http://127.0.0.1:PORT/inf`` serves the ``inf`` fleet, and rigwatch's client keeps
a base URL's path as a prefix, so one server serves every variant.

The fleet is four hosts ``gpu-p01``..``gpu-p04`` of two GPUs each, labelled as
dcgm-exporter labels them (``Hostname``, ``gpu``, ``UUID``, ``pci_bus_id``, ``modelName``);
bodies follow Prometheus 2.42's ``/api/v1/query``, ``query_range`` and label-values answers
(values as strings).  Variants:

``normal``        a healthy fleet.
``inf``           ``+Inf`` in ``DCGM_FI_DEV_XID_ERRORS`` of gpu-p01 GPU 0 (now and in the last
                  point of its history), ``-Inf`` in its PCIe replay counter, ``-5`` in
                  gpu-p02's memory used, 2**53 + 2 in a remapped-rows counter.
``big``           every query answered with 1,000,000 series (chunked, as generated).
``big_values``    the fleet listed normally, every per-GPU answer with 1,000,000 series.
``endless``       every per-GPU answer a chunked body that never ends.
``http10``        HTTP/1.0 answers with no Content-Length, written in three parts.
``surrogate``     a lone ``\\ud800`` escape in gpu-p01's UUID and one label of its values.
``errtext``       the fleet listed, every read refused (HTTP 400) with markup, OSC 0/52
                  and CSI 2J in the API's ``error`` text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

HOSTS = tuple(f"gpu-p0{i}" for i in range(1, 5))
GPUS = 2
HOSTILE = "[@click=app.quit]Q[/]\x1b]0;PWNED-TITLE\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J"
METRICS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL",
           "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
           "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
           "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
           "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
           "DCGM_FI_DEV_XID_ERRORS")
VALUE = {"DCGM_FI_DEV_FB_USED": "61234", "DCGM_FI_DEV_FB_FREE": "20000",
         "DCGM_FI_DEV_GPU_UTIL": "97", "DCGM_FI_DEV_GPU_TEMP": "66",
         "DCGM_FI_DEV_POWER_USAGE": "615.9", "DCGM_FI_DEV_SM_CLOCK": "1980",
         "DCGM_FI_DEV_MEM_CLOCK": "2619", "DCGM_FI_DEV_MEMORY_TEMP": "72"}
BIG_SERIES = 1_000_000
_METRIC = re.compile(r"DCGM_FI_[A-Z_]+")


def _labels(host: int, gpu: int, identity: bool) -> dict[str, str]:
    name = HOSTS[host]
    out = {"Hostname": name, "instance": f"10.0.0.{host + 1}:9400", "gpu": str(gpu)}
    if identity:
        out.update(UUID=f"GPU-{host:04d}{gpu:04d}-aaaa-bbbb-cccc-000000000000",
                   pci_bus_id=f"00000000:{0x18 + gpu:02X}:00.0",
                   modelName="NVIDIA H100 80GB HBM3", DCGM_FI_DRIVER_VERSION="550.90.07")
    return out


def _value(metric: str, host: int, gpu: int, mode: str, last: bool) -> str:
    if mode == "inf" and host == 0 and gpu == 0:
        if metric == "DCGM_FI_DEV_XID_ERRORS" and last:
            return "+Inf"
        if metric == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER":
            return "-Inf"
    if mode == "inf" and host == 1 and gpu == 0 and metric == "DCGM_FI_DEV_FB_USED":
        return "-5"
    if mode == "inf" and host == 2 and metric == "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":
        return str(2 ** 53 + 2)
    return VALUE.get(metric, "0")


def _series_json(labels: dict[str, str], tail: str) -> str:
    text = json.dumps({"metric": labels}, separators=(",", ":"))[:-1]
    return f"{text},{tail}}}"


def _answer(path: str, form: dict[str, str], mode: str) -> Iterator[bytes]:
    """The body's parts (one part for a small answer; many for a big or endless one)."""
    if path.endswith("/values"):
        yield json.dumps({"status": "success", "data": list(METRICS)}).encode()
        return
    query = form.get("query", "")
    identity = query.startswith("group by")
    metric = (_METRIC.findall(query) or ["DCGM_FI_DEV_FB_USED"])[0]
    ranged = path.endswith("query_range")
    if mode == "endless" and not identity:
        while True:
            yield b"[" * 65536
    head = '{"status":"success","data":{"resultType":"%s","result":[' % (
        "matrix" if ranged else "vector")
    at = float(form.get("time", time.time()))
    if ranged:
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        times = [start + k * step for k in range(int((end - start) / step) + 1)]
    if mode == "big" or (mode == "big_values" and not identity):
        yield head.encode()
        point = f'"values":[[{at:.3f},"1"]]' if ranged else f'"value":[{at:.3f},"1"]'
        chunk = ",".join(_series_json(  # a thousand hosts' series, sent a thousand times
            {"Hostname": f"h{k:07d}", "instance": "10.0.0.1:9400", "gpu": "0"}, point)
            for k in range(1000)).encode()
        for first in range(0, BIG_SERIES, 1000):
            yield chunk + (b"," if first + 1000 < BIG_SERIES else b"")
        yield b"]}}"
        return
    parts = []
    for h in range(len(HOSTS)):
        for g in range(GPUS):
            labels = _labels(h, g, identity)
            if ranged:
                points = ",".join(f'[{t:.3f},"{_value(metric, h, g, mode, k == len(times) - 1)}"]'
                                  for k, t in enumerate(times))
                parts.append(_series_json(labels, f'"values":[{points}]'))
            else:
                value = "1" if identity else _value(metric, h, g, mode, True)
                parts.append(_series_json(labels, f'"value":[{at:.3f},"{value}"]'))
    body = head + ",".join(parts) + "]}}"
    if mode == "surrogate":  # a lone UTF-16 escape, as JSON can spell one
        body = body.replace("GPU-00000000-aaaa", "GPU-\\ud800-aaaa").replace(
            '"instance":"10.0.0.1:9400","gpu":"0"', '"instance":"10.0.0.1:9400\\udc00","gpu":"0"')
    yield body.encode()


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        target = head[0].split()[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (h.partition(":") for h in head[1:] if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        url = urllib.parse.urlsplit(target)
        form = dict(urllib.parse.parse_qsl(body.decode() or url.query))
        mode, _, path = url.path.lstrip("/").partition("/")
        if mode == "errtext" and not path.endswith("/values") and not form.get(
                "query", "").startswith("group by"):  # the fleet is listed; reads refused
            text = json.dumps({"status": "error", "errorType": "bad_data",
                               "error": f"bad {HOSTILE}"}).encode()
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(text) + text)
        elif mode == "http10":
            data = b"".join(_answer(path, form, mode))
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
            third = len(data) // 3 + 1
            for k in range(3):
                writer.write(data[k * third:(k + 1) * third])
                await writer.drain()
                await asyncio.sleep(0.05)
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            for part in _answer(path, form, mode):
                if reader.at_eof() or writer.is_closing():
                    return  # the client refused the answer and closed
                writer.write(b"%x\r\n" % len(part) + part + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the client refused the answer and closed: what a hostile server gets
    finally:
        writer.close()


async def _main(port: int) -> None:
    server = await asyncio.start_server(_serve_one, "127.0.0.1", port)
    print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the test closes stdin
    server.close()


@contextlib.contextmanager
def hostile_prometheus() -> Iterator[str]:
    """Start the server; yield its base URL (add ``/<variant>``); stop it by pid."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.hostile_prometheus"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["port"]
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    asyncio.run(_main(p.parse_args().port))
