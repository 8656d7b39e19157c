"""NCCL / torch.distributed records: every line read into a typed record (:func:`parse`).

Rules match with ``re.search`` on the peeled message, so a flattened traceback (``13: ``
srun labels mid-line), a progress bar glued in front or an unknown prefix cannot hide a
record.  ``NCCL INFO`` lines are never errors on their own (the ``-> 2`` return-code chains
only echo a failure already logged by ``NCCL WARN``); the one exception is the libibverbs
fallback on an InfiniBand host.  Where a record comes from (rank, host, GPU) is read from the
message, the launcher's prefix and the communicator init lines (:class:`_Context`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice

from probes.rules.logrules.common import CRIT, EVIDENCE_MAX, WARN, clip_evidence
from probes.rules.logrules.lines import LogLine
from probes.rules.logrules.nccl import patterns as pat
from probes.rules.logrules.nccl.records import (
    NcclError,
    NcclReport,
    NetError,
    RankFailure,
    Timeout,
    Where,
)
from probes.rules.text import clean_line
from probes.triage import Severity

EVIDENCE_BEFORE = 150
"""Characters of a long line kept before the record's start."""
MAX_RECORDS_PER_LINE = 64
"""Records of one kind read from one line.  A real line holds one (a few when a launcher
flattened a block, a torchelastic summary one per failed rank); a line repeating a record
thousands of times is one hostile line, and each record costs a look at the whole line."""


def _first(found: Iterator[re.Match[str]]) -> Iterator[re.Match[str]]:
    """At most :data:`MAX_RECORDS_PER_LINE` of one pattern's matches in a line."""
    return islice(found, MAX_RECORDS_PER_LINE)


# --- helpers ---------------------------------------------------------------------------------


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None


def _bus_from_nccl(bus: str) -> str | None:
    """NCCL prints a bus id packed as hex (``4e000``): domain, bus, device and function."""
    try:
        v = int(bus, 16)
    except ValueError:
        return None
    return f"{v >> 20:04x}:{(v >> 12) & 0xff:02x}:{(v >> 4) & 0xff:02x}.{v & 0xf:x}"


def _time(line: LogLine) -> str | None:
    if line.time:
        return line.time
    m = pat.GLOG_TIME.search(line.text[:40])
    if m:
        return f"{int(m.group('mon')):02d}-{m.group('day')} {m.group('clock')}"
    iso = pat.ISO_TIME.match(line.text)
    return iso.group("t") if iso else None


@dataclass(frozen=True)
class _LineFacts:
    """What :meth:`_Context.where` reads of a whole line, read once per line: a line with
    many records must not be read again for each (review E3b: the square of the line)."""

    named: tuple[tuple[int, int], ...]
    """(start, rank) of the message's own ``[Rank N]`` marks, in line order."""
    labels: tuple[tuple[int, str], ...]
    """(start, label) of ``13: `` srun labels after the line's start."""
    label_counts: Counter[str]
    prefix: re.Match[str] | None
    shown: str
    time: str | None
    pg: str | None

    @classmethod
    def of(cls, line: LogLine) -> _LineFacts:
        text = line.text
        named = tuple((m.start(), int(m.group("rank"))) for m in pat.TEXT_RANK.finditer(text))
        labels = tuple((m.start(), m.group("rank")) for m in pat.SRUN_LABEL.finditer(text)
                       if m.start() > 0)
        return cls(named, labels, Counter(v for _, v in labels), pat.NCCL_PREFIX.search(text),
                   clean_line(line.raw).strip(), _time(line), _pg(text))


