"""Incident reports: what triage found, in order, with the operator's notes and host facts.

Written as a Markdown file for people and a JSON file for tools, side by side, mode 0600 in
a 0700 directory: they quote log lines and host details that should not be world-readable.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from probes.actions.audit import AuditRecord
from probes.analysis.domains import Domain, group, hosts_of
from probes.analysis.findings import Finding
from probes.analysis.incident import (
    CAUSE_STEPS,
    STEP_ORDER,
    Diagnosis,
    FirstFailure,
    StepReview,
    describe,
    incidents,
    onset,
)
from probes.analysis.incident_text import where_host
from probes.analysis.job_ranks import RankIndex
from probes.analysis.onsets import clock_of
from probes.errors import RigwatchError
from probes.triage import Code, OnsetClock, Severity
from probes.wire.samples import GpuInfo, HostFacts
from probes.wire.sanitize import clean_text

CLOCK_WORDS: Mapping[OnsetClock, str] = {
    OnsetClock.LINE: "the log line's own timestamp (the host's clock, corrected for its skew)",
    OnsetClock.KERNEL: "the kernel's own time for the line",
    OnsetClock.ORDER: "its place in the log (the line has no timestamp of its own)",
    OnsetClock.READ: "when its line was read (no timestamp of its own)",
    OnsetClock.SAMPLE: "the first sample that showed it",
    OnsetClock.CONSOLE: "the console's clock",
}
"""Which clock an onset came from, as the report says it."""
REPORT_VERSION = 1
"""Fields are only ever added (``hardware``, ``onset``, ``do_now`` came later): a version-1
reader keeps working."""
FILE_MODE = 0o600
DIR_MODE = 0o700
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
"""What makes Markdown of plain text: emphasis, code, links, autolinks and HTML, tables."""


class ReportError(RigwatchError):
    """A report cannot be written or read (directory not writable, file missing or bad)."""

    title = "Report error"


def reports_dir() -> Path:
    """Where reports live by default: the user's data dir (XDG on Linux)."""
    return Path(platformdirs.user_data_dir("rigwatch")) / "reports"


@dataclass(frozen=True)
class FailedGpu:
    """A GPU a critical hardware finding names: what an RMA or a ticket needs of it."""

    host: str
    gpu: int
    info: GpuInfo | None
    """The hello's facts about it (serial, VBIOS, bus id, UUID); None if never listed."""
    driver: str | None
    cuda: str | None
    onset: float | None
    """When its trouble began (the earliest finding's onset, console clock)."""
    codes: tuple[str, ...]
    """What was found, earliest first (``xid 79``, ``gpu-lost`` …)."""

    def to_json(self) -> dict[str, object]:
        """One ``hardware`` entry."""
        g = self.info
        return {"host": self.host, "gpu": self.gpu, "name": g.name if g else None,
                "serial": g.serial if g else None, "vbios": g.vbios if g else None,
                "bus_id": g.bus_id if g else None, "uuid": g.uuid if g else None,
                "driver": self.driver, "cuda": self.cuda,
                "onset": _iso(self.onset) if self.onset is not None else None,
                "findings": list(self.codes)}

    def to_markdown(self) -> str:
        """``gpu-b02 GPU6: NVIDIA H100 …, serial …, VBIOS …, bus …, UUID …; driver …``."""
        g = self.info
        facts = (f"{g.name or '?'}, serial {g.serial or '?'}, VBIOS {g.vbios or '?'}, "
                 f"bus {g.bus_id or '?'}, UUID {g.uuid or '?'}") if g else "not in the hello"
        since = f"; since {_iso(self.onset)}" if self.onset is not None else ""
        return (f"- **{_md(self.host)} GPU{self.gpu}**: {_md(facts)}; driver "
                f"{_md(self.driver or '?')}, CUDA {_md(self.cuda or '?')}{since}; found: "
                + ", ".join(_code(c) for c in self.codes))


