"""Incident reports: content, 0600 files in a 0700 directory, listing and look-up."""

from __future__ import annotations

import json
import re
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from probes.analysis.incident import (
    HostView,
    TriageRecord,
    Verdict,
    all_on_console,
    first_failure,
    review,
)
from probes.outputs.report import (
    ReportError,
    build_report,
    find_report,
    job_sections,
    list_reports,
    write_report,
)
from probes.triage import Step
from tests.analysis.test_incident import T, watchdog, xid79
from tests.support.tui_fakes import T0, hello


def _report(tmp: Path, title: str = "soak run 12") -> tuple[Path, Path]:
    xid = replace(xid79("gpu-t01", T), evidence="NVRM: Xid (PCI:0000:18:00): 79, `x`",
                  context=("nvidia 0000:18:00.0: AER: PCIe Bus Error: severity=Uncorrected",))
    findings = [xid, watchdog("gpu-t02", T + 600)]
    record = TriageRecord()
    record.mark(Step.GPU, Verdict.CLEAR)
    record.mark(Step.SYSLOG, Verdict.SUSPECT)
    record.notes[Step.SYSLOG] = "drained gpu-t01, RMA ticket 4411"
    hosts = [HostView(h, True, 8, "via journalctl", ()) for h in ("gpu-t01", "gpu-t02", "gpu-t03")]
    facts = {h: hello(h).facts for h in ("gpu-t01", "gpu-t02", "gpu-t03")}
    rep = build_report(title, review(findings, hosts, record), first_failure(findings), findings,
                       facts, now=T + 900)
    return write_report(rep, tmp / "reports")


def test_report_files_are_private_and_hold_the_triage(tmp_path: Path) -> None:
    md, js = _report(tmp_path)
    for p in (md, js):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE(md.parent.stat().st_mode) == 0o700
    assert md.name == "20251202T184140Z-soak-run-12.md"
    data = json.loads(js.read_text())
    assert data["version"] == 1 and data["title"] == "soak run 12"
    assert data["first_failure"]["finding"]["code"] == "xid"
    assert data["first_failure"]["consequences"] == 1
    assert data["first_failure"]["critical"] is True
    assert [s["verdict"] for s in data["steps"]] == ["clear", "suspect", "open", "open"]
    assert data["steps"][1]["note"] == "drained gpu-t01, RMA ticket 4411"
    assert [f["host"] for f in data["timeline"]] == ["gpu-t01", "gpu-t02"]
    assert sorted(data["hosts"]) == ["gpu-t01", "gpu-t02"]  # only the hosts involved
    assert data["hosts"]["gpu-t01"]["driver"] == "550.54.15"
    text = md.read_text()
    assert "## 2. System log: suspect" in text
    assert "Operator's note: drained gpu-t01, RMA ticket 4411" in text
    assert text.index("## First failure") < text.index("## 1. GPU state") < text.index(
        "## Timeline") < text.index("## Hosts")
    assert "Xid 79 on gpu-t01 GPU3 at 18:26:40" in text
    # the evidence keeps the line before it, in a block that backquotes cannot break
    assert ("    ~~~\n    nvidia 0000:18:00.0: AER: PCIe Bus Error: severity=Uncorrected\n"
            "    NVRM: Xid (PCI:0000:18:00): 79, 'x'\n    ~~~") in text
    assert data["timeline"][0]["context"] == [
        "nvidia 0000:18:00.0: AER: PCIe Bus Error: severity=Uncorrected"]


def test_a_second_report_never_overwrites_the_first(tmp_path: Path) -> None:
    first, _ = _report(tmp_path)
    second, _ = _report(tmp_path)
    assert first != second and first.exists() and second.exists()
    entries = list_reports(tmp_path / "reports")
    assert len(entries) == 2 and all(e.title == "soak run 12" for e in entries)
    assert find_report("1", tmp_path / "reports") == entries[0].path
    assert find_report(first.stem, tmp_path / "reports") == first


def test_unsafe_titles_become_safe_file_names(tmp_path: Path) -> None:
    md, _ = _report(tmp_path, title="../../etc/passwd; rm -rf /")
    assert md.parent == tmp_path / "reports"
    assert "/" not in md.name[len("20251202T184140Z-"):] and ";" not in md.name


def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the directory should be")
    with pytest.raises(ReportError, match="cannot write the report"):
        _report(tmp_path)


def test_missing_report_and_unreadable_json(tmp_path: Path) -> None:
    where = tmp_path / "reports"
    where.mkdir()
    (where / "broken.json").write_text("{not json")
    (entry,) = list_reports(where)
    assert entry.first_failure.startswith("unreadable")
    with pytest.raises(ReportError, match="no report 'nope'"):
        find_report("nope", where)