@dataclass
class _Context:
    """What the whole input says about processes: rank, bus id and whether it has IB NICs."""

    proc_rank: dict[tuple[str, str], int] = field(default_factory=dict)
    proc_bus: dict[tuple[str, str], str] = field(default_factory=dict)
    rank_proc: dict[int, tuple[str, str]] = field(default_factory=dict)
    has_ib: bool = False
    _last: tuple[LogLine, _LineFacts] | None = field(default=None, repr=False)

    def facts(self, line: LogLine) -> _LineFacts:
        """The line's :class:`_LineFacts` (kept for the line being read)."""
        if self._last is None or self._last[0] is not line:
            self._last = (line, _LineFacts.of(line))
        return self._last[1]

    @classmethod
    def of(cls, lines: Sequence[LogLine]) -> _Context:
        ctx = cls()
        for line in lines:
            text = line.text
            if not ctx.has_ib and pat.IB_EVIDENCE.search(text):
                ctx.has_ib = True
            if "busId" not in text:
                continue
            p = pat.NCCL_PREFIX.search(text)
            m = pat.INIT.search(text)
            if p is None or m is None:
                continue
            key = (p.group("host"), p.group("pid"))
            rank = int(m.group("rank"))
            bus = _bus_from_nccl(m.group("bus"))
            ctx.proc_rank.setdefault(key, rank)
            ctx.rank_proc.setdefault(rank, key)
            if bus is not None:
                ctx.proc_bus.setdefault(key, bus)
        return ctx

    def where(self, line: LogLine, pos: int = 0, rank: int | None = None) -> Where:
        """Rank, host and GPU of a record at ``pos`` in ``line``: the message's own words
        first, then the launcher's prefix, then the communicator init lines."""
        facts = self.facts(line)
        if rank is None:
            at = bisect_right(facts.named, (pos + 40, 1 << 62))
            if at:
                rank = facts.named[at - 1][1]
        if rank is None:
            rank = line.rank
        if rank is None:
            rank = _srun_label(facts, pos)
        host = line.host
        gpu: str | None = None
        p = facts.prefix
        if p is not None:
            key = (p.group("host"), p.group("pid"))
            host = p.group("host")
            if rank is None:
                rank = self.proc_rank.get(key)
            gpu = self.proc_bus.get(key) or f"GPU{int(p.group('dev'))}"
        elif rank is not None and rank in self.rank_proc:
            key = self.rank_proc[rank]
            host = host or key[0]
            gpu = self.proc_bus.get(key)
        evidence = clip_evidence(facts.shown, line.text, pos, before=EVIDENCE_BEFORE,
                                 width=EVIDENCE_MAX - 2, mark_end=True)
        return Where(line.number, evidence, host, rank, gpu, facts.time)


def _srun_label(facts: _LineFacts, pos: int) -> int | None:
    """The ``13: `` label nearest before ``pos`` in a line that srun output was flattened
    into (the same label at least twice, so a stray ``12: `` is not taken for one)."""
    labels = facts.labels
    if len(labels) < 2:
        return None
    at = bisect_right(labels, (pos, "\uffff"))
    value = labels[at - 1][1] if at else labels[-1][1]
    return int(value) if facts.label_counts[value] >= 2 else None


def _maybe(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in pat.KEYWORDS)


def cue(line: LogLine) -> bool:
    """Whether this line could hold a record: :func:`parse` skips lines without one of
    :data:`~.patterns.KEYWORDS` (read here on the raw line, which holds the message)."""
    return _maybe(line.raw)


def _after_last_error(lines: Sequence[LogLine], i: int) -> bool:
    """Line ``i`` is the body of a ``Last error:`` section (the line before says so)."""
    for j in range(i - 1, max(-1, i - 3), -1):
        prev = lines[j].text.strip()
        if prev:
            return prev.endswith("Last error:")
    return False


# --- timeouts --------------------------------------------------------------------------------


def _timeouts(ctx: _Context, line: LogLine) -> list[Timeout]:
    text = line.text
    out: list[Timeout] = []
    starts = [m.start() for m in _first(pat.WD.finditer(text))]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(text)
        seg = text[start:end]
        out.append(_collective(ctx, line, start, seg, "collective"))
    if not starts:
        ran = pat.RAN.search(text)
        if ran:
            out.append(_collective(ctx, line, ran.start(), text, "collective"))
    for m in _first(pat.WORK_TIMEOUT.finditer(text)):
        out.append(Timeout(ctx.where(line, m.start()), "work", _int(m.group("seq")),
                           last_enqueued=_int(m.group("enq")),
                           last_completed=_int(m.group("done")), pg=ctx.facts(line).pg))
    hb = pat.HEARTBEAT.search(text)
    if hb:
        out.append(Timeout(ctx.where(line, hb.start()), "heartbeat", pg=ctx.facts(line).pg))
    gloo = pat.GLOO_TIMEOUT.search(text)
    if gloo:
        out.append(Timeout(ctx.where(line, gloo.start()), "gloo",
                           timeout_ms=_int(gloo.group("ms"))))
    if not out:
        nt = pat.NCCL_TIMEOUT.search(text)
        if nt:
            out.append(Timeout(ctx.where(line, nt.start()), "nccl"))
    return out


