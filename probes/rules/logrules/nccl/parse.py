"""NCCL / torch.distributed log rules: the ``nccl`` step of triage.

A distributed job's log says the same thing many times (every rank logs its watchdog
timeout; NCCL wraps one socket failure in ``ncclSystemError``, then torch wraps that in
``DistBackendError``), so lines are first read into typed records (:func:`parse`) and the
records are then folded into at most one finding per code (:func:`scan`), told for the whole
incident: which ranks, hosts and GPUs, and what the first failure was.

Codes follow ``shared/EXPLAIN-CONTRACT.md``: ``nccl-timeout`` (collective watchdog timeouts),
``nccl-net-error`` (IB, RoCE, OFI/EFA, socket, bootstrap and c10d-store transport failures,
also when NCCL wraps them as a system or remote error), ``nccl-error`` (every other NCCL
error) and ``rank-failed`` (a launcher reports a dead rank).

Rules match with ``re.search`` on the peeled message, so a flattened traceback (``13: ``
srun labels mid-line), a progress bar glued in front or an unknown prefix cannot hide a
record.  ``NCCL INFO`` lines are never errors on their own (the ``-> 2`` return-code chains
only echo a failure already logged by ``NCCL WARN``); the one exception is the libibverbs
fallback on an InfiniBand host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from probes.rules.logrules.lines import LogLine
from probes.rules.result import ExplainFinding
from probes.rules.text import clean_line
from probes.triage import Severity, Step

CRIT = Severity.CRITICAL
WARN = Severity.WARNING

EVIDENCE_MAX = 600
"""Evidence is one log line; a flattened one is cut to a window around the match."""
_N = r"\d{1,18}"
"""Integers are bounded so ``int()`` never meets Python's digit limit on junk input."""

# --- where a record comes from ---------------------------------------------------------------

_NCCL_PREFIX = re.compile(
    r"(?:^|\s)(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d{1,10}):(?P<tid>\d{1,10})\s+"
    r"\[(?P<dev>\d{1,3})\]\s+(?:\S+\s+)?NCCL\s+(?P<level>INFO|WARN|TRACE|ABORT)\b")
"""NCCL_DEBUG output: ``host:pid:tid [cudaDev] [file.cc:line] NCCL WARN …``."""
_NCCL_LEVEL = re.compile(r"\bNCCL (?P<level>INFO|WARN|TRACE)\b")
_INIT = re.compile(
    rf"\brank (?P<rank>{_N}) nranks {_N} cudaDev (?P<dev>\d{{1,3}})(?: nvmlDev \d{{1,3}})?"
    r" busId (?P<bus>[0-9a-fA-F]{1,12})\b")
"""The communicator init line that ties a rank to a process and a PCI bus id."""
_TEXT_RANK = re.compile(r"\[(?:PG\s[^\[\]]{0,80}?\s)?Rank\s?(?P<rank>\d{1,6})\]")
_SRUN_LABEL = re.compile(r"(?:^|(?<=\s))(?P<rank>\d{1,5}): (?=\S)")
_GLOG_TIME = re.compile(
    r"(?:^|\[)[EWIF](?P<mon>1[0-2]|0?[1-9])(?P<day>[0-3]\d) (?P<clock>\d\d:\d\d:\d\d(?:\.\d+)?)\b")
_ISO_TIME = re.compile(r"^\[?(?P<t>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)")
_WARN_LEVEL = re.compile(r"^\[W |^W\d{4} |^\[W\d{4} ")
"""torch's glog warning level: c10d prints socket retries at this level in healthy runs."""


@dataclass(frozen=True)
class Where:
    """Which line a record is on and which rank, host and GPU the log says it belongs to."""

    line: int
    evidence: str
    host: str | None = None
    rank: int | None = None
    gpu: str | None = None
    time: str | None = None


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeout:
    """A collective that the watchdog (or gloo) gave up on.

    ``kind`` is ``collective`` (``Watchdog caught collective operation timeout``), ``work``
    (``Timeout at NCCL work``), ``heartbeat`` (the watchdog itself hung), ``gloo``,
    ``nccl`` (``ncclTimeout``) or ``ambiguous`` (``Exception (either an error or timeout)
    detected by watchdog``: a follow-up line that does not say which).
    """

    where: Where
    kind: str
    seq: int | None = None
    op_type: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    pg: str | None = None


@dataclass(frozen=True)
class NetError:
    """A transport failure: ``category`` picks the advice, ``transport`` names the fabric."""

    where: Where
    transport: str
    category: str
    detail: str
    severity: Severity = CRIT
    status: int | None = None
    peer: str | None = None
    call: str | None = None


@dataclass(frozen=True)
class NcclError:
    """An NCCL error that is not a transport failure (or not yet known to be one).

    ``wrapper`` kinds (system, remote, abort) are how NCCL and torch re-report a failure
    logged elsewhere; ``last_error`` is the ``Last error:`` text that follows, if any.
    """

    where: Where
    kind: str
    detail: str = ""
    last_error: str | None = None

    @property
    def wrapper(self) -> bool:
        return self.kind in _WRAPPERS


@dataclass(frozen=True)
class RankFailure:
    """A launcher's report of one dead rank (or, for ``ChildFailedError``, of the job)."""

    where: Where
    launcher: str
    rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    signal: str | None = None
    pid: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class NcclReport:
    """Every record of one input, in line order."""

    timeouts: tuple[Timeout, ...] = ()
    net_errors: tuple[NetError, ...] = ()
    errors: tuple[NcclError, ...] = ()
    failures: tuple[RankFailure, ...] = ()


# --- patterns --------------------------------------------------------------------------------

_WD = re.compile(r"(?:Watchdog\s+)?[Cc]aught collective operation timeout")
_RAN = re.compile(rf"ran for (?P<ran>{_N}) milliseconds before timing out")
_WORK_TIMEOUT = re.compile(
    rf"Timeout at NCCL work: (?P<seq>{_N})(?:, last enqueued NCCL work: (?P<enq>-?{_N}), "
    rf"last completed NCCL work: (?P<done>-?{_N}))?")
_HEARTBEAT = re.compile(
    rf"Heartbeat monitor timed out|watchdog got stuck for (?P<stuck>{_N}) seconds")
_GLOO_TIMEOUT = re.compile(rf"Timed out waiting (?P<ms>{_N}) ?ms for (?:send|recv) operation")
_NCCL_TIMEOUT = re.compile(r"\bncclTimeout\b")
_AMBIGUOUS = re.compile(
    rf"Exception \(either an error or timeout\) detected by watchdog"
    rf"(?: at work: (?P<seq>{_N}))?(?:, last enqueued NCCL work: (?P<enq>-?{_N}), "
    rf"last completed NCCL work: (?P<done>-?{_N}))?"
    r"|Some NCCL operations have failed or timed out"
    r"|(?:NCCL|Process group) watchdog thread terminated with exception")
_PG = re.compile(r"\[PG (?P<pg>[^\s\]]{1,40})(?: \((?P<name>[^)\]]{1,60})\))? Rank")

_F_SEQ = re.compile(rf"\bSeqNum=(?P<v>{_N})(?=[,)\s])")
_F_OP = re.compile(r"\bOpType=(?P<v>\w{1,40})(?=[,)\s])")
_F_IN = re.compile(rf"\bNumelIn=(?P<v>-?{_N})(?=[,)\s])")
_F_OUT = re.compile(rf"\bNumelOut=(?P<v>-?{_N})(?=[,)\s])")
_F_TIMEOUT = re.compile(rf"\bTimeout\(ms\)=(?P<v>{_N})(?=[,)\s])")

