"""``rigwatch node drain|resume|audit``: the console's node actions from a script.

The same plan, audit trail and recheck as ``D`` and ``U`` (``probes.actions``): the preview
goes to stderr, then the node's name is asked for on the terminal (``--yes`` skips it; with
no terminal and no ``--yes`` the action is refused, and recorded as refused).  Exit status:
0 done, 1 not done (refused, Slurm said no, the state read back is not the one asked for),
2 a usage error, read-only mode, or no terminal to confirm on.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from probes.actions.audit import AuditLog, AuditRecord, Outcome, default_audit_path, last_drain
from probes.actions.audit import unfinished as unfinished_ids
from probes.actions.errors import ActionError, AuditError
from probes.actions.evidence import Evidence
from probes.actions.gate import ResumeCheck
from probes.actions.nodes import check_node, host_of
from probes.actions.slurm_node import ACTION_TIMEOUT_S
from probes.actions.take import NodePlan, carry_out, plan_drain, plan_resume, refuse
from probes.config.fleet import HostSpec
from probes.config.inventory import choose_inventory_path, load_inventory
from probes.triage import Code

if TYPE_CHECKING:
    from tui.settings import Settings

EXIT_NOT_DONE = 1
EXIT_USAGE = 2
READ_ONLY_LINE = ("read-only mode: rigwatch takes no action on nodes (--read-only, or "
                  "read_only: true in the settings)")


def add_action_args(p: argparse.ArgumentParser) -> None:
    """The console's options about node actions."""
    p.add_argument("--read-only", action="store_true",
                   help="no node actions: D, U, :drain and :resume are gone (also "
                        "read_only: true in the settings)")
    p.add_argument("--audit", metavar="FILE", default=None,
                   help="the audit trail of node actions (default: $RIGWATCH_AUDIT or "
                        "<data dir>/rigwatch/audit.jsonl)")


def add_node_parser(sub: argparse._SubParsersAction) -> None:
    """``rigwatch node drain|resume|audit``."""
    node = sub.add_parser("node", help="drain or resume a Slurm node with a reason, a "
                          "confirmation and an audit trail; print the trail")
    acts = node.add_subparsers(dest="node_command", required=True, metavar="ACTION")
    drain = acts.add_parser("drain", help="drain NODE: running jobs finish, no new job starts")
    drain.add_argument("node", metavar="NODE")
    drain.add_argument("--reason", required=True, metavar="TEXT",
                       help="what sinfo -R shows (kept as 'rigwatch[ CODE]: TEXT', at most "
                            "255 bytes)")
    drain.add_argument("--finding", metavar="CODE", default=None,
                       help="the finding it rests on (a code of rigwatch explain: xid, "
                            "gpu-lost, cuda-oom …), recorded as evidence")
    resume = acts.add_parser("resume", help="resume NODE once its host, read again now, "
                             "shows the drain's cause gone (and nothing critical)")
    resume.add_argument("node", metavar="NODE")
    resume.add_argument("--inventory", metavar="FILE", default=argparse.SUPPRESS,
                        help="where to find the node's host (by name or slurm_node:)")
    resume.add_argument("--force", action="store_true",
                        help="resume although the fault still holds (needs --reason; "
                             "recorded as an override)")
    resume.add_argument("--reason", metavar="TEXT", default=None,
                        help="why --force resumes anyway")
    for p in (drain, resume):
        p.add_argument("--yes", action="store_true",
                       help="do not ask for the node's name on the terminal")
        p.add_argument("--timeout", type=_seconds, default=ACTION_TIMEOUT_S, metavar="SECONDS",
                       help="how long Slurm may take to answer (default %(default)g)")
        p.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS,
                       help="refuse (exit 2): no action is taken in read-only mode")
        p.add_argument("--settings", metavar="FILE", default=argparse.SUPPRESS,
                       help="settings (read_only:, detector limits)")
    audit = acts.add_parser("audit", help="print the audit trail of node actions")
    audit.add_argument("--json", action="store_true", help="one JSON record per line")
    audit.add_argument("--node", default=None, help="only this node's records")
    for p in (drain, resume, audit):
        p.add_argument("--audit", metavar="FILE", default=argparse.SUPPRESS,
                       help="the audit trail (default: $RIGWATCH_AUDIT or "
                            "<data dir>/rigwatch/audit.jsonl)")