@dataclass(frozen=True)
class JobSection:
    """A Slurm job with findings (or the findings outside any job): its nodes, its first
    failure and culprit, as ``first_failure.diagnose`` decided them for every surface."""

    job: str | None
    """The job's id; None for the section of findings outside any job."""
    nodes: tuple[str, ...]
    ranks: int
    """Ranks placed on a host (by the agents or the job's log)."""
    incident: FirstFailure | None
    """The job's first failure (the lead one outside any job)."""
    findings: int = 0
    """How many findings the section holds."""

    @property
    def failing(self) -> Finding | None:
        """The job's root finding."""
        return self.incident.finding if self.incident is not None else None

    def to_json(self) -> dict[str, object]:
        """One ``jobs`` entry."""
        out: dict[str, object] = {"job": self.job, "nodes": list(self.nodes),
                                  "ranks_placed": self.ranks, "findings": self.findings}
        i = self.incident
        if i is not None:
            out["first_failure"] = i.to_json()
            c = i.culprit
            f = i.finding
            out["failing"] = {k: v for k, v in (
                ("code", str(f.code)), ("rank", c.rank if c else None),
                ("host", c.host if c else None), ("gpu", c.gpu if c else None),
                ("serial", c.serial if c else None), ("bus_id", c.bus_id if c else None),
                ("log_read_on", f.host if f.source else None), ("summary", f.summary))
                if v is not None}
        return out

    def to_markdown(self) -> list[str]:
        """The section: nodes, ranks placed, the first failure, its culprit and do-now."""
        title = (f"## Slurm job {_md(self.job)}" if self.job is not None
                 else "## Findings outside any job")
        out = [title, "", f"- nodes: {_md(', '.join(self.nodes)) or 'none seen'}"]
        if self.job is not None:
            out.append(f"- ranks placed on a host: {self.ranks}")
        i = self.incident
        if i is not None:
            out.append(f"- first failure: {_md(i.headline)}")
            c = i.culprit
            if c is not None and self.job is not None:
                ids = ", ".join(f"{k} {v}" for k, v in (("serial", c.serial),
                                                        ("bus", c.bus_id)) if v)
                where = c.place if c.known else "unknown"
                out.append(f"- failing rank: {_md(where)}" + (f" ({_md(ids)})" if ids else "")
                           + f": {_code(str(i.finding.code))} {_md(i.finding.summary)}")
                out.append(f"- how it was told: {_md(c.why)}")
            if i.waiting:
                out.append("- waited (victims): " + _md(", ".join(map(str, i.waiting))))
            if i.do_now:
                out.append(f"- **do now:** {_md(i.do_now)}")
        return [*out, ""]