_DIST_CONTEXT = re.compile(
    r"NCCL|nccl|\bsocket[A-Z]\w*|[Bb]ootstrap|c10d|gloo|TCPStore|ProcessGroup|Dist\w*Error"
    r"|NET/|torch\.distributed|rendezvous|Last error")
"""Words that make a bare errno message (``Connection refused``) a distributed one."""
_ERRNO = re.compile(
    r"Connection reset by peer|Connection refused|Software caused connection abort"
    r"|Connection timed out|No route to host|Network is unreachable|Broken pipe"
    r"|Connection closed by (?:remote )?peer")
_FAIL_WORDS = re.compile(
    r"fail|error|unable|could not|couldn't|cannot|can't|abort|refused|reset by|timed? ?out"
    r"|truncated|closed|unreachable|no route|broken pipe|RC:\s*-?[1-9]", re.IGNORECASE)
_IB_COMPLETION = re.compile(
    r"Got completion(?: from peer (?P<peer>\S+?))?\s+with\s+(?:error\s*|status\s*=\s*)"
    r"(?:IBV_WC_(?P<name>[A-Z_]+)\s*\(?)?(?P<st>\d{1,3})?")
_IB_ASYNC = re.compile(r"NET/IB\s*:\s*Got async (?:event|error)\s*:\s*(?P<ev>[^\n]{0,80})")
_IBV_CALL = re.compile(
    r"\b(?P<fn>ibv_\w{2,40})\b(?:\(\))?[^\n]{0,40}?\b(?:fail|error|returned)", re.IGNORECASE)
_NET_NAMED = re.compile(r"\bNET/(?P<t>(?!Plugin\b)[A-Za-z][\w]{0,20})\b")
_OFI = re.compile(
    r"\b(?P<fn>fi_\w{2,30})\b[^\n]{0,60}?(?:fail|error|RC:\s*-?[1-9])"
    r"|\b(?:aws-ofi-nccl|libfabric|OFI)\b[^\n]{0,80}?(?:fail|error|unable)", re.IGNORECASE)
_IBVERBS = re.compile(r"Failed to open libibverbs\.so")
_IB_EVIDENCE = re.compile(r"\bib[a-z]{0,3}\d|\bmlx\d_\d|NCCL_IB_|NET/IB|InfiniBand|RoCE")
_SOCKET_FN = re.compile(
    r"\b(?P<fn>socket[A-Z]\w{2,30})\s*:[^\n]{0,160}?"
    r"(?:fail|error|refused|reset|abort|timed? ?out|closed|unreachable)")
_NET_COLON = re.compile(r"\bNet : [^\n]{0,120}?(?:fail|closed|error|reset)", re.IGNORECASE)
_BOOTSTRAP = re.compile(
    r"\b[Bb]ootstrap\w*\s*:?[^\n]{0,100}?"
    r"(?:fail|error|unable|timed? ?out|refused|reset|abort|closed|no socket interface)")
_NO_IFACE = re.compile(r"\bno\s+(?:\w+\s+)?interfaces?\s+found|no usable interface",
                       re.IGNORECASE)
_STORE = re.compile(
    r"store->get\([^)]{0,80}\) got error: (?P<err>[^\n]{0,120})"
    r"|client socket has (?:timed out|failed to connect)[^\n]{0,120}"
    r"|\bDistNetworkError\b|TCPStore[^\n]{0,80}?(?:fail|error|timed? ?out|refused|reset)"
    r"|\bSocket Timeout\b")
_GLOO_NET = re.compile(r"gloo[^\n]{0,160}?(?:Connection|Read error|Write error|closed)")
_PEER = re.compile(
    r"(?:from peer|Connect to|connect to|from|to|peer)\s+"
    r"(?P<peer>\[[\w.:%\-]{2,80}\]:\d{1,5}|[\w.:%\-]{3,80}?<\d{1,5}>)")
_HCA = re.compile(r"\bhca (?P<hca>\w{2,20})")
_ROCE_GID = re.compile(r"Gids?\s*::ffff:")

_ERR_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cuda", re.compile(r"\bncclUnhandledCudaError\b|unhandled cuda error|NCCL Error 1\b")),
    ("internal", re.compile(
        r"\bncclInternalError\b|internal error - please report|NCCL Error 3\b")),
    ("invalid-argument", re.compile(
        r"\bncclInvalidArgument\b|invalid argument \(run with NCCL_DEBUG|NCCL Error 4\b")),
    ("invalid-usage", re.compile(
        r"\bncclInvalidUsage\b|invalid usage \(run with NCCL_DEBUG|NCCL Error 5\b")),
    ("system", re.compile(r"\bncclSystemError\b|unhandled system error|NCCL Error 2\b")),
    ("remote", re.compile(
        r"\bncclRemoteError\b|remote process exited or there was a network error"
        r"|NCCL Error 6\b")),
)
_NCCL_ERROR_GENERIC = re.compile(r"NCCL error(?: in: ?\S+?,|:)\s*(?P<desc>[^,(\n]{1,120})")
_ABORTED = re.compile(
    r"NCCL communicator was aborted(?: on rank (?P<rank>\d{1,6}))?\.?"
    r"(?:\s*Original reason for failure was:\s*(?P<reason>[^\n]{0,200}))?")
_DESC_KINDS: tuple[tuple[str, str], ...] = (
    ("unhandled cuda error", "cuda"), ("unhandled system error", "system"),
    ("internal error", "internal"), ("invalid argument", "invalid-argument"),
    ("invalid usage", "invalid-usage"), ("remote process exited", "remote"))
_NCCL_WARN = re.compile(r"\bNCCL WARN\s+(?P<msg>[^\n]{0,300})")
_CUDA_FAILURE = re.compile(
    r"Cuda failure\s*(?:\d{1,4}\s*)?'(?P<what>[^']{1,100})'|Failed to CUDA \w+ \d+ bytes"
    r"|\bcuda\w*(?:Malloc|Alloc)\w* failed", re.IGNORECASE)
_WARN_USAGE = re.compile(
    r"Duplicate GPU detected|collective mismatch|mismatch in rank count|[Ii]nvalid "
    r"|[Mm]ismatch")
_WARN_BENIGN = re.compile(
    r"Could not find real path|deprecated|No plugin found|is ignored|Ignoring", re.IGNORECASE)
_NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d{1,3}\.\d{1,3}\.\d{1,4}[\w.+\-]{0,30})")
_LAST_ERROR = re.compile(r"\bLast error:\s*(?P<rest>[^\n]*)")
_SECTION = re.compile(
    r"^(?:Exception raised from|C\+\+ CapturedTraceback|Traceback|frame #|terminate called"
    r"|\s*File \")")

_ELASTIC_FAILED = re.compile(
    rf"failed \(exitcode: (?P<code>-?{_N})\) local_rank: (?P<lr>{_N})"
    rf"(?: \(pid: (?P<pid>{_N})\))?")