def _pg(text: str) -> str | None:
    m = pat.PG.search(text)
    if m is None:
        return None
    return f"{m.group('pg')} ({m.group('name')})" if m.group("name") else m.group("pg")


def _collective(ctx: _Context, line: LogLine, start: int, seg: str, kind: str) -> Timeout:
    def field_of(p: re.Pattern[str]) -> str | None:
        m = p.search(seg)
        return m.group("v") if m else None

    ran = pat.RAN.search(seg)
    return Timeout(
        ctx.where(line, start), kind, _int(field_of(pat.F_SEQ)), field_of(pat.F_OP),
        _int(field_of(pat.F_IN)), _int(field_of(pat.F_OUT)), _int(field_of(pat.F_TIMEOUT)),
        _int(ran.group("ran")) if ran else None, pg=ctx.facts(line).pg)


def _ambiguous(ctx: _Context, line: LogLine) -> Timeout | None:
    m = pat.AMBIGUOUS.search(line.text)
    if m is None or (pat.WATCHDOG_REASON.match(line.text, m.end())
                      and not pat.TIMEOUT_WORDS.search(line.text, m.end())):
        return None
    return Timeout(ctx.where(line, m.start()), "ambiguous", _int(m.group("seq")),
                   last_enqueued=_int(m.group("enq")), last_completed=_int(m.group("done")),
                   pg=ctx.facts(line).pg)


# --- transport failures ----------------------------------------------------------------------


def _peer(text: str) -> str | None:
    m = pat.PEER.search(text)
    return m.group("peer") if m else None