def _seconds(text: str) -> float:
    """``--timeout``: a number of seconds above 0 (and at most an hour)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"between 0 and 3600 seconds, not {text}")
    return value


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def run_node(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``rigwatch node …``; its exit status."""
    cmd = args.node_command
    log = AuditLog(Path(args.audit) if args.audit else default_audit_path())
    if cmd == "audit":
        return _print_audit(log, args)
    if args.read_only or settings.read_only:
        _say(f"rigwatch node {cmd}: {READ_ONLY_LINE}")
        return EXIT_USAGE
    try:
        check_node(args.node)
        plan = _drain_plan(args) if cmd == "drain" else _resume_plan(args, log, settings)
    except ActionError as exc:
        _say(f"rigwatch node {cmd}: {exc.msg}")
        return EXIT_USAGE if not isinstance(exc, AuditError) else EXIT_NOT_DONE
    if isinstance(plan, int):
        return plan
    for line in plan.preview():
        _say(line)
    try:
        status = _confirm(plan, log, args.yes)
        if status is not None:
            return status
        rec = carry_out(plan, log, args.timeout)
    except AuditError as exc:
        _say(f"rigwatch node {cmd}: {exc.msg}")
        return EXIT_NOT_DONE
    if rec.outcome is Outcome.DONE:
        print(f"{plan.node}: {cmd} done — {rec.why}")
        return 0
    _say(f"rigwatch node {cmd}: {plan.node}: not done — {rec.why}")
    return EXIT_NOT_DONE


def _drain_plan(args: argparse.Namespace) -> NodePlan:
    evidence = None
    if args.finding is not None:
        codes = [c.value for c in Code]
        if args.finding not in codes:
            close = difflib.get_close_matches(args.finding, codes, n=1)
            raise ActionError(f"--finding {args.finding!r} is not a finding code"
                              + (f"; did you mean {close[0]!r}?" if close else ""))
        evidence = Evidence(args.finding, summary="named by the operator (--finding)")
    return plan_drain(args.node, None, evidence, text=args.reason, via="cli")


def _host(node: str, args: argparse.Namespace) -> HostSpec | None:
    path = choose_inventory_path(getattr(args, "inventory", None))
    return host_of(node, load_inventory(path).hosts) if path is not None else None


def _resume_plan(args: argparse.Namespace, log: AuditLog,
                 settings: Settings) -> NodePlan | int:
    from probes.outputs.recheck import recheck

    if args.force and not args.reason:
        raise ActionError("--force needs --reason: an override is recorded with its why")
    if args.reason and not args.force:
        raise ActionError("--reason goes with --force (a resume needs no reason otherwise)")
    node = args.node
    records = [r for r in log.records() if isinstance(r, AuditRecord)]
    drain = last_drain(records, node)
    cause = drain.evidence if drain is not None else None
    spec = _host(node, args)
    if spec is None:
        check = ResumeCheck(None, False, failure=f"no host of the inventory is Slurm node "
                            f"{node} (by name or slurm_node:), so it cannot be read again")
    else:
        _say(f"reading {spec.name} again now (its GPUs and kernel log) …")
        check = asyncio.run(recheck(spec, cause, settings.detectors))
    host = spec.name if spec is not None else None
    if check.allowed:
        why = f"{check.judged}: the drain's finding is gone and nothing critical holds"
        _say(why)
        return plan_resume(node, host, cause, cleared=why, via="cli")
    failing = check.still_failing()
    if args.force:
        return plan_resume(node, host, cause, override=args.reason, still_failing=failing,
                           via="cli")
    plan = plan_resume(node, host, cause, via="cli")
    refuse(plan, log, "the fault still holds", still_failing=failing)
    _say(f"rigwatch node resume: {node}: refused (recorded) — still failing:")
    for line in failing:
        _say(f"  {line}")
    _say("  (--force --reason TEXT resumes anyway, recorded as an override)")
    return EXIT_NOT_DONE


def _confirm(plan: NodePlan, log: AuditLog, yes: bool) -> int | None:
    """None when confirmed; else the exit status (the refusal recorded)."""
    if yes:
        return None
    verb = plan.action.value
    if not sys.stdin.isatty():
        refuse(plan, log, "not confirmed: no terminal to ask on, and no --yes")
        _say(f"rigwatch node {verb}: no terminal to confirm on: give --yes to act from a "
             "script (refused, recorded)")
        return EXIT_USAGE
    sys.stderr.write(f"Type the node's name ({plan.node}) to {verb} it: ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip()
    if answer != plan.node:
        refuse(plan, log, f"not confirmed: typed {answer[:64]!r}")
        _say(f"rigwatch node {verb}: not confirmed: nothing done (recorded)")
        return EXIT_NOT_DONE
    return None


def _print_audit(log: AuditLog, args: argparse.Namespace) -> int:
    try:
        items = list(log.records())
    except AuditError as exc:
        _say(f"rigwatch node audit: {exc.msg}")
        return EXIT_USAGE
    records = [r for r in items if isinstance(r, AuditRecord)
               and (args.node is None or r.node == args.node)]
    for problem in (i for i in items if isinstance(i, str)):
        _say(f"rigwatch node audit: {problem}")
    open_ids = unfinished_ids(records)
    for r in records:
        if args.json:
            print(json.dumps(r.to_json(), ensure_ascii=False))
        else:
            print(r.line() + ("  (no outcome recorded: interrupted)"
                              if r.action_id in open_ids else ""))
    if not records:
        _say(f"no node actions recorded in {log.path}")
    elif open_ids:
        _say(f"{len(open_ids)} action(s) attempted with no outcome recorded (interrupted): "
             "sinfo -R tells whether Slurm took them")
    return 0