_CHILD_FAILED = re.compile(r"\bChildFailedError\b")
_SUMMARY_RANK = re.compile(rf"\brank\s*:\s*(?P<rank>{_N})\s*\(local_rank:\s*(?P<lr>{_N})\)")
_SUMMARY_EXIT = re.compile(rf"\bexitcode\s*:\s*(?P<code>-?{_N})(?:\s*\(pid:\s*(?P<pid>{_N})\))?")
_SUMMARY_HOST = re.compile(r"\bhost\s*:\s*(?P<host>[A-Za-z0-9][\w.\-]{0,100})")
_SUMMARY_TIME = re.compile(r"\btime\s*:\s*(?P<time>\d{4}-\d\d-\d\d[_ T]\d\d:\d\d:\d\d)")
_BLOCK_HEAD = re.compile(r"^\[\d{1,5}\]:")
_BLOCK_END = re.compile(r"^(?:[=\-]{5,}|Root Cause|Failures:|\[\d{1,5}\]:)")
_SIGNAL = re.compile(
    rf"Signal (?P<num>\d{{1,3}}) \((?P<name>SIG[A-Z0-9]{{2,8}})\) received by PID (?P<pid>{_N})")
_SRUN = re.compile(
    r"srun: error: (?P<host>[\w.\-]{1,100}): tasks? (?P<tasks>[\d,\-\[\]]{1,100}): "
    r"(?P<what>Killed|Exited with exit code (?P<code>\d{1,3})|Segmentation fault|Aborted"
    r"|Bus error)")
_MPI = re.compile(
    rf"process rank (?P<rank>{_N}) with PID (?P<pid>{_N}) on node (?P<host>[\w.\-]{{1,100}}) "
    r"exited on signal (?P<num>\d{1,3})")
_DS_EXIT = re.compile(rf"exits with return code = (?P<code>-?{_N})")
_SUBPROC = re.compile(
    r"died with <Signals\.(?P<name>SIG[A-Z0-9]{2,8}): (?P<num>\d{1,3})>"
    rf"|returned non-zero exit status (?P<code>{_N})")
_LOCAL_RANK_ARG = re.compile(r"--local[_-]rank[= ](?P<lr>\d{1,5})")

_SIGNALS: Mapping[int, str] = {
    1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
    11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}

_KEYWORDS = (
    "nccl", "watchdog", "timeout", "timed out", "ibv_", "net/", "socket", "connection",
    "bootstrap", "exitcode", "childfailed", "signal", "libibverbs", "fi_", "ofi", "gloo",
    "store", "srun: error", "exited on signal", "return code", "died with", "exit status",
    "milliseconds", "network", "broken pipe", "no route", "local_rank", "net :")
"""Lowercase words one of which every rule's match contains: other lines are skipped."""

_WRAPPERS = frozenset({"system", "remote", "aborted"})
_IB_STATUS: Mapping[int, str] = {
    1: "local length error", 2: "local QP operation error", 4: "local protection error",
    5: "work request flushed", 7: "bad response", 8: "local access error",
    9: "remote invalid request", 10: "remote access error", 11: "remote operation error",
    12: "transport retry counter exceeded", 13: "RNR retry counter exceeded",
    19: "fatal error", 20: "response timeout", 21: "general error"}
_IB_STATUS_NAMES: Mapping[str, int] = {
    "LOC_LEN_ERR": 1, "LOC_QP_OP_ERR": 2, "LOC_PROT_ERR": 4, "WR_FLUSH_ERR": 5,
    "BAD_RESP_ERR": 7, "LOC_ACCESS_ERR": 8, "REM_INV_REQ_ERR": 9, "REM_ACCESS_ERR": 10,
    "REM_OP_ERR": 11, "RETRY_EXC_ERR": 12, "RNR_RETRY_EXC_ERR": 13, "FATAL_ERR": 19,
    "RESP_TIMEOUT_ERR": 20, "GENERAL_ERR": 21}

# --- actions ---------------------------------------------------------------------------------

ACTION_TIMEOUT = (
    "The timed-out ranks were waiting for a peer that never joined the collective. Find the "
    "slowest rank (one that logged no timeout, or the lowest SeqNum / last completed work) and "
    "check its GPU state (nvidia-smi, Xid lines in syslog) and syslog (OOM killer, NIC errors) "
    "first, then that rank's own traceback (dataloader stall, exception, uneven batches). "
    "TORCH_NCCL_TRACE_BUFFER_SIZE with TORCH_NCCL_DUMP_ON_TIMEOUT=1 records which rank lagged; "
    "raise the timeout only for a step known to be long (checkpointing, evaluation)")
ACTION_MISMATCH = (
    "A mismatched op_type at one SeqNum is a code divergence, not a slow network: some ranks "
    "took a branch that issues a different collective (rank-conditional logging, evaluation or "
    "checkpointing, uneven data, an early exit). Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL to "
    "have torch name the mismatch, and fix the branch; raising the timeout will not help")
ACTION_HEARTBEAT = (
    "The NCCL watchdog itself hung, usually inside a CUDA call on a hung GPU or driver: check "
    "that rank's GPU (nvidia-smi responds? Xid 13/31/43/79 or GSP timeouts in syslog) first")