def _net(ctx: _Context, lines: Sequence[LogLine], i: int, level: str | None) -> NetError | None:
    """The first transport failure the line shows, most specific rule first."""
    line = lines[i]
    text = line.text

    def net(m: re.Match[str], transport: str, category: str, detail: str,
            severity: Severity = CRIT, status: int | None = None,
            call: str | None = None) -> NetError:
        return NetError(ctx.where(line, m.start()), transport, category, detail.strip()[:160],
                        severity, status, _peer(text[m.start():]), call)

    m = pat.IB_COMPLETION.search(text)
    if m:
        status = _int(m.group("st"))
        if status is None and m.group("name"):
            status = pat.IB_STATUS_NAMES.get(m.group("name"))
        transport = "RoCE" if pat.ROCE_GID.search(text) else "InfiniBand"
        meaning = pat.IB_STATUS.get(status, "error") if status is not None else "error"
        if "Flushed" in text and status is None:
            status, meaning = 5, pat.IB_STATUS[5]
        hca = pat.HCA.search(text)
        detail = f"completion status {status if status is not None else '?'} ({meaning})"
        if hca:
            detail += f" on {hca.group('hca')}"
        return net(m, transport, "ib-flush" if status == 5 else "ib-completion", detail,
                   status=status)
    m = pat.IB_ASYNC.search(text)
    if m:
        ev = m.group("ev").strip()
        sev = WARN if "GID table change" in ev else CRIT
        return net(m, "InfiniBand", "ib-async", f"HCA async event: {ev}", sev)
    m = pat.IBV_CALL.search(text)
    if m:
        fn = m.group("fn")
        cat = ("ibv_reg_mr" if fn.startswith("ibv_reg_mr") else
               "ibv_create" if fn.startswith("ibv_create") else
               "ibv_modify_qp" if fn.startswith("ibv_modify_qp") else
               "ib-completion" if fn.startswith("ibv_poll_cq") else "ib")
        return net(m, "InfiniBand", cat, f"{fn} failed: {text[m.start():][:120]}", call=fn)
    m = pat.OFI.search(text)
    if m:
        return net(m, "OFI/EFA", "ofi", text[m.start():][:140], call=m.group("fn"))
    m = pat.IBVERBS.search(text)
    if m:
        if level == "INFO" and not ctx.has_ib:
            return None
        return net(m, "InfiniBand", "ibverbs-missing",
                   "libibverbs could not be loaded; NCCL falls back to TCP sockets", WARN)
    if level == "INFO":
        return None
    named = pat.NET_NAMED.search(text)
    if named and pat.FAIL_WORDS.search(text[named.end():]):
        t = named.group("t")
        if t.upper() == "OFI":
            return net(named, "OFI/EFA", "ofi", text[named.start():][:140])
        if t.upper().startswith("IB"):
            return net(named, "InfiniBand", "ib", text[named.start():][:140])
        if t.lower() == "socket":
            return net(named, "Socket", "socket", text[named.start():][:140])
        return net(named, t, "net", text[named.start():][:140])
    m = pat.SOCKET_FN.search(text) or pat.NET_COLON.search(text)
    if m:
        return net(m, "Socket", "socket", text[m.start():][:160])
    m = pat.BOOTSTRAP.search(text)
    if m and "mismatch" not in text[m.start():m.start() + 200]:
        return net(m, "bootstrap", "bootstrap", text[m.start():][:160])
    m = pat.NO_IFACE.search(text)
    if m and pat.DIST_CONTEXT.search(text):
        return net(m, "bootstrap", "bootstrap", text[m.start():][:160])
    m = pat.STORE.search(text)
    if m and not pat.WARN_LEVEL.match(text):
        return net(m, "c10d store", "store", text[m.start():][:160])
    m = pat.GLOO_NET.search(text)
    if m:
        errno = pat.ERRNO.search(text, m.start())
        return net(m, "gloo", "socket", errno.group(0) if errno else text[m.start():][:160])
    m = pat.ERRNO.search(text)
    if m and (pat.DIST_CONTEXT.search(text) or _after_last_error(lines, i)):
        return net(m, "Socket", "socket", m.group(0))
    return None


# --- other NCCL errors -----------------------------------------------------------------------


def _last_error(lines: Sequence[LogLine], i: int) -> str | None:
    """The ``Last error:`` text of the report starting at line ``i``: "" when the section is
    there but empty, None when there is none within a few lines."""
    for j in range(i, min(len(lines), i + 4)):
        m = pat.LAST_ERROR.search(lines[j].text)
        if m is None:
            continue
        rest = pat.SRUN_LABEL.sub("", m.group("rest"), count=1).strip()
        if rest:
            return rest[:200]
        nxt = lines[j + 1].text.strip() if j + 1 < len(lines) else ""
        return "" if not nxt or pat.SECTION.match(nxt) else nxt[:200]
    return None


def _errors(ctx: _Context, lines: Sequence[LogLine], i: int, level: str | None,
            has_net: bool) -> list[NcclError]:
    line = lines[i]
    text = line.text
    out: list[NcclError] = []
    warn = pat.NCCL_WARN.search(text) if level == "WARN" or "NCCL WARN" in text else None
    if warn is not None and not has_net:
        msg = warn.group("msg").strip()
        kind = _warn_kind(msg)
        if kind is not None:
            out.append(NcclError(ctx.where(line, warn.start()), kind, msg[:160]))
    if level is not None:
        return out
    seen = {e.kind for e in out}
    for kind, pattern in pat.ERR_KINDS:
        m = pattern.search(text)
        if m and kind not in seen:
            seen.add(kind)
            out.append(NcclError(ctx.where(line, m.start()), kind, _detail(text, m),
                                 _last_error(lines, i)))
    if not seen:
        g = pat.NCCL_ERROR_GENERIC.search(text)
        if g:
            desc = g.group("desc").strip()
            kind = next((k for words, k in pat.DESC_KINDS if words in desc.lower()), "error")
            out.append(NcclError(ctx.where(line, g.start()), kind,
                                 desc[:120] if kind == "error" else _detail(text, g),
                                 _last_error(lines, i)))
            seen.add(kind)
    ab = pat.ABORTED.search(text)
    if ab and not seen:
        reason = (ab.group("reason") or "").strip()
        out.append(NcclError(ctx.where(line, ab.start(), _int(ab.group("rank"))), "aborted",
                             reason[:160]))
    if has_net:
        out = [e for e in out if not e.wrapper]
    return out


