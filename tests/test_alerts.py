"""Alerts: once per appearance with hysteresis, and a hook run without a shell."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from probes.analysis.alerts import Alert, AlertPolicy, AlertTracker
from probes.analysis.findings import Finding
from probes.analysis.hook import run_hook
from probes.triage import Severity, Step


def hot(host: str = "gpu017", gpu: int = 3, sev: Severity = Severity.WARNING) -> Finding:
    return Finding(Step.GPU, "temp-near-slowdown", sev, "GPU3 at 88 °C (slowdown 90 °C)", host,
                   gpu=gpu, ts=100.0, action="check airflow")


def test_a_finding_alerts_once_while_it_stays() -> None:
    t = AlertTracker()
    assert [a.finding.host for a in t.update([hot()], 0.0)] == ["gpu017"]
    for s in range(1, 50):
        assert t.update([hot()], float(s)) == []
    assert t.active == 1


def test_a_flapping_finding_does_not_spam() -> None:
    t = AlertTracker(AlertPolicy(clear_after_s=120.0))
    raised = 0
    for s in range(0, 600, 10):
        present = (s // 10) % 2 == 0  # there, gone, there, gone … every 10 s
        raised += len(t.update([hot()] if present else [], float(s)))
    assert raised == 1
    # gone for longer than clear_after_s: it clears, and a return alerts again
    assert t.update([], 800.0) == []
    assert t.active == 0
    assert len(t.update([hot()], 801.0)) == 1


def test_severity_floor_and_distinct_incidents() -> None:
    t = AlertTracker(AlertPolicy(min_severity=Severity.WARNING))
    info = hot(sev=Severity.INFO)
    assert t.update([info], 0.0) == []
    got = t.update([hot(gpu=1), hot(gpu=2), hot(host="gpu018", gpu=1)], 1.0)
    assert len(got) == 3


def test_the_hook_gets_json_on_stdin_and_environment(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, os, sys\n"
        "doc = json.load(sys.stdin)\n"
        "doc['env'] = {k: v for k, v in os.environ.items() if k.startswith('RIGWATCH_')}\n"
        f"open({str(out)!r}, 'w').write(json.dumps(doc))\n"
        "print('paged')\n")
    # a summary with shell metacharacters reaches the hook as data, never as a command
    f = Finding(Step.SYSLOG, "xid", Severity.CRITICAL, "Xid 79; rm -rf / $(reboot) `id`",
                "gpu017", gpu=3, xid=79, ts=5.0)
    result = asyncio.run(run_hook([sys.executable, str(script)], Alert(f, 9.0), 10.0))
    assert result.ok and result.output == "paged"
    doc = json.loads(out.read_text())
    assert doc["code"] == "xid" and doc["xid"] == 79 and doc["summary"] == f.summary
    assert doc["env"]["RIGWATCH_SUMMARY"] == f.summary
    assert doc["env"]["RIGWATCH_GPU"] == "3" and doc["env"]["RIGWATCH_SEVERITY"] == "critical"


def test_a_hung_missing_or_failing_hook_is_reported_not_raised(tmp_path: Path) -> None:
    alert = Alert(hot(), 0.0)
    hung = asyncio.run(run_hook([sys.executable, "-c", "import time; time.sleep(30)"],
                                alert, 0.5))
    assert hung.returncode is None and "did not finish within 0.5 s" in (hung.error or "")
    missing = asyncio.run(run_hook([str(tmp_path / "nope")], alert, 5.0))
    assert missing.returncode is None and "cannot run" in (missing.error or "")
    failing = asyncio.run(run_hook([sys.executable, "-c", "import sys; sys.exit(3)"],
                                   alert, 5.0))
    assert failing.returncode == 3 and not failing.ok