ACTION_NET: Mapping[str, str] = {
    "ib-completion": (
        "Check the InfiniBand/RoCE link on this host and on the peer: port state and error "
        "counters (ibstat, ibv_devinfo, perfquery or ibdiagnet: symbol errors, link downs), "
        "cable and switch port; and whether the peer host crashed or hung (its syslog, Xid). "
        "Status 12 on a large or congested fabric: raise NCCL_IB_TIMEOUT and check congestion "
        "control"),
    "ib-flush": (
        "Work Request Flushed is a secondary error: the queue pair was already broken. Look "
        "earlier, here and on the peer host, for the first completion error or a rank that died"),
    "ib-async": (
        "The HCA reported a port or device event: check the port (ibstat: State Active, "
        "Physical state LinkUp), the cable and switch port, and dmesg for mlx5 errors"),
    "ibv_reg_mr": (
        "Memory registration failed: set the locked-memory limit to unlimited (ulimit -l, also "
        "inside the container), load nvidia-peermem for GPUDirect RDMA, check the HCA port is "
        "Active"),
    "ibv_create": (
        "The HCA ran out of resources: check the locked-memory limit (ulimit -l unlimited, also "
        "in the container), how many processes share the HCA, and the MLNX_OFED / rdma-core "
        "version"),
    "ibv_modify_qp": (
        "The queue pair could not be connected: on RoCE check NCCL_IB_GID_INDEX (the RoCE v2 "
        "GID), VLAN and PFC settings; check both ports are Active and the hosts reach each other"),
    "ib": (
        "Check the InfiniBand/RoCE HCA and port on this host (ibstat, ibv_devinfo, dmesg for "
        "mlx5 errors) and the peer; NCCL_IB_HCA=<=hca:port> pins the devices NCCL uses"),
    "ofi": (
        "EFA / libfabric failure. 'RC: 12, Cannot allocate memory' on memory registration means "
        "the locked-memory limit is too low (ulimit -l unlimited, also in the container) or GPU "
        "memory cannot be registered (FI_EFA_USE_DEVICE_RDMA, EFA driver); check that "
        "aws-ofi-nccl, libfabric and NCCL versions match and fi_info -p efa lists the device"),
    "socket": (
        "A TCP connection between ranks failed. Make NCCL_SOCKET_IFNAME name an interface every "
        "host can reach (not lo or docker0), open the ports between the nodes (firewall, "
        "security group) and check the peer address in the message: a reset or abort usually "
        "means the process on that peer died first, so look for its own error"),
    "bootstrap": (
        "NCCL's bootstrap (the TCP rendezvous before any collective) failed: check "
        "NCCL_SOCKET_IFNAME selects a routable interface on every host, that the nodes reach "
        "each other on it (firewall, IPv6 link-local needs the same interface), and that no "
        "rank died during start-up"),
    "store": (
        "The c10d store on MASTER_ADDR:MASTER_PORT could not be reached or dropped: check both "
        "are the same on every rank and reachable, and that rank 0 (which hosts the store) is "
        "still alive"),
    "ibverbs-missing": (
        "Install libibverbs (rdma-core) in the image or mount it from the host so NCCL can use "
        "InfiniBand/RoCE: it fell back to TCP sockets, far slower on this fabric. If the host "
        "has no IB or RoCE NIC, set NCCL_IB_DISABLE=1 instead"),
    "net": (
        "Check the network transport named in the message on this host and its peer (NIC "
        "state, cables, driver); NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET shows which NIC "
        "NCCL chose"),
}
_KIND_TEXT: Mapping[str, tuple[str, str]] = {
    "cuda": ("unhandled CUDA error (ncclUnhandledCudaError): a CUDA call inside NCCL failed",
             "Look for an Xid on this GPU in syslog (13, 31, 43, 48, 79) and for the first CUDA "
             "error of the rank: NCCL often only reports a fault the model's kernel caused"),
    "system": ("system error (ncclSystemError): an OS or library call inside NCCL failed",
               "Rerun with NCCL_DEBUG=INFO to see NCCL's 'Last error'; common causes are a "
               "too small /dev/shm in a container (--shm-size or --ipc=host), the "
               "locked-memory limit (ulimit -l) and a peer process that died"),
    "internal": ("internal error (ncclInternalError)",
                 "Check that every node runs the same NCCL (and plugin) version; if they do, "
                 "rerun with NCCL_DEBUG=INFO and report it to the NCCL developers"),
    "invalid-argument": ("invalid argument (ncclInvalidArgument): the program passed NCCL a "
                         "bad argument",
                         "A bug in the calling program: rerun with NCCL_DEBUG=WARN to see "
                         "which argument (device, count, datatype, root) NCCL rejected"),
    "invalid-usage": ("invalid usage (ncclInvalidUsage): the program called NCCL wrongly",
                      "A bug or misconfiguration in the calling program: rerun with "
                      "NCCL_DEBUG=WARN; typical causes are two ranks on one GPU (check "
                      "LOCAL_RANK to device mapping and CUDA_VISIBLE_DEVICES) and ranks that "
                      "disagree on a collective's arguments"),
    "remote": ("remote error (ncclRemoteError): a peer process exited or the network failed",
               "This rank is a victim: find the first rank that failed (rank-failed, Xid, "
               "OOM killer) or the network error on the peer host"),
    "aborted": ("NCCL communicator aborted",
                "The communicator was torn down after an earlier failure: look above for the "
                "watchdog timeout or NCCL error that caused it"),
    "error": ("NCCL error",
              "Rerun with NCCL_DEBUG=INFO to see which call failed and why"),
    "warn": ("NCCL warning",
             "Read the NCCL WARN line; rerun with NCCL_DEBUG=INFO for the context around it"),
}
ACTION_CUDA_OOM = (
    "The GPU had no memory left for NCCL's buffers: leave headroom (lower the batch size or "
    "PYTORCH_CUDA_ALLOC_CONF caching), or shrink NCCL's use (NCCL_BUFFSIZE, fewer channels, "
    "NCCL_NVLS_ENABLE=0 on NVSwitch systems)")
ACTION_SHM = (
    "NCCL could not create its shared-memory segment: the container's /dev/shm is too small; "
    "start it with --shm-size (e.g. 16g) or --ipc=host, or set NCCL_SHM_DISABLE=1")
ACTION_DUP_GPU = (
    "Two ranks were given the same GPU: set the device from LOCAL_RANK "
    "(torch.cuda.set_device(local_rank)) and check CUDA_VISIBLE_DEVICES per process")
ACTION_RANK: Mapping[str, str] = {
    "SIGKILL": (
        "SIGKILL from outside the program: most often the host's OOM killer (check step "
        "syslog for oom-kill on that host and the job's host RAM: dataloader workers, "
        "checkpoint loading), otherwise the scheduler enforcing a memory or time limit"),
    "SIGABRT": (
        "The process aborted: usually the NCCL watchdog tearing it down after a collective "
        "timeout or NCCL error (see the nccl findings), or a C++ assertion: read the lines "
        "before the abort"),
    "SIGSEGV": (
        "A segmentation fault in native code: check the rank's last lines for the library, and "
        "syslog for Xid / hardware errors; mismatched CUDA, NCCL or extension builds are common "
        "causes"),
    "SIGBUS": (
        "SIGBUS in a container is nearly always a too small /dev/shm (dataloader workers, NCCL "
        "shared memory): raise --shm-size or use --ipc=host"),
    "SIGTERM": (
        "Terminated from outside: the scheduler (time limit, preemption, scancel) or the "
        "launcher tearing the job down after another rank failed: find the first failure"),
    "exit": (
        "The rank exited with an error of its own: read that rank's first traceback above "
        "(the launcher's report is only the consequence); the other ranks were torn down"),
}


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


def _evidence(line: LogLine, pos: int) -> str:
    """The line as given; a long flattened one as a window around the record."""
    raw = clean_line(line.raw).strip()
    if len(raw) <= EVIDENCE_MAX:
        return raw
    text = line.text
    start = max(0, pos - 150)
    out = text[start:start + EVIDENCE_MAX - 2]
    return ("…" if start else "") + out + ("…" if start + len(out) < len(text) else "")


def _time(line: LogLine) -> str | None:
    if line.time:
        return line.time
    m = _GLOG_TIME.search(line.text[:40])
    if m:
        return f"{int(m.group('mon')):02d}-{m.group('day')} {m.group('clock')}"
    iso = _ISO_TIME.match(line.text)
    return iso.group("t") if iso else None


@dataclass
class _Context:
    """What the whole input says about processes: rank, bus id and whether it has IB NICs."""

    proc_rank: dict[tuple[str, str], int] = field(default_factory=dict)
    proc_bus: dict[tuple[str, str], str] = field(default_factory=dict)
    rank_proc: dict[int, tuple[str, str]] = field(default_factory=dict)
    has_ib: bool = False

    @classmethod
    def of(cls, lines: Sequence[LogLine]) -> _Context:
        ctx = cls()
        for line in lines:
            text = line.text
            if not ctx.has_ib and _IB_EVIDENCE.search(text):
                ctx.has_ib = True
            if "busId" not in text:
                continue
            p = _NCCL_PREFIX.search(text)
            m = _INIT.search(text)
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
        text = line.text
        if rank is None:
            named = [m for m in _TEXT_RANK.finditer(text) if m.start() <= pos + 40]
            if named:
                rank = int(named[-1].group("rank"))
        if rank is None:
            rank = line.rank
        if rank is None:
            rank = _srun_label(text, pos)
        host = line.host
        gpu: str | None = None
        p = _NCCL_PREFIX.search(text)
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
        return Where(line.number, _evidence(line, pos), host, rank, gpu, _time(line))