def test_report_command_lists_and_prints(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    where = tmp_path / "reports"
    assert main(["report", "--dir", str(where)]) == 0
    assert "no reports in" in capsys.readouterr().err
    md, _ = _report(tmp_path)
    assert main(["report", "--dir", str(where)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("  1  2025-12-02T18:41:40Z  " + md.name) and "Xid 79 on gpu-t01" in out
    assert main(["report", "1", "--dir", str(where)]) == 0
    assert capsys.readouterr().out == md.read_text()
    assert main(["report", "1", "--json", "--dir", str(where)]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "soak run 12"
    assert main(["report", "7", "--dir", str(where)]) == 2
    assert "no report '7'" in capsys.readouterr().err


def test_host_text_in_a_report_is_markdown_escaped(tmp_path: Path) -> None:
    """Issue 18: summaries, facts and evidence quote hosts; none of it becomes Markdown."""
    from probes.outputs.report import _md

    evil = "in [click](https://e.example) **b** <img src=x> | `c` ~~~ &amp;"
    xid = replace(xid79("gpu-t01", T), summary=evil, action=evil,
                  evidence="NVRM: Xid 79 ~~~~ end", context=("~~~", "ctx"))
    facts = {"gpu-t01": replace(hello("gpu-t01").facts, kernel=evil)}
    hosts = [HostView("gpu-t01", True, 8, "via journalctl", ())]
    rep = build_report("t [x](y)", review([xid], hosts, TriageRecord()), first_failure([xid]),
                       [xid], facts, now=T + 900)
    md, _ = write_report(rep, tmp_path / "reports")
    text = md.read_text()
    unescaped = re.sub(r"\\.", "", text)  # what is left once every escaped character goes
    for raw in ("](", "**b", "<img", "`c`", "&amp;"):
        assert raw not in unescaped, raw
    assert _md(evil) in text and "\\[click\\](https://e.example)" in text
    # the fence is longer than any tilde run inside, so "~~~" in a log line cannot close it
    assert "    ~~~~~\n    ~~~\n    ctx\n    NVRM: Xid 79 ~~~~ end\n    ~~~~~" in text


def test_a_report_from_before_sanitising_prints_without_escapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A report on disk (older, or edited) with raw OSC 52 / title / bidi text is printed and
    listed as visible text, never as terminal commands."""
    from tui.cli import main

    where = tmp_path / "reports"
    md, js = _report(tmp_path)
    hostile = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;PWNED\x07\u202e"
    md.write_text(md.read_text() + "\nevidence: " + hostile + "\n")
    data = json.loads(js.read_text())
    data["title"] = "soak " + hostile
    data["first_failure"]["explanation"] = "Xid " + hostile
    js.write_text(json.dumps(data))
    for argv in (["report", "--dir", str(where)], ["report", "1", "--dir", str(where)]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\\x1b]52;c;ZWNobyBwd25lZA==" in out


def test_demo_report_is_fit_for_an_rma_ticket(tmp_path: Path) -> None:
    """On the demo simulator's data: the failed GPU's facts, onsets, the action, notes,
    every time on the console's clock, and none of the normal-topology noise."""
    from tests.analysis.test_triage_onsets import demo_state, findings
    from tui.views.triage_view import host_clocks, host_view

    fleet = demo_state(45, speed=60.0)
    states = list(fleet.hosts.values())
    raw = findings(fleet)
    written = T0 + 45 * 60.0 / 60.0 + 1.0
    clocks = host_clocks(states, written)
    record = TriageRecord()
    record.mark(Step.SYSLOG, Verdict.SUSPECT)
    record.notes[Step.SYSLOG] = "drained gpu-b02; RMA case 7731 opened"
    shown = all_on_console(raw, clocks)
    facts = {s.name: s.hello.facts for s in states if s.hello is not None}
    rep = build_report("demo", review(shown, [host_view(s) for s in states], record),
                       first_failure(raw, clocks=clocks), shown, facts, now=written)
    md, js = write_report(rep, tmp_path / "reports")
    assert stat.S_IMODE(md.stat().st_mode) == stat.S_IMODE(js.stat().st_mode) == 0o600
    body, data = md.read_text(), json.loads(js.read_text())
    gpu6 = next(g for g in facts["gpu-b02"].gpus if g.index == 6)
    assert gpu6.serial and gpu6.vbios and gpu6.bus_id and gpu6.uuid
    hw = data["hardware"]
    assert [(h["host"], h["gpu"]) for h in hw] == [("gpu-b02", 6)]
    assert (hw[0]["serial"], hw[0]["vbios"], hw[0]["bus_id"], hw[0]["uuid"]) == (
        gpu6.serial, gpu6.vbios, gpu6.bus_id, gpu6.uuid)
    assert (hw[0]["driver"], hw[0]["cuda"]) == ("550.90.07", "12.4")
    assert "xid 79" in hw[0]["findings"] and hw[0]["onset"] == "2023-11-14T22:13:30Z"
    assert (f"**gpu-b02 GPU6**: NVIDIA H100 80GB HBM3, serial {gpu6.serial}, VBIOS "
            f"{gpu6.vbios}, bus {gpu6.bus_id}, UUID {gpu6.uuid}; driver 550.90.07, CUDA 12.4"
            ) in body
    assert "**Do now:** drain gpu-b02, reboot it; RMA GPU6 if it recurs" in body
    assert data["first_failure"]["do_now"] == "drain gpu-b02, reboot it; RMA GPU6 if it recurs"
    assert "Operator's note: drained gpu-b02; RMA case 7731 opened" in body
    assert "topology-cross-numa" not in body and "SYS" not in body.replace("SYSLOG", "")
    # nothing after the report was written: the ×60 simulated clock is mapped back
    stamps = re.findall(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", body)
    assert stamps and max(stamps) == "2023-11-14T22:14:06Z"  # the "Written" line
    # the timeline is in onset order; the watchdog's hang began before it was printed
    timeline = body.split("## Timeline")[1].split("## Hosts")[0]
    assert "(reported 2023-11-14T22:13:45Z)" in timeline  # printed at agent 1500 s
    times = re.findall(r"^- (\S+)", timeline, re.M)
    assert times == sorted(times)
    for f in data["timeline"]:
        assert f["onset"] <= f["time"] <= "2023-11-14T22:14:06Z"


def test_a_host_down_from_the_start_is_listed_without_facts(tmp_path: Path) -> None:
    from probes.analysis.findings import Finding
    from probes.triage import Severity

    down = Finding(Step.GPU, "host-unreachable", Severity.CRITICAL, "DOWN · no route to host",
                   "gpu-c01", ts=T, evidence="ssh: connect to host gpu-c01 port 22: No route")
    findings = [down, xid79("gpu-t01", T + 60)]
    hosts = [HostView("gpu-t01", True, 8, "via journalctl", ()),
             HostView("gpu-c01", False, 0, "not reported by the agent", (), down="unreachable")]
    rep = build_report("c01", review(findings, hosts, TriageRecord()), first_failure(findings),
                       findings, {"gpu-t01": hello("gpu-t01").facts}, now=T + 120)
    md, js = write_report(rep, tmp_path)
    body, data = md.read_text(), json.loads(js.read_text())
    assert "- gpu-c01: no facts (the agent never said hello)" in body
    assert data["hosts_without_facts"] == ["gpu-c01"] and list(data["hosts"]) == ["gpu-t01"]
    assert "**Do now:** check gpu-c01's power and network" in body
    assert "- checked: nothing on gpu-c01 (unreachable)" in body
    # the Xid a minute later is its own fault, named, and its GPU is in the RMA list
    assert "Separate incidents (other jobs or hosts): Xid 79 on gpu-t01 GPU3" in body
    assert [f["xid"] for f in data["first_failure"]["separate_faults"]] == [79]
    assert [(g["host"], g["gpu"]) for g in data["hardware"]] == [("gpu-t01", 3)]


def test_the_demo_report_has_a_section_for_every_job_with_findings() -> None:
    """Each demo host runs its own job (48201 …): a section per job with findings, each with
    its own first failure, and no job's finding blamed on another's (issue #34)."""
    from tests.analysis.test_triage_onsets import demo_state

    fleet = demo_state(45)
    found = fleet.all_findings()
    diagnosis = fleet.diagnosis()
    sections = {j.job: j for j in job_sections(diagnosis, found, fleet.rank_index())}
    # gpu-a02 leak, a03 throttling, a04 link, b01 disk, b02 Xid, b03 watchdog
    assert set(sections) >= {"48202", "48203", "48204", "48205", "48206", "48207"}
    b02, b03 = sections["48206"], sections["48207"]
    assert b02.incident is not None and b02.incident.finding.xid == 79
    assert b02.nodes == ("gpu-b02",) and b02.incident.consequences == ()
    assert b03.incident is not None and b03.incident.finding.code == "nccl-timeout"
    assert b03.incident.culprit is not None and not b03.incident.culprit.known
    md = "\n".join(line for j in sections.values() for line in j.to_markdown())
    assert "## Slurm job 48206" in md and "## Slurm job 48207" in md
    assert "consequence" not in (b02.incident.explanation + b03.incident.explanation)
