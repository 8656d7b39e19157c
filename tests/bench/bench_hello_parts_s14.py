"""A hello's typed decode, before and after its PCIe chains, NICs and GPUs were decoded once per
text (issue 38 start-up, session 14): what each host's hello costs a collector.

The agent simulator's 16 hellos (``bench_ingest.template``), host *i* replaying template
*i mod 16* under its own name and with its own NIC GUIDs (as a real fleet's HCAs have),
parsed once; per pass every host's parsed hello goes through ``_decode_hello``, the
reference copy (``tests/wire/decode_fields_before_s14``) and the new one alternating, the
new one's cache emptied before each of its passes (a collector decodes a hello once per
connection: each model's first host pays the whole decode).  CPU (``process_time``) per
host of each pass, pairs printed; the last line is JSON.

    python tests/bench/bench_hello_parts_s14.py [--hosts 1024] [--pairs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import orjson

from probes.wire import decode_fields
from tests.bench.bench_ingest import template
from tests.wire import decode_fields_before_s14 as before


def _hellos(hosts: int) -> list[dict[str, Any]]:
    temps = [orjson.loads(template(k, 1)[1][0]) for k in range(min(hosts, 16))]
    out = []
    for i in range(hosts):
        obj = dict(temps[i % len(temps)])
        obj["host"] = dict(obj["host"], hostname=f"h{i:04d}")
        obj["nics"] = [dict(n, node_guid=f"a088:c203:{i:04x}:{k:04x}") if "node_guid" in n
                       else n for k, n in enumerate(obj["nics"])]
        out.append(obj)
    return out


def _pass(decode: Any, hellos: list[dict[str, Any]]) -> float:
    t0 = time.process_time()
    for obj in hellos:
        decode(obj)
    return (time.process_time() - t0) / len(hellos) * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--pairs", type=int, default=7)
    args = p.parse_args()
    hellos = _hellos(args.hosts)
    _pass(before._decode_hello, hellos)  # the shared table warm for both
    pairs = []
    for k in range(args.pairs):
        decode_fields._parts.clear()
        if k % 2:
            new = _pass(decode_fields._decode_hello, hellos)
            old = _pass(before._decode_hello, hellos)
        else:
            old = _pass(before._decode_hello, hellos)
            decode_fields._parts.clear()
            new = _pass(decode_fields._decode_hello, hellos)
        pairs.append((old, new))
        print(f"pair {k + 1}: before {old:.1f} us/host, after {new:.1f} us/host")
    print(json.dumps({"bench": "hello_parts_s14", "hosts": args.hosts,
                      "before_us": [round(a, 1) for a, _ in pairs],
                      "after_us": [round(b, 1) for _, b in pairs],
                      "lower": sum(b < a for a, b in pairs),
                      "before_p50": round(statistics.median(a for a, _ in pairs), 1),
                      "after_p50": round(statistics.median(b for _, b in pairs), 1)}))


if __name__ == "__main__":
    main()
