"""The console's collector settings: applied process-wide, so checked in a child process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO
from tui.gc_policy import STREAMING_THRESHOLDS


def test_streaming_settings_freeze_start_up_and_raise_the_thresholds() -> None:
    code = ("import gc, json; from tui.gc_policy import tune_for_streaming; "
            "before = tune_for_streaming(); "
            "print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count()]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    before, after, frozen = json.loads(out)
    assert tuple(after) == STREAMING_THRESHOLDS != tuple(before)
    assert frozen > 1000  # the interpreter's and the imported modules' objects