def job_sections(diagnosis: Diagnosis, findings: Sequence[Finding], index: RankIndex,
                 watched: str | None = None) -> tuple[JobSection, ...]:
    """A section for the watched job and every job with findings, then one for the
    findings outside any job; each with the incident ``diagnosis`` made of it."""
    by_job: dict[str | None, list[Finding]] = {watched: []} if watched else {}
    for domain, members in group(incidents(findings), index).items():
        by_job.setdefault(domain.job, []).extend(members)
    out = []
    for job, members in sorted(by_job.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        if job is None:
            lead = next((i for i in diagnosis.incidents
                         if i.domain is None or i.domain.job is None), None)
            nodes = tuple(sorted({f.host for f in members}))
            out.append(JobSection(None, nodes, 0, lead, len(members)))
            continue
        nodes = tuple(sorted(hosts_of(Domain("job", job), members, index)))
        out.append(JobSection(job, nodes, len(index.ranks_of(job)), diagnosis.of_job(job),
                              len(members)))
    return tuple(out)


@dataclass(frozen=True)
class IncidentReport:
    """Everything a report holds, independent of how it is written."""

    created: float
    title: str
    first: FirstFailure | None
    steps: tuple[StepReview, ...]
    timeline: tuple[Finding, ...]
    facts: Mapping[str, HostFacts]
    hardware: tuple[FailedGpu, ...] = ()
    """Failed GPUs, the first failure's first."""
    unknown: tuple[str, ...] = ()
    """Hosts with incidents but no hello (down since the start): listed, without facts."""
    jobs: tuple[JobSection, ...] = ()
    """The Slurm jobs involved (the watched one, those the findings name)."""
    actions: tuple[AuditRecord, ...] = ()
    """Node actions taken on its incidents or hosts (drains, resumes, refusals), from the
    audit trail, oldest first."""
    replay_at: float | None = None
    """Written in a replay: the recording's time on screen then (``created`` is the wall
    clock's: when the operator wrote it)."""

    def to_json(self) -> dict[str, object]:
        """The JSON document (version 1)."""
        return {
            "version": REPORT_VERSION,
            "created": _iso(self.created),
            "title": self.title,
            "first_failure": None if self.first is None else {
                **self.first.to_json(),
                "finding": _finding_json(self.first.finding),
                "explanation": self.first.explanation,
                "headline": self.first.headline,
                "do_now": self.first.do_now,
                "critical": self.first.is_failure,
                "same_event": [_finding_json(f) for f in self.first.same_event],
                "separate_faults": [_finding_json(f) for f in self.first.others],
                "consequences": len(self.first.consequences),
            },
            "hardware": [g.to_json() for g in self.hardware],
            "jobs": [j.to_json() for j in self.jobs],
            "actions": [r.to_json() for r in self.actions],
            "steps": [{"step": r.step.value, "title": r.title, "verdict": r.verdict.value,
                       "note": r.note, "checked": list(r.checked),
                       "findings": [_finding_json(f) for f in r.findings]}
                      for r in self.steps],
            "timeline": [_finding_json(f) for f in self.timeline],
            "hosts": {name: _facts_json(f) for name, f in sorted(self.facts.items())},
            "hosts_without_facts": list(self.unknown),
            "replay_at": None if self.replay_at is None else _iso(self.replay_at),
        }

    def to_markdown(self) -> str:
        """The report for people: first failure, the steps with verdicts, timeline, hosts.

        Summaries, notes and host facts quote what hosts wrote (a process name, a traceback
        frame, a GPU name), so every such text is Markdown-escaped (:func:`_md`): a
        ``[link](…)`` or ``<img …>`` in a job log stays text in any viewer.  Evidence goes
        in code spans and fences, which nothing inside can close.
        """
        written = f"Written {_iso(self.created)} by rigwatch"
        if self.replay_at is not None:
            written += f", replaying a recording at {_iso(self.replay_at)} (recording time)"
        out = [f"# Incident report: {_md(self.title)}", "", f"{written}.", ""]
        heading = ("Earliest warning" if self.first and not self.first.is_failure
                   else "First failure")
        out += [f"## {heading}", ""]
        out.append(_md(self.first.explanation) if self.first else "No incident was seen.")
        if self.first is not None and self.first.finding.ts:
            out += ["", f"Onset {_iso(onset(self.first.finding))}, from "
                        f"{CLOCK_WORDS[self.first.clock]}."]
        if self.first is not None and self.first.same_event:
            out += ["", "Seen as: " + ", ".join(
                _code(f.code) for f in (self.first.finding, *self.first.same_event))
                + " (one event)."]
        if self.first is not None and self.first.do_now:
            out += ["", f"**Do now:** {_md(self.first.do_now)}"]
        out.append("")
        if self.hardware:
            out += ["## Failed hardware", ""]
            out += [g.to_markdown() for g in self.hardware]
            out.append("")
        for j in self.jobs:
            out += j.to_markdown()
        if self.actions:
            out += ["## Actions taken", ""]
            out += [f"- {_md(r.line())}" + (f" (command: {_code(' '.join(r.command))})"
                                            if r.command else "") for r in self.actions]
            out.append("")
        for i, r in enumerate(self.steps, 1):
            out += [f"## {i}. {_md(r.title)}: {r.verdict.value}", ""]
            out += [f"- checked: {_md(c)}" for c in r.checked]
            if r.note:
                out += ["", f"Operator's note: {_md(r.note)}"]
            out.append("")
            if not r.findings:
                out += ["No findings.", ""]
            for f in r.findings:
                out.append(f"- **{f.severity.value}** {_code(f.code)} {_md(describe(f))}: "
                           f"{_md(f.summary)}" + (f" (since {_iso(onset(f))})"
                                                   if f.ts is not None else ""))
                if f.evidence and f.context:
                    lines = [_one_line(c) for c in (*f.context, f.evidence)]
                    longest = max((len(t) for ln in lines for t in re.findall("~+", ln)),
                                  default=0)
                    fence = "~" * max(3, longest + 1)  # no line inside can close it
                    out += ["  - evidence, after the lines before it:", "", f"    {fence}"]
                    out += [f"    {ln}" for ln in lines]
                    out += [f"    {fence}", ""]
                elif f.evidence:
                    out.append(f"  - evidence: {_code(_one_line(f.evidence))}")
                if f.action:
                    out.append(f"  - action: {_md(f.action)}")
            out.append("")
        out += ["## Timeline", ""]
        out += [f"- {_iso(onset(f))} {_md(describe(f))}: {_md(f.summary)}" + (
                    f" (reported {_iso(f.ts)})" if f.ts is not None and onset(f) != f.ts else "")
                for f in self.timeline]
        if not self.timeline:
            out.append("Nothing happened in time order worth listing.")
        out += ["", "## Hosts", ""]
        for name, facts in sorted(self.facts.items()):
            gpus = ", ".join(sorted({g.name or "?" for g in facts.gpus})) or "no GPUs"
            out.append("- " + _md(f"{name}: {facts.os_name or '?'}, kernel {facts.kernel or '?'}, "
                                  f"driver {facts.driver_version or '?'}, "
                                  f"CUDA {facts.cuda_version or '?'}, {len(facts.gpus)}× {gpus}"))
        out += [f"- {_md(name)}: no facts (the agent never said hello)" for name in self.unknown]
        return "\n".join(out) + "\n"


def _md(text: str) -> str:
    """Plain text as Markdown that shows exactly that text (one line: newlines are spaces)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.splitlines()))


def _code(text: str) -> str:
    """A code span no backquote inside can close (CommonMark: a longer fence)."""
    ticks = "`" * (1 + max((len(r) for r in re.findall("`+", text)), default=0))
    return f"{ticks} {text} {ticks}" if "`" in text else f"`{text}`"


def _iso(ts: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):  # a time no calendar holds
        return "?"


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("`", "'")[:300]


def _finding_json(f: Finding) -> dict[str, object]:
    out: dict[str, object] = {"step": f.step.value, "code": f.code, "severity": f.severity.value,
                              "host": f.host, "summary": f.summary}
    for key, value in (("gpu", f.gpu), ("xid", f.xid), ("evidence", f.evidence),
                       ("action", f.action), ("source", f.source)):
        if value is not None:
            out[key] = value
    if f.ts is not None:
        out["onset"] = _iso(onset(f))
        out["time"] = _iso(f.ts)
        out["clock"] = clock_of(f).value
    if f.count > 1:
        out["count"] = f.count
    if f.context:
        out["context"] = list(f.context)
    return out


def _facts_json(f: HostFacts) -> dict[str, object]:
    return {"os": f.os_name, "kernel": f.kernel, "driver": f.driver_version,
            "cuda": f.cuda_version, "cpu": f.cpu_model, "mem_total_bytes": f.mem_total_bytes,
            "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "uuid": g.uuid,
                      "serial": g.serial, "vbios": g.vbios} for g in f.gpus]}


def build_report(title: str, steps: Sequence[StepReview], first: FirstFailure | None,
                 findings: Sequence[Finding], facts: Mapping[str, HostFacts],
                 now: float | None = None, jobs: Sequence[JobSection] = (),
                 actions: Sequence[AuditRecord] = (),
                 replay_at: float | None = None) -> IncidentReport:
    """Assemble a report; the hosts listed are those with incidents (or all, when none).

    The operator's verdicts and notes travel inside ``steps``.  Every time is taken as it
    is given: the caller puts findings and the first failure on the console's clock
    (``incident.all_on_console``), so a report never lists events after it was written.
    The timeline is in onset order (a watchdog's hang began before it printed), causes
    before symptoms at the same second.  In a replay ``now`` is the wall clock and
    ``replay_at`` the recording's time on screen: the report carries both.
    """
    timeline = tuple(sorted(incidents(findings),
                            key=lambda f: (onset(f), STEP_ORDER.index(f.step))))
    involved = {where_host(f) for f in timeline} | {f.host for f in timeline} or set(facts)
    return IncidentReport(time.time() if now is None else now, title, first, tuple(steps),
                          timeline, {h: facts[h] for h in involved if h in facts},
                          failed_gpus(first, findings, facts),
                          tuple(sorted(h for h in involved if h not in facts)), tuple(jobs),
                          tuple(sorted(actions, key=lambda r: r.when)), replay_at)


_GPU_FAULTS = frozenset({Code.XID, Code.GPU_FALLEN_OFF_BUS, Code.GPU_LOST, Code.GPU_DROPOUT,
                         Code.GPU_UNRESPONSIVE, Code.ECC_UNCORRECTABLE, Code.ROW_REMAP_FAILURE,
                         Code.PCIE_AER, Code.NVLINK_DOWN, Code.RM_INIT_ADAPTER_FAILED})
"""Codes that say a card itself failed: an RMA or a ticket names it."""


def failed_gpus(first: FirstFailure | None, findings: Sequence[Finding],
                facts: Mapping[str, HostFacts]) -> tuple[FailedGpu, ...]:
    """Every GPU a critical hardware finding names, with its hello facts; the first
    failure's GPU first, then by onset."""
    by_gpu: dict[tuple[str, int], list[Finding]] = {}
    for f in findings:
        if (f.gpu is not None and f.gpu >= 0 and f.severity is Severity.CRITICAL
                and f.step in CAUSE_STEPS and f.code in _GPU_FAULTS):
            by_gpu.setdefault((f.host, f.gpu), []).append(f)
    root = (first.finding.host, first.finding.gpu) if first is not None else None
    out = []
    for (host, gpu), found in by_gpu.items():
        found.sort(key=lambda f: onset(f) if f.ts is not None else float("inf"))
        hf = facts.get(host)
        info = next((g for g in hf.gpus if g.index == gpu), None) if hf else None
        codes = tuple(dict.fromkeys(f"xid {f.xid}" if f.xid is not None else str(f.code)
                                    for f in found))
        start = next((onset(f) for f in found if f.ts is not None), None)
        out.append(FailedGpu(host, gpu, info, hf.driver_version if hf else None,
                             hf.cuda_version if hf else None, start, codes))
    out.sort(key=lambda g: ((g.host, g.gpu) != root,
                            g.onset if g.onset is not None else float("inf"), g.host, g.gpu))
    return tuple(out)


def write_report(report: IncidentReport, directory: Path | None = None) -> tuple[Path, Path]:
    """Write ``<time>-<title>.md`` and ``.json``, each 0600, never overwriting another report.

    Raises:
        ReportError: the directory cannot be created or a file cannot be written.
    """
    where = directory or reports_dir()
    stem = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(report.created)) + "-" + (
        _SAFE.sub("-", report.title).strip("-")[:60] or "incident")
    try:
        where.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        for n in range(100):
            base = where / (stem if n == 0 else f"{stem}-{n}")
            md, js = base.with_suffix(".md"), base.with_suffix(".json")
            if not md.exists() and not js.exists():
                break
        _write_private(md, report.to_markdown())
        _write_private(js, json.dumps(report.to_json(), indent=2) + "\n")
    except OSError as e:
        raise ReportError(f"{where}: cannot write the report: {e.strerror or e}") from e
    return md, js


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path, FILE_MODE)


