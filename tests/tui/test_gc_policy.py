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


REFREEZE = """
import gc, json
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.protocol import MessageReader
from tests.bench.bench_ingest import T0, template
from tui import gc_policy

tuned_before = gc_policy.tuned()
gc_policy.tune_for_streaming()
hello, lines = template(1, 40)[1]
fleet = FleetState([HostSpec(name=f"h{i}", expect_gpus=8) for i in range(32)])
for i in range(32):
    reader = MessageReader()
    for t, chunk in enumerate([hello, *lines]):
        for msg in reader.feed(chunk):
            fleet.apply(f"h{i}", msg, T0 + t)
walked_before = len(gc.get_objects())
frozen = gc_policy.refreeze()
print(json.dumps([tuned_before, gc_policy.tuned(), walked_before, len(gc.get_objects()),
                  frozen]))
"""


def test_a_refreeze_takes_the_fleets_history_out_of_later_collections() -> None:
    """What a fleet builds after start-up (histories, step series, rows) is walked by every
    middle-generation collection until the console freezes again (issue 38: a 100 ms pause
    at 1024 hosts); only a process that took the streaming settings does (never a test
    runner's, where a frozen cycle would outlive its test)."""
    out = subprocess.run([sys.executable, "-c", REFREEZE], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    tuned_before, tuned_after, walked_before, walked_after, frozen = json.loads(out)
    assert tuned_before is False and tuned_after is True
    # 32 hosts' histories: ~570 objects a host since a staged sample is one array (18k in
    # all; over 20k before)
    assert walked_before > 10_000
    assert walked_after < walked_before // 10
    assert frozen > walked_before // 2


def test_this_test_runner_is_not_tuned_so_no_console_here_refreezes() -> None:
    from tui import gc_policy

    assert gc_policy.tuned() is False