def _detail(text: str, m: re.Match[str]) -> str:
    """The cause the line names after the error class (NCCL's stock description and
    version are not one)."""
    cuda = pat.CUDA_FAILURE.search(text, m.end())
    return cuda.group(0)[:120] if cuda else ""


def _warn_kind(msg: str) -> str | None:
    """The error kind an ``NCCL WARN`` message (not a transport one) stands for."""
    if pat.CUDA_FAILURE.search(msg) or "Cuda failure" in msg:
        return "cuda"
    if pat.WARN_USAGE.search(msg):
        return "invalid-usage"
    if re.search(r"shared memory|/dev/shm", msg):
        return "system"
    if pat.WARN_BENIGN.search(msg):
        return None
    return "warn" if not pat.FAIL_WORDS.search(msg) else "error"


# --- rank failures ---------------------------------------------------------------------------


def _block_text(lines: Sequence[LogLine], i: int, pos: int) -> str:
    """The torchelastic failure block (``[0]: time host rank exitcode … traceback``) around
    line ``i``: the rest of the line when it was flattened, else its neighbour lines."""
    text = lines[i].text
    if pat.SUMMARY_EXIT.search(text):
        heads = [m.start() for m in re.finditer(r"\[\d{1,5}\]:", text)]
        start = max([h for h in heads if h <= pos], default=0)
        end = min([h for h in heads if h > pos], default=len(text))
        return text[start:end]
    parts = [text]
    for j in range(i - 1, max(-1, i - 4), -1):
        t = lines[j].text.strip()
        if not t or pat.BLOCK_END.match(t):
            break
        parts.insert(0, t)
    for j in range(i + 1, min(len(lines), i + 6)):
        t = lines[j].text.strip()
        if not t or pat.BLOCK_END.match(t):
            break
        parts.append(t)
    return " ".join(parts)