@dataclass(frozen=True)
class ReportEntry:
    """A report on disk, for ``rigwatch report``."""

    path: Path
    title: str
    created: str
    first_failure: str


def list_reports(directory: Path | None = None) -> list[ReportEntry]:
    """Reports in ``directory``, newest first; an unreadable JSON is listed with its error."""
    where = directory or reports_dir()
    if not where.is_dir():
        return []
    out = []
    for js in sorted(where.glob("*.json"), reverse=True):
        try:
            data = json.loads(js.read_text(encoding="utf-8"))
            first = data.get("first_failure") or {}
            # a file on disk may predate sanitising, or be edited: it is text, not commands
            out.append(ReportEntry(js.with_suffix(".md"), clean_text(str(data.get("title", "?"))),
                                   clean_text(str(data.get("created", "?"))),
                                   clean_text(str(first.get("explanation", "no incident")))))
        except (OSError, ValueError, AttributeError) as e:
            out.append(ReportEntry(js.with_suffix(".md"), "?", "?", f"unreadable: {e}"))
    return out


def find_report(name: str, directory: Path | None = None) -> Path:
    """A report's Markdown file by list number (1 = newest), file name or stem.

    Raises:
        ReportError: no such report.
    """
    entries = list_reports(directory)
    if name.isdigit() and 1 <= int(name) <= len(entries):
        return entries[int(name) - 1].path
    for e in entries:
        if name in (e.path.name, e.path.stem, e.path.with_suffix(".json").name):
            return e.path
    where = directory or reports_dir()
    raise ReportError(f"{where}: no report {name!r} (run `rigwatch report` to list them)")