def _srun_label(text: str, pos: int) -> int | None:
    """The ``13: `` label nearest before ``pos`` in a line that srun output was flattened
    into (the same label at least twice, so a stray ``12: `` is not taken for one)."""
    labels = [m for m in _SRUN_LABEL.finditer(text) if m.start() > 0]
    if len(labels) < 2:
        return None
    before = [m for m in labels if m.start() <= pos] or labels
    value = before[-1].group("rank")
    return int(value) if sum(m.group("rank") == value for m in labels) >= 2 else None


def _maybe(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in _KEYWORDS)


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
    starts = [m.start() for m in _WD.finditer(text)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(text)
        seg = text[start:end]
        out.append(_collective(ctx, line, start, seg, "collective"))
    if not starts:
        ran = _RAN.search(text)
        if ran:
            out.append(_collective(ctx, line, ran.start(), text, "collective"))
    for m in _WORK_TIMEOUT.finditer(text):
        out.append(Timeout(ctx.where(line, m.start()), "work", _int(m.group("seq")),
                           last_enqueued=_int(m.group("enq")),
                           last_completed=_int(m.group("done")), pg=_pg(text)))
    hb = _HEARTBEAT.search(text)
    if hb:
        out.append(Timeout(ctx.where(line, hb.start()), "heartbeat", pg=_pg(text)))
    gloo = _GLOO_TIMEOUT.search(text)
    if gloo:
        out.append(Timeout(ctx.where(line, gloo.start()), "gloo",
                           timeout_ms=_int(gloo.group("ms"))))
    if not out:
        nt = _NCCL_TIMEOUT.search(text)
        if nt:
            out.append(Timeout(ctx.where(line, nt.start()), "nccl"))
    return out


def _pg(text: str) -> str | None:
    m = _PG.search(text)
    if m is None:
        return None
    return f"{m.group('pg')} ({m.group('name')})" if m.group("name") else m.group("pg")


def _collective(ctx: _Context, line: LogLine, start: int, seg: str, kind: str) -> Timeout:
    def field_of(p: re.Pattern[str]) -> str | None:
        m = p.search(seg)
        return m.group("v") if m else None

    ran = _RAN.search(seg)
    return Timeout(
        ctx.where(line, start), kind, _int(field_of(_F_SEQ)), field_of(_F_OP),
        _int(field_of(_F_IN)), _int(field_of(_F_OUT)), _int(field_of(_F_TIMEOUT)),
        _int(ran.group("ran")) if ran else None, pg=_pg(line.text))


def _ambiguous(ctx: _Context, line: LogLine) -> Timeout | None:
    m = _AMBIGUOUS.search(line.text)
    if m is None:
        return None
    return Timeout(ctx.where(line, m.start()), "ambiguous", _int(m.group("seq")),
                   last_enqueued=_int(m.group("enq")), last_completed=_int(m.group("done")),
                   pg=_pg(line.text))


# --- transport failures ----------------------------------------------------------------------


def _peer(text: str) -> str | None:
    m = _PEER.search(text)
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

    m = _IB_COMPLETION.search(text)
    if m:
        status = _int(m.group("st"))
        if status is None and m.group("name"):
            status = _IB_STATUS_NAMES.get(m.group("name"))
        transport = "RoCE" if _ROCE_GID.search(text) else "InfiniBand"
        meaning = _IB_STATUS.get(status, "error") if status is not None else "error"
        if "Flushed" in text and status is None:
            status, meaning = 5, _IB_STATUS[5]
        hca = _HCA.search(text)
        detail = f"completion status {status if status is not None else '?'} ({meaning})"
        if hca:
            detail += f" on {hca.group('hca')}"
        return net(m, transport, "ib-flush" if status == 5 else "ib-completion", detail,
                   status=status)
    m = _IB_ASYNC.search(text)
    if m:
        ev = m.group("ev").strip()
        sev = WARN if "GID table change" in ev else CRIT
        return net(m, "InfiniBand", "ib-async", f"HCA async event: {ev}", sev)
    m = _IBV_CALL.search(text)
    if m:
        fn = m.group("fn")
        cat = ("ibv_reg_mr" if fn.startswith("ibv_reg_mr") else
               "ibv_create" if fn.startswith("ibv_create") else
               "ibv_modify_qp" if fn.startswith("ibv_modify_qp") else
               "ib-completion" if fn.startswith("ibv_poll_cq") else "ib")
        return net(m, "InfiniBand", cat, f"{fn} failed: {text[m.start():][:120]}", call=fn)
    m = _OFI.search(text)
    if m:
        return net(m, "OFI/EFA", "ofi", text[m.start():][:140], call=m.group("fn"))
    m = _IBVERBS.search(text)
    if m:
        if level == "INFO" and not ctx.has_ib:
            return None
        return net(m, "InfiniBand", "ibverbs-missing",
                   "libibverbs could not be loaded; NCCL falls back to TCP sockets", WARN)
    if level == "INFO":
        return None
    named = _NET_NAMED.search(text)
    if named and _FAIL_WORDS.search(text[named.end():]):
        t = named.group("t")
        if t.upper() == "OFI":
            return net(named, "OFI/EFA", "ofi", text[named.start():][:140])
        if t.upper().startswith("IB"):
            return net(named, "InfiniBand", "ib", text[named.start():][:140])
        if t.lower() == "socket":
            return net(named, "Socket", "socket", text[named.start():][:140])
        return net(named, t, "net", text[named.start():][:140])
    m = _SOCKET_FN.search(text) or _NET_COLON.search(text)
    if m:
        return net(m, "Socket", "socket", text[m.start():][:160])
    m = _BOOTSTRAP.search(text)
    if m and "mismatch" not in text[m.start():m.start() + 200]:
        return net(m, "bootstrap", "bootstrap", text[m.start():][:160])
    m = _NO_IFACE.search(text)
    if m and _DIST_CONTEXT.search(text):
        return net(m, "bootstrap", "bootstrap", text[m.start():][:160])
    m = _STORE.search(text)
    if m and not _WARN_LEVEL.match(text):
        return net(m, "c10d store", "store", text[m.start():][:160])
    m = _GLOO_NET.search(text)
    if m:
        errno = _ERRNO.search(text, m.start())
        return net(m, "gloo", "socket", errno.group(0) if errno else text[m.start():][:160])
    m = _ERRNO.search(text)
    if m and (_DIST_CONTEXT.search(text) or _after_last_error(lines, i)):
        return net(m, "Socket", "socket", m.group(0))
    return None


# --- other NCCL errors -----------------------------------------------------------------------


def _last_error(lines: Sequence[LogLine], i: int) -> str | None:
    """The ``Last error:`` text of the report starting at line ``i``: "" when the section is
    there but empty, None when there is none within a few lines."""
    for j in range(i, min(len(lines), i + 4)):
        m = _LAST_ERROR.search(lines[j].text)
        if m is None:
            continue
        rest = _SRUN_LABEL.sub("", m.group("rest"), count=1).strip()
        if rest:
            return rest[:200]
        nxt = lines[j + 1].text.strip() if j + 1 < len(lines) else ""
        return "" if not nxt or _SECTION.match(nxt) else nxt[:200]
    return None


def _errors(ctx: _Context, lines: Sequence[LogLine], i: int, level: str | None,
            has_net: bool) -> list[NcclError]:
    line = lines[i]
    text = line.text
    out: list[NcclError] = []
    warn = _NCCL_WARN.search(text) if level == "WARN" or "NCCL WARN" in text else None
    if warn is not None and not has_net:
        msg = warn.group("msg").strip()
        kind = _warn_kind(msg)
        if kind is not None:
            out.append(NcclError(ctx.where(line, warn.start()), kind, msg[:160]))
    if level is not None:
        return out
    seen = {e.kind for e in out}
    for kind, pattern in _ERR_KINDS:
        m = pattern.search(text)
        if m and kind not in seen:
            seen.add(kind)
            out.append(NcclError(ctx.where(line, m.start()), kind, _detail(text, m),
                                 _last_error(lines, i)))
    if not seen:
        g = _NCCL_ERROR_GENERIC.search(text)
        if g:
            desc = g.group("desc").strip()
            kind = next((k for words, k in _DESC_KINDS if words in desc.lower()), "error")
            out.append(NcclError(ctx.where(line, g.start()), kind,
                                 desc[:120] if kind == "error" else _detail(text, g),
                                 _last_error(lines, i)))
            seen.add(kind)
    ab = _ABORTED.search(text)
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
    cuda = _CUDA_FAILURE.search(text, m.end())
    return cuda.group(0)[:120] if cuda else ""


def _warn_kind(msg: str) -> str | None:
    """The error kind an ``NCCL WARN`` message (not a transport one) stands for."""
    if _CUDA_FAILURE.search(msg) or "Cuda failure" in msg:
        return "cuda"
    if _WARN_USAGE.search(msg):
        return "invalid-usage"
    if re.search(r"shared memory|/dev/shm", msg):
        return "system"
    if _WARN_BENIGN.search(msg):
        return None
    return "warn" if not _FAIL_WORDS.search(msg) else "error"


# --- rank failures ---------------------------------------------------------------------------


def _block_text(lines: Sequence[LogLine], i: int, pos: int) -> str:
    """The torchelastic failure block (``[0]: time host rank exitcode … traceback``) around
    line ``i``: the rest of the line when it was flattened, else its neighbour lines."""
    text = lines[i].text
    if _SUMMARY_EXIT.search(text):
        heads = [m.start() for m in re.finditer(r"\[\d{1,5}\]:", text)]
        start = max([h for h in heads if h <= pos], default=0)
        end = min([h for h in heads if h > pos], default=len(text))
        return text[start:end]
    parts = [text]
    for j in range(i - 1, max(-1, i - 4), -1):
        t = lines[j].text.strip()
        if not t or _BLOCK_END.match(t):
            break
        parts.insert(0, t)
    for j in range(i + 1, min(len(lines), i + 6)):
        t = lines[j].text.strip()
        if not t or _BLOCK_END.match(t):
            break
        parts.append(t)
    return " ".join(parts)


def _signal_of(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    return _SIGNALS.get(-code, f"signal {-code}")


def _failures(ctx: _Context, lines: Sequence[LogLine], i: int) -> list[RankFailure]:
    line = lines[i]
    text = line.text
    out: list[RankFailure] = []
    code: int | None
    for m in _ELASTIC_FAILED.finditer(text):
        code = int(m.group("code"))
        out.append(RankFailure(ctx.where(line, m.start()), "torchelastic", None,
                               int(m.group("lr")), code, _signal_of(code), _int(m.group("pid")),
                               line.host))
    for m in _SUMMARY_RANK.finditer(text):
        block = _block_text(lines, i, m.start())
        ex = _SUMMARY_EXIT.search(block)
        host = _SUMMARY_HOST.search(block)
        sig = _SIGNAL.search(block)
        code = _int(ex.group("code")) if ex else None
        signal = sig.group("name") if sig else _signal_of(code)
        tm = _SUMMARY_TIME.search(block)
        where = ctx.where(line, m.start(), int(m.group("rank")))
        where = Where(where.line, re.sub(r"\s+", " ", block).strip()[:EVIDENCE_MAX],
                      where.host, where.rank, where.gpu, tm.group("time") if tm else where.time)
        out.append(RankFailure(where, "torchelastic", int(m.group("rank")), int(m.group("lr")),
                               code, signal, _int(ex.group("pid")) if ex else None,
                               host.group("host") if host else line.host))
    if not out:
        for m in _SIGNAL.finditer(text):
            out.append(RankFailure(ctx.where(line, m.start()), "torchelastic", signal=m.group(
                "name"), exitcode=-int(m.group("num")), pid=int(m.group("pid")), host=line.host))
    for m in _SRUN.finditer(text):
        tasks = m.group("tasks")
        what = m.group("what")
        code = _int(m.group("code"))
        signal = ("SIGKILL" if what == "Killed" else "SIGSEGV" if what.startswith("Seg") else
                  "SIGABRT" if what == "Aborted" else "SIGBUS" if what == "Bus error" else None)
        rank = int(tasks) if tasks.isdigit() else None
        out.append(RankFailure(ctx.where(line, m.start(), rank), "srun", rank, None,
                               code, signal, None, m.group("host")))
    for m in _MPI.finditer(text):
        num = int(m.group("num"))
        out.append(RankFailure(ctx.where(line, m.start(), int(m.group("rank"))), "mpirun",
                               int(m.group("rank")), None, -num, _SIGNALS.get(num),
                               int(m.group("pid")), m.group("host")))
    lr = _LOCAL_RANK_ARG.search(text)
    ds = _DS_EXIT.search(text)
    if ds and int(ds.group("code")) != 0:
        code = int(ds.group("code"))
        out.append(RankFailure(ctx.where(line, ds.start()), "deepspeed", None,
                               _int(lr.group("lr")) if lr else None, code, _signal_of(code),
                               None, line.host))
    sp = _SUBPROC.search(text)
    if sp and lr:
        code = -int(sp.group("num")) if sp.group("num") else int(sp.group("code") or 0)
        if code != 0:
            out.append(RankFailure(ctx.where(line, sp.start()), "launch", None,
                                   int(lr.group("lr")), code, sp.group("name") or
                                   _signal_of(code), None, line.host))
    if not out:
        cf = _CHILD_FAILED.search(text)
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
    for i, line in enumerate(lines):
        text = line.text
        if not text or not _maybe(text):
            continue
        prefix = _NCCL_PREFIX.search(text)
        lm = _NCCL_LEVEL.search(text) if prefix is None else None
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
    return NcclReport(tuple(timeouts), tuple(nets), tuple(errors), tuple(failures))


def _transport_text(text: str) -> bool:
    return bool(_ERRNO.search(text) or _SOCKET_FN.search(text) or _IBV_CALL.search(text)
                or _IB_COMPLETION.search(text) or _OFI.search(text)
                or re.search(r"\bNET/(?!Plugin)|\bsocket|[Bb]ootstrap", text))


def _absorbed(e: NcclError, any_net: bool) -> bool:
    if not e.wrapper:
        return False
    if e.last_error:
        return _transport_text(e.last_error)
    return any_net


# --- findings --------------------------------------------------------------------------------


def _names(values: Sequence[object], limit: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", … ({len(values)} in all)" if len(values) > limit else "")


def _uniq(values: Sequence[object | None]) -> list[object]:
    out: list[object] = []
    for v in values:
        if v is not None and v not in out:
            out.append(v)
    return out


def _place(w: Where) -> str:
    """``rank 3, host gpu017, GPU2``: as much as the log tells about where it happened."""
    bits = []
    if w.rank is not None:
        bits.append(f"rank {w.rank}")
    if w.host:
        bits.append(f"host {w.host}")
    if w.gpu:
        bits.append(w.gpu)
    return ", ".join(bits)


def _common(records: Sequence[Where]) -> dict[str, object]:
    """``rank``/``host`` of the evidence, and the lists when several ranks or hosts are in."""
    first = records[0]
    extra: dict[str, object] = {}
    ranks = sorted({w.rank for w in records if w.rank is not None})
    hosts = _uniq([w.host for w in records])
    gpus = _uniq([w.gpu for w in records])
    if first.rank is not None:
        extra["rank"] = first.rank
    if first.host is not None:
        extra["host"] = first.host
    if len(ranks) > 1:
        extra["ranks"] = ranks
    if len(hosts) > 1:
        extra["hosts"] = hosts
    if len(gpus) > 1:
        extra["gpus"] = gpus
    return extra


def _finding(code: str, severity: Severity, w: Where, summary: str, action: str,
             count: int, extra: Mapping[str, object]) -> ExplainFinding:
    return ExplainFinding(Step.NCCL, code, severity, w.line, w.evidence, summary, action,
                          gpu=w.gpu, time=w.time, count=max(1, count), extra=extra)


def _timeout_finding(timeouts: Sequence[Timeout], others: bool) -> ExplainFinding | None:
    real = [t for t in timeouts if t.kind != "ambiguous"]
    if not real and others:
        return None
    records = real or list(timeouts)
    if not records:
        return None
    first = records[0]
    per_rank: dict[object, Timeout] = {}
    for t in records:
        per_rank.setdefault(t.where.rank if t.where.rank is not None else id(t), t)
    ranks = sorted({t.where.rank for t in timeouts if t.where.rank is not None})
    coll = [t for t in records if t.kind in ("collective", "work")]
    ops_by_seq: dict[int, dict[str, list[int]]] = {}
    for t in coll:
        if t.seq is not None and t.op_type is not None:
            ops = ops_by_seq.setdefault(t.seq, {})
            ops.setdefault(t.op_type, [])
            if t.where.rank is not None and t.where.rank not in ops[t.op_type]:
                ops[t.op_type].append(t.where.rank)
    mismatch = {s: ops for s, ops in ops_by_seq.items() if len(ops) > 1}
    seqs = _uniq([t.seq for t in coll])
    extra: dict[str, object] = _common([t.where for t in timeouts])
    if ranks:
        extra["ranks"] = ranks
    lead = coll[0] if coll else first
    for key, value in (("seq", lead.seq), ("op_type", lead.op_type),
                       ("numel_in", lead.numel_in), ("numel_out", lead.numel_out),
                       ("timeout_ms", lead.timeout_ms)):
        if value is not None:
            extra[key] = value
    ran = [t.ran_ms for t in coll if t.ran_ms is not None]
    if ran:
        extra["ran_ms"] = max(ran)
    if len(seqs) > 1:
        extra["seqs"] = seqs
    op_types = _uniq([t.op_type for t in coll])
    if len(op_types) > 1:
        extra["op_types"] = op_types
    if mismatch:
        extra["mismatched"] = True
    done = [(t.last_completed, t.where.rank) for t in timeouts
            if t.last_completed is not None and t.where.rank is not None]
    if coll:
        extra["timeouts"] = [
            {k: v for k, v in (("rank", t.where.rank), ("seq", t.seq), ("op_type", t.op_type),
                               ("numel_in", t.numel_in), ("numel_out", t.numel_out),
                               ("ran_ms", t.ran_ms)) if v is not None} for t in coll]
    summary = _timeout_summary(records, coll, ranks, mismatch, seqs, done)
    action = ACTION_TIMEOUT
    if mismatch:
        action = ACTION_MISMATCH
    elif any(t.kind == "heartbeat" for t in records) and not coll:
        action = ACTION_HEARTBEAT + ". " + ACTION_TIMEOUT
    count = len({(t.where.rank, t.seq, t.kind) if t.where.rank is not None else id(t)
                 for t in records})
    return _finding("nccl-timeout", CRIT, first.where, summary, action, count, extra)


def _timeout_summary(records: Sequence[Timeout], coll: Sequence[Timeout], ranks: list[int],
                     mismatch: Mapping[int, Mapping[str, list[int]]], seqs: list[object],
                     done: list[tuple[int, int]]) -> str:
    who = (f"rank {ranks[0]}" if len(ranks) == 1 else
           f"{len(ranks)} ranks ({_names(ranks)})" if ranks else "a rank")
    hosts = _uniq([t.where.host for t in records])
    where = f" on {_names(hosts, 4)}" if hosts else ""
    if not coll:
        kinds = {t.kind for t in records}
        if "heartbeat" in kinds:
            return (f"NCCL watchdog hung on {who}{where}: the heartbeat monitor timed out "
                    "(the watchdog itself is stuck, usually in a CUDA call)")
        if "gloo" in kinds:
            ms = next((t.timeout_ms for t in records if t.timeout_ms), None)
            return f"gloo collective timed out on {who}{where}" + (f" after {ms} ms" if ms else "")
        if kinds == {"ambiguous"}:
            return (f"NCCL watchdog caught an error or timeout on {who}{where} (the log does not "
                    "say which or in what collective)")
        return f"NCCL collective timed out on {who}{where}"
    lead = coll[0]
    out = f"NCCL watchdog timeout on {who}{where}"
    if mismatch:
        seq, ops = next(iter(mismatch.items()))
        told = "; ".join(f"{op} on rank{'s' if len(r) > 1 else ''} {_names(r)}" if r else op
                         for op, r in ops.items())
        return (out + f": mismatched collectives at SeqNum {seq} ({told}) — the ranks "
                "diverged, likely a code path that runs a different collective on some ranks")
    what = lead.op_type or "a collective"
    if len(seqs) == 1:
        what += f" SeqNum {seqs[0]}" if lead.op_type else f" (SeqNum {seqs[0]})"
    if lead.numel_in is not None:
        what += f" (NumelIn {lead.numel_in}, NumelOut {lead.numel_out})"
    out += f": {what}"
    ran = [t.ran_ms for t in coll if t.ran_ms is not None]
    if ran:
        out += f" ran {max(ran)} ms"
    if lead.timeout_ms is not None:
        out += f" against a {lead.timeout_ms} ms ({lead.timeout_ms / 60000:g} min) timeout"
    if len(seqs) > 1:
        out += (f"; ranks are stuck at different SeqNums ({_names(seqs, 4)}): a rank skipped "
                "or added a collective")
    if done:
        low, rank = min(done)
        out += f"; lowest last completed work {low} on rank {rank}"
    return out


def _net_finding(nets: Sequence[NetError]) -> ExplainFinding | None:
    if not nets:
        return None
    crit = [n for n in nets if n.severity is CRIT]
    pool = crit or list(nets)
    primary = next((n for n in pool if n.category != "ib-flush"), pool[0])
    severity = CRIT if crit else WARN
    transports = _uniq([n.transport for n in nets])
    summary = f"{primary.transport} transport failure"
    place = _place(primary.where)
    if place:
        summary += f" on {place}"
    summary += f": {primary.detail}"
    if primary.peer:
        summary += f" (peer {primary.peer})"
    others = [t for t in transports if t != primary.transport]
    if others:
        summary += f"; also {_names(others, 4)} failures"
    hosts = _uniq([n.where.host for n in nets])
    if len(hosts) > 1:
        summary += f"; seen on {len(hosts)} hosts ({_names(hosts, 4)})"
    action = ACTION_NET.get(primary.category, ACTION_NET["net"])
    extra = _common([primary.where] + [n.where for n in nets])
    extra["transport"] = primary.transport
    if len(transports) > 1:
        extra["transports"] = transports
    if primary.status is not None:
        extra["ib_status"] = primary.status
    if primary.peer:
        extra["peer"] = primary.peer
    if primary.call:
        extra["call"] = primary.call
    return _finding("nccl-net-error", severity, primary.where, summary, action, len(nets),
                    extra)


def _error_finding(errors: Sequence[NcclError], others: bool) -> ExplainFinding | None:
    if not errors:
        return None
    real = [e for e in errors if e.kind != "aborted"]
    if not real and others:
        return None
    pool = real or list(errors)
    specific = [e for e in pool if not e.wrapper and e.kind not in ("error", "warn")]
    crit = [e for e in pool if e.kind != "warn"]
    primary = (specific or crit or pool)[0]
    label, action = _KIND_TEXT[primary.kind]
    detail = primary.last_error or primary.detail
    summary = label
    place = _place(primary.where)
    if place:
        summary += f" on {place}"
    if detail:
        summary += f": {detail}"
    elif primary.last_error == "":
        summary += " (its 'Last error' is empty: no transport or cause named)"
    kinds = _uniq([e.kind for e in pool])
    also = [k for k in kinds if k != primary.kind]
    if also:
        summary += f"; also {_names([_KIND_TEXT[str(k)][0].split(' (')[0] for k in also], 4)}"
    text = " ".join(e.detail + " " + (e.last_error or "") for e in pool)
    if re.search(r"out of memory", text, re.IGNORECASE):
        action = ACTION_CUDA_OOM + ". " + action
    elif re.search(r"shared memory|/dev/shm", text):
        action = ACTION_SHM
    elif "Duplicate GPU" in text:
        action = ACTION_DUP_GPU
    severity = WARN if all(e.kind == "warn" for e in pool) else CRIT
    extra = _common([primary.where] + [e.where for e in pool])
    extra["kind"] = primary.kind
    if len(kinds) > 1:
        extra["kinds"] = kinds
    if primary.last_error is not None:
        extra["last_error"] = primary.last_error
    version = next((m.group("v") for e in pool for m in [_NCCL_VERSION.search(e.where.evidence)]
                    if m), None)
    if version:
        extra["nccl_version"] = version
    return _finding("nccl-error", severity, primary.where, summary, action, len(pool), extra)


def _failure_finding(failures: Sequence[RankFailure]) -> ExplainFinding | None:
    if not failures:
        return None
    merged: list[RankFailure] = []
    for f in failures:
        twin = next((m for m in merged if _same_failure(m, f)), None)
        if twin is None:
            merged.append(f)
        else:
            merged[merged.index(twin)] = _fill(twin, f)
    told = [f for f in merged if f.launcher != "ChildFailedError"] or merged
    timed = [f for f in told if f.where.time is not None and f.launcher == "torchelastic"]
    primary = min(timed, key=lambda f: str(f.where.time)) if len(timed) > 1 else told[0]
    told = [primary] + [f for f in told if f is not primary]
    summary = _failure_summary(told)
    if any(f.launcher == "ChildFailedError" for f in merged) and told is not merged:
        summary += "; torchrun stopped the job (ChildFailedError)"
    key = primary.signal if primary.signal is not None and primary.signal in ACTION_RANK else "exit"
    if primary.exitcode is None and primary.signal is None:
        key = "exit"
    extra = _common([primary.where] + [f.where for f in told])
    for k, v in (("rank", primary.rank), ("local_rank", primary.local_rank),
                 ("exitcode", primary.exitcode), ("signal", primary.signal),
                 ("pid", primary.pid), ("host", primary.host)):
        if v is not None:
            extra[k] = v
    if len(told) > 1:
        extra["failures"] = [
            {k: v for k, v in (("rank", f.rank), ("local_rank", f.local_rank),
                               ("exitcode", f.exitcode), ("signal", f.signal), ("pid", f.pid),
                               ("host", f.host)) if v is not None} for f in told]
    return _finding("rank-failed", CRIT, primary.where, summary, ACTION_RANK[key], len(told),
                    extra)


def _same_failure(a: RankFailure, b: RankFailure) -> bool:
    if a.pid is not None and a.pid == b.pid:
        return True
    if a.launcher == "ChildFailedError" or b.launcher == "ChildFailedError":
        return a.launcher == b.launcher
    return (a.pid is None or b.pid is None) and a.local_rank is not None and (
        a.local_rank == b.local_rank and a.host == b.host)


def _fill(a: RankFailure, b: RankFailure) -> RankFailure:
    """One failure told twice (the agent's line and its summary block): keep what each says."""
    return RankFailure(
        a.where, a.launcher, a.rank if a.rank is not None else b.rank,
        a.local_rank if a.local_rank is not None else b.local_rank,
        a.exitcode if a.exitcode is not None else b.exitcode, a.signal or b.signal,
        a.pid if a.pid is not None else b.pid, a.host or b.host)


def _one_failure(f: RankFailure) -> str:
    about = []
    if f.rank is not None:
        name = f"rank {f.rank}"
        if f.local_rank is not None:
            about.append(f"local_rank {f.local_rank}")
    elif f.local_rank is not None:
        name = f"local_rank {f.local_rank}"
    else:
        name = "a rank"
    if f.pid is not None:
        about.append(f"pid {f.pid}")
    if about:
        name += f" ({', '.join(about)})"
    if f.host:
        name += f" on {f.host}"
    if f.signal == "SIGKILL":
        how = "was killed by SIGKILL"
    elif f.signal:
        how = f"died of {f.signal}"
    elif f.exitcode is not None:
        how = f"exited with code {f.exitcode}"
    else:
        how = "failed"
    if f.exitcode is not None and (f.signal or f.exitcode < 0):
        how += f" (exitcode {f.exitcode})"
    return f"{name} {how}"


def _failure_summary(told: Sequence[RankFailure]) -> str:
    if len(told) == 1 and told[0].launcher == "ChildFailedError":
        return "torchrun reports a failed child process (ChildFailedError); the details were cut"
    parts = [_one_failure(f) for f in told[:4]]
    out = ("Rank failed: " + parts[0] if len(told) == 1 else
           f"{len(told)} ranks failed: " + "; ".join(parts) + ("; …" if len(told) > 4 else ""))
    if any(f.signal == "SIGKILL" for f in told):
        out += " — likely the host OOM killer (see step syslog)"
    return out


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """NCCL-step findings of one input: at most one per code, in line order; never raises.

    Args:
        lines: the input's lines as ``probes.rules.logrules.lines.log_lines`` peeled them.

    Returns:
        ``nccl-timeout``, ``nccl-net-error``, ``nccl-error`` and ``rank-failed`` findings.
    """
    report = parse(lines)
    nccl_other = bool(report.net_errors or
                      [e for e in report.errors if e.kind != "aborted"])
    timeout = _timeout_finding(report.timeouts, nccl_other)
    errors_other = bool(report.net_errors or
                        [t for t in report.timeouts if t.kind != "ambiguous"])
    found = [timeout, _net_finding(report.net_errors),
             _error_finding(report.errors, errors_other), _failure_finding(report.failures)]
    return sorted((f for f in found if f is not None), key=lambda f: f.line)