def _signal_of(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    return pat.SIGNALS.get(-code, f"signal {-code}")


def _failures(ctx: _Context, lines: Sequence[LogLine], i: int) -> list[RankFailure]:
    line = lines[i]
    text = line.text
    out: list[RankFailure] = []
    code: int | None
    for m in _first(pat.ELASTIC_FAILED.finditer(text)):
        code = int(m.group("code"))
        out.append(RankFailure(ctx.where(line, m.start()), "torchelastic", None,
                               int(m.group("lr")), code, _signal_of(code), _int(m.group("pid")),
                               line.host))
    for m in _first(pat.SUMMARY_RANK.finditer(text)):
        block = _block_text(lines, i, m.start())
        ex = pat.SUMMARY_EXIT.search(block)
        host = pat.SUMMARY_HOST.search(block)
        sig = pat.SIGNAL.search(block)
        code = _int(ex.group("code")) if ex else None
        signal = sig.group("name") if sig else _signal_of(code)
        tm = pat.SUMMARY_TIME.search(block)
        where = ctx.where(line, m.start(), int(m.group("rank")))
        where = Where(where.line, re.sub(r"\s+", " ", block).strip()[:EVIDENCE_MAX],
                      where.host, where.rank, where.gpu, tm.group("time") if tm else where.time)
        out.append(RankFailure(where, "torchelastic", int(m.group("rank")), int(m.group("lr")),
                               code, signal, _int(ex.group("pid")) if ex else None,
                               host.group("host") if host else line.host))
    if not out:
        for m in _first(pat.SIGNAL.finditer(text)):
            out.append(RankFailure(ctx.where(line, m.start()), "torchelastic", signal=m.group(
                "name"), exitcode=-int(m.group("num")), pid=int(m.group("pid")), host=line.host))
    for m in _first(pat.SRUN.finditer(text)):
        tasks = m.group("tasks")
        what = m.group("what")
        code = _int(m.group("code"))
        signal = ("SIGKILL" if what == "Killed" else "SIGSEGV" if what.startswith("Seg") else
                  "SIGABRT" if what == "Aborted" else "SIGBUS" if what == "Bus error" else None)
        rank = int(tasks) if tasks.isdigit() else None
        out.append(RankFailure(ctx.where(line, m.start(), rank), "srun", rank, None,
                               code, signal, None, m.group("host")))
    for m in _first(pat.MPI.finditer(text)):
        num = int(m.group("num"))
        out.append(RankFailure(ctx.where(line, m.start(), int(m.group("rank"))), "mpirun",
                               int(m.group("rank")), None, -num, pat.SIGNALS.get(num),
                               int(m.group("pid")), m.group("host")))
    lr = pat.LOCAL_RANK_ARG.search(text)
    ds = pat.DS_EXIT.search(text)
    if ds and int(ds.group("code")) != 0:
        code = int(ds.group("code"))
        out.append(RankFailure(ctx.where(line, ds.start()), "deepspeed", None,
                               _int(lr.group("lr")) if lr else None, code, _signal_of(code),
                               None, line.host))
    sp = pat.SUBPROC.search(text)
    if sp and lr:
        code = -int(sp.group("num")) if sp.group("num") else int(sp.group("code") or 0)
        if code != 0:
            out.append(RankFailure(ctx.where(line, sp.start()), "launch", None,
                                   int(lr.group("lr")), code, sp.group("name") or
                                   _signal_of(code), None, line.host))
    if not out:
        cf = pat.CHILD_FAILED.search(text)
        if cf:
            out.append(RankFailure(ctx.where(line, cf.start()), "ChildFailedError",
                                   host=line.host))
    return out


# --- parse -----------------------------------------------------------------------------------


def parse(lines: Sequence[LogLine]) -> NcclReport:
    """Every NCCL / torch.distributed record in the input; never raises.

    Wrapper errors (``ncclSystemError`` / ``ncclRemoteError`` / a bare communicator abort)
    are dropped when the line itself or their ``Last error:`` names a transport failure,
    and when the section is empty but the input shows a transport failure elsewhere: they
    re-report that failure and are not a second one.
    """
    ctx = _Context.of(lines)
    timeouts: list[Timeout] = []
    nets: list[NetError] = []
    errors: list[NcclError] = []
    failures: list[RankFailure] = []
    completed: list[int] = []
    for i, line in enumerate(lines):
        text = line.text
        if "Init COMPLETE" in text and len(completed) < MAX_INIT_LINES:
            completed.append(line.number)
        if not text or not _maybe(text):
            continue
        prefix = pat.NCCL_PREFIX.search(text)
        lm = pat.NCCL_LEVEL.search(text) if prefix is None else None
        level = prefix.group("level") if prefix else (lm.group("level") if lm else None)
        found = _timeouts(ctx, line) if level is None else []
        timeouts.extend(found)
        net = _net(ctx, lines, i, level)
        if net is not None:
            nets.append(net)
        errs = [] if found else _errors(ctx, lines, i, level, net is not None)
        errors.extend(errs)
        if not found and net is None and not errs and level is None:
            amb = _ambiguous(ctx, line)
            if amb is not None:
                timeouts.append(amb)
        if level is None:
            failures.extend(_failures(ctx, lines, i))
    errors = [e for e in errors if not _absorbed(e, bool(nets))]
    return NcclReport(tuple(timeouts), tuple(nets), tuple(errors), tuple(failures),
                      tuple(completed))


MAX_INIT_LINES = 1 << 16
"""``Init COMPLETE`` lines kept (one per rank and communicator)."""


def _transport_text(text: str) -> bool:
    return bool(pat.ERRNO.search(text) or pat.SOCKET_FN.search(text) or pat.IBV_CALL.search(text)
                or pat.IB_COMPLETION.search(text) or pat.OFI.search(text)
                or re.search(r"\bNET/(?!Plugin)|\bsocket|[Bb]ootstrap", text))


def _absorbed(e: NcclError, any_net: bool) -> bool:
    if not e.wrapper:
        return False
    if e.last_error:
        return _transport_text(e.last_error)
    return any_net
