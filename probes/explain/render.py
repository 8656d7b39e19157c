"""The readable ``explain`` report: findings grouped under the four triage steps, in order."""

from __future__ import annotations

from probes.explain.run import ExplainedInput, ordered
from probes.triage import Step
from probes.wire.sanitize import clean_text

STEP_TITLES = {
    Step.GPU: "1. GPU state (devices, clocks, PCIe, memory health, disks)",
    Step.SYSLOG: "2. System log (NVRM Xid, AER, OOM killer, GSP, thermal)",
    Step.NCCL: "3. NCCL (collectives and transports)",
    Step.MODEL: "4. Model code (OOM, illegal access, asserts, NaN, loss scale)",
}
EVIDENCE_WIDTH = 160


def _summary_of(inp: ExplainedInput) -> str:
    parsed = inp.result.parsed
    parts = []
    for key in ("gpus", "devices", "rows", "nics", "errors", "adapters", "tests"):
        value = parsed.get(key)
        if isinstance(value, list | dict) and value:
            parts.append(f"{len(value)} {key}")
    busbw = parsed.get("avg_busbw_gbs")  # nccl-tests
    if isinstance(busbw, int | float):
        parts.append(f"{parsed.get('op') or 'collective'} avg busbw {busbw:g} GB/s")
    if "lines" in parsed:
        parts.append(f"{parsed['lines']} lines")
    speed = parsed.get("throughput")  # a training log (probes/rules/throughput)
    if isinstance(speed, dict) and isinstance(speed.get("median"), int | float):
        per = " per GPU" if speed.get("per_gpu") else ""
        m = speed["median"]
        shown = f"{m:,.0f}" if m >= 100 else f"{m:.3g}"
        parts.append(f"{speed.get('trainer')} throughput median {shown} "
                     f"{speed.get('unit')}{per} over {speed.get('points')} readings")
    if parsed.get("long_lines_cut"):  # what a large input's read skipped (explain/stream.py)
        parts.append(f"{parsed['long_lines_cut']} lines cut to their first "
                     f"{parsed['max_line_chars']} characters")
    if parsed.get("bytes_skipped"):
        parts.append(f"parsed from the first {parsed['bytes_read']} bytes, "
                     f"{parsed['bytes_skipped']} bytes skipped")
    return (f"{clean_text(inp.path)}: {inp.result.kind}"
            + (f" ({', '.join(parts)})" if parts else ""))


def render_text(inputs: list[ExplainedInput], first: list[str] | None = None) -> str:
    """Plain text for a terminal or a ticket; the steps with nothing found say so.

    ``first`` is the first failure as triage decides it (``outputs.explain_first``): the
    report opens with it, then goes through the steps in their fixed order.
    """
    out = [*first, ""] if first else []
    out += [_summary_of(i) for i in inputs]
    pairs = ordered(inputs)
    for step in Step:
        mine = [(src, f) for src, f in pairs if f.step is step]
        out.append("")
        out.append(STEP_TITLES[step])
        if not mine:
            out.append("   nothing found")
            continue
        for src, f in mine:
            where = f"{clean_text(src)}:{f.line}"  # a file name can carry escapes too
            more = f" (×{f.count})" if f.count > 1 else ""
            out.append(f"   {f.severity.value.upper():8} {f.code}{more}  {where}")
            out.append(f"            {f.summary}")
            evidence = f.evidence if len(f.evidence) <= EVIDENCE_WIDTH else (
                f.evidence[:EVIDENCE_WIDTH - 1] + "…")
            out.append(f"            > {evidence}")
            out.append(f"            action: {f.action}")
    worst = next((f for _, f in pairs if f.severity.rank >= 2), None)
    out.append("")
    if worst is None:
        out.append("Nothing above info: look at the next step of the run, or collect more.")
    elif first:
        out.append(first[0].replace("First failure: ", "Start with ", 1)
                   .replace("Earliest warning: ", "Start with ", 1)
                   + ": what broke first explains what followed; the steps above are in "
                   "the fixed order (GPU state → system log → NCCL → model code).")
    else:
        out.append(f"Start with {worst.code}: earlier steps explain later ones "
                   "(GPU state → system log → NCCL → model code).")
    return "\n".join(out) + "\n"
