"""Prefix peeling: what launchers and collectors glue on comes off, message text stays."""

from __future__ import annotations

import pytest

from probes.rules.logrules.lines import peel

ASSERT = ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: operator(): block: [0,0,0], "
          "thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.")


@pytest.mark.parametrize(("line", "text", "host", "rank", "time"), [
    # a source file and line number is the message, not a grep file name plus an srun label
    (ASSERT, ASSERT, None, None, None),
    ("[rank3]:" + ASSERT, ASSERT, None, 3, None),
    ("gpu017: /opt/train/model.py:87: UserWarning: x", "/opt/train/model.py:87: UserWarning: x",
     "gpu017", None, None),
    ("/src/kernels/attn.cuh:12: void k(): block: [1,0,0]", "/src/kernels/attn.cuh:12: void k(): "
     "block: [1,0,0]", None, None, None),
    # grep over rotated logs still peels the file name
    ("/var/log/syslog.1:Jun 21 14:02:19 node7 kernel: [4187.5] NVRM: Xid", "NVRM: Xid", "node7",
     None, "Jun 21 14:02:19"),
    ("kern.log:Jun 21 14:02:19 node7 kernel: msg", "msg", "node7", None, "Jun 21 14:02:19"),
    # an srun label before a log's own time
    ("13: 2025-11-08 03:17:44,552 loss nan", "loss nan", None, 13, "2025-11-08 03:17:44,552"),
    ("198.51.100.23: 198.51.100.23: [rank3]: boom", "boom", "198.51.100.23", 3, None),
])
def test_peel(line: str, text: str, host: str | None, rank: int | None, time: str | None) -> None:
    assert peel(line) == (text, host, rank, time)
