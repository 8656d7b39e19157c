"""The NCCL rules' vocabulary: what each record looks like in a log, and what to do about it.

Regexes first (where a record comes from, then timeouts, transport failures, NCCL errors and
launcher reports), then the ``ACTION_*`` texts the findings carry.  Pure data: ``parse``
reads lines with these, ``fold`` words the findings with the texts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from probes.rules.logrules.common import ISO_STAMP

N = r"\d{1,18}"
"""Integers are bounded so ``int()`` never meets Python's digit limit on junk input."""

# --- where a record comes from ---------------------------------------------------------------

NCCL_PREFIX = re.compile(
    r"(?:^|\s)(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d{1,10}):(?P<tid>\d{1,10})\s+"
    r"\[(?P<dev>\d{1,3})\]\s+(?:\S+\s+)?NCCL\s+(?P<level>INFO|WARN|TRACE|ABORT)\b")
"""NCCL_DEBUG output: ``host:pid:tid [cudaDev] [file.cc:line] NCCL WARN …``."""
NCCL_LEVEL = re.compile(r"\bNCCL (?P<level>INFO|WARN|TRACE)\b")
INIT = re.compile(
    rf"\brank (?P<rank>{N}) nranks {N} cudaDev (?P<dev>\d{{1,3}})(?: nvmlDev \d{{1,3}})?"
    r" busId (?P<bus>[0-9a-fA-F]{1,12})\b")
"""The communicator init line that ties a rank to a process and a PCI bus id."""
TEXT_RANK = re.compile(r"\[(?:PG\s[^\[\]]{0,80}?\s)?Rank\s?(?P<rank>\d{1,6})\]")
SRUN_LABEL = re.compile(r"(?:^|(?<=\s))(?P<rank>\d{1,5}): (?=\S)")
GLOG_TIME = re.compile(
    r"(?:^|\[)[EWIF](?P<mon>1[0-2]|0?[1-9])(?P<day>[0-3]\d) (?P<clock>\d\d:\d\d:\d\d(?:\.\d+)?)\b")
ISO_TIME = re.compile(rf"^\[?(?P<t>{ISO_STAMP})")
WARN_LEVEL = re.compile(r"^\[W |^W\d{4} |^\[W\d{4} ")
"""torch's glog warning level: c10d prints socket retries at this level in healthy runs."""


# --- timeouts, transport failures, NCCL errors, launcher reports ---------------------------

WD = re.compile(r"(?:Watchdog\s+)?[Cc]aught collective operation timeout")
RAN = re.compile(rf"ran for (?P<ran>{N}) milliseconds before timing out")
WORK_TIMEOUT = re.compile(
    rf"Timeout at NCCL work: (?P<seq>{N})(?:, last enqueued NCCL work: (?P<enq>-?{N}), "
    rf"last completed NCCL work: (?P<done>-?{N}))?")
HEARTBEAT = re.compile(
    rf"Heartbeat monitor timed out|watchdog got stuck for (?P<stuck>{N}) seconds")
GLOO_TIMEOUT = re.compile(rf"Timed out waiting (?P<ms>{N}) ?ms for (?:send|recv) operation")
NCCL_TIMEOUT = re.compile(r"\bncclTimeout\b")
AMBIGUOUS = re.compile(
    rf"Exception \(either an error or timeout\) detected by watchdog"
    rf"(?: at work: (?P<seq>{N}))?(?:, last enqueued NCCL work: (?P<enq>-?{N}), "
    rf"last completed NCCL work: (?P<done>-?{N}))?"
    r"|Some NCCL operations have failed or timed out"
    r"|(?:NCCL|Process group) watchdog thread terminated with exception")
WATCHDOG_REASON = re.compile(
    r"(?<!\s)\s*:\s*(?:CUDA error|NCCL error|CUBLAS|"
    r"cuDNN|an illegal|unspecified launch failure|device-side assert|out of memory|"
    r"[A-Za-z_:]{0,80}(?:Error|Exception)\b)")
"""What a watchdog that "terminated with exception" names, right after those words
(``…: CUDA error: an illegal memory access was encountered``): when the rest of the line has
no :data:`TIMEOUT_WORDS`, that error's own rule reports it, and the line is no collective
timeout.  Two patterns, not one with ``(?!.*timeout)`` inside, which read the rest of the
line again from every colon (the square of a line of colons)."""
TIMEOUT_WORDS = re.compile(r"[Tt]imeout|timed out|[Hh]eartbeat|stuck")
PG = re.compile(r"\[PG (?P<pg>[^\s\]]{1,40})(?: \((?P<name>[^)\]]{1,60})\))? Rank")

F_SEQ = re.compile(rf"\bSeqNum=(?P<v>{N})(?=[,)\s])")
F_OP = re.compile(r"\bOpType=(?P<v>\w{1,40})(?=[,)\s])")
F_IN = re.compile(rf"\bNumelIn=(?P<v>-?{N})(?=[,)\s])")
F_OUT = re.compile(rf"\bNumelOut=(?P<v>-?{N})(?=[,)\s])")
F_TIMEOUT = re.compile(rf"\bTimeout\(ms\)=(?P<v>{N})(?=[,)\s])")

DIST_CONTEXT = re.compile(
    r"NCCL|nccl|\bsocket[A-Z]\w*|[Bb]ootstrap|c10d|gloo|TCPStore|ProcessGroup|Dist\w{0,40}Error"
    r"|NET/|torch\.distributed|rendezvous|Last error")
"""Words that make a bare errno message (``Connection refused``) a distributed one."""
ERRNO = re.compile(
    r"Connection reset by peer|Connection refused|Software caused connection abort"
    r"|Connection timed out|No route to host|Network is unreachable|Broken pipe"
    r"|Connection closed by (?:remote )?peer")
FAIL_WORDS = re.compile(
    r"fail|error|unable|could not|couldn't|cannot|can't|abort|refused|reset by|timed? ?out"
    r"|truncated|closed|unreachable|no route|broken pipe|RC:\s*-?[1-9]", re.IGNORECASE)
IB_COMPLETION = re.compile(
    r"Got completion(?: from peer (?P<peer>\S+?))?\s+with\s+(?:error\s*|status\s*=\s*)"
    r"(?:IBV_WC_(?P<name>[A-Z_]+)\s*\(?)?(?P<st>\d{1,3})?")
IB_ASYNC = re.compile(r"NET/IB\s*:\s*Got async (?:event|error)\s*:\s*(?P<ev>[^\n]{0,80})")
IBV_CALL = re.compile(
    r"\b(?P<fn>ibv_\w{2,40})\b(?:\(\))?[^\n]{0,40}?\b(?:fail|error|returned)", re.IGNORECASE)
NET_NAMED = re.compile(r"\bNET/(?P<t>(?!Plugin\b)[A-Za-z][\w]{0,20})\b")
OFI = re.compile(
    r"\b(?P<fn>fi_\w{2,30})\b[^\n]{0,60}?(?:fail|error|RC:\s*-?[1-9])"
    r"|\b(?:aws-ofi-nccl|libfabric|OFI)\b[^\n]{0,80}?(?:fail|error|unable)", re.IGNORECASE)
IBVERBS = re.compile(r"Failed to open libibverbs\.so")
IB_EVIDENCE = re.compile(r"\bib[a-z]{0,3}\d|\bmlx\d_\d|NCCL_IB_|NET/IB|InfiniBand|RoCE")
SOCKET_FN = re.compile(
    r"\b(?P<fn>socket[A-Z]\w{2,30})\s*:[^\n]{0,160}?"
    r"(?:fail|error|refused|reset|abort|timed? ?out|closed|unreachable)")
NET_COLON = re.compile(r"\bNet : [^\n]{0,120}?(?:fail|closed|error|reset)", re.IGNORECASE)
BOOTSTRAP = re.compile(
    r"\b[Bb]ootstrap\w*\s*:?[^\n]{0,100}?"
    r"(?:fail|error|unable|timed? ?out|refused|reset|abort|closed|no socket interface)")
NO_IFACE = re.compile(r"\bno\s+(?:\w+\s+)?interfaces?\s+found|no usable interface",
                       re.IGNORECASE)
STORE = re.compile(
    r"store->get\([^)]{0,80}\) got error: (?P<err>[^\n]{0,120})"
    r"|client socket has (?:timed out|failed to connect)[^\n]{0,120}"
    r"|\bDistNetworkError\b|TCPStore[^\n]{0,80}?(?:fail|error|timed? ?out|refused|reset)"
    r"|\bSocket Timeout\b")
GLOO_NET = re.compile(r"gloo[^\n]{0,160}?(?:Connection|Read error|Write error|closed)")
PEER = re.compile(
    r"(?:from peer|Connect to|connect to|from|to|peer)\s+"
    r"(?P<peer>\[[\w.:%\-]{2,80}\]:\d{1,5}|[\w.:%\-]{3,80}?<\d{1,5}>)")
HCA = re.compile(r"\bhca (?P<hca>\w{2,20})")
ROCE_GID = re.compile(r"Gids?\s*::ffff:")

ERR_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
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
NCCL_ERROR_GENERIC = re.compile(r"NCCL error(?: in: ?\S+?,|:)\s*(?P<desc>[^,(\n]{1,120})")
ABORTED = re.compile(
    r"NCCL communicator was aborted(?: on rank (?P<rank>\d{1,6}))?\.?"
    r"(?:\s*Original reason for failure was:\s*(?P<reason>[^\n]{0,200}))?")
DESC_KINDS: tuple[tuple[str, str], ...] = (
    ("unhandled cuda error", "cuda"), ("unhandled system error", "system"),
    ("internal error", "internal"), ("invalid argument", "invalid-argument"),
    ("invalid usage", "invalid-usage"), ("remote process exited", "remote"))
NCCL_WARN = re.compile(r"\bNCCL WARN\s+(?P<msg>[^\n]{0,300})")
CUDA_FAILURE = re.compile(
    r"Cuda failure\s*(?:\d{1,4}\s*)?'(?P<what>[^']{1,100})'|Failed to CUDA \w+ \d+ bytes"
    r"|\bcuda\w{0,40}(?:Malloc|Alloc)\w{0,40} failed", re.IGNORECASE)
WARN_USAGE = re.compile(
    r"Duplicate GPU detected|collective mismatch|mismatch in rank count|[Ii]nvalid "
    r"|[Mm]ismatch")
WARN_BENIGN = re.compile(
    r"Could not find real path|deprecated|No plugin found|is ignored|Ignoring", re.IGNORECASE)
NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d{1,3}\.\d{1,3}\.\d{1,4}[\w.+\-]{0,30})")
LAST_ERROR = re.compile(r"\bLast error:\s*(?P<rest>[^\n]*)")
SECTION = re.compile(
    r"^(?:Exception raised from|C\+\+ CapturedTraceback|Traceback|frame #|terminate called"
    r"|\s*File \")")

ELASTIC_FAILED = re.compile(
    rf"failed \(exitcode: (?P<code>-?{N})\) local_rank: (?P<lr>{N})"
    rf"(?: \(pid: (?P<pid>{N})\))?")
CHILD_FAILED = re.compile(r"\bChildFailedError\b")
SUMMARY_RANK = re.compile(rf"\brank\s*:\s*(?P<rank>{N})\s*\(local_rank:\s*(?P<lr>{N})\)")
SUMMARY_EXIT = re.compile(rf"\bexitcode\s*:\s*(?P<code>-?{N})(?:\s*\(pid:\s*(?P<pid>{N})\))?")
SUMMARY_HOST = re.compile(r"\bhost\s*:\s*(?P<host>[A-Za-z0-9][\w.\-]{0,100})")
SUMMARY_TIME = re.compile(r"\btime\s*:\s*(?P<time>\d{4}-\d\d-\d\d[_ T]\d\d:\d\d:\d\d)")
BLOCK_END = re.compile(r"^(?:[=\-]{5,}|Root Cause|Failures:|\[\d{1,5}\]:)")
SIGNAL = re.compile(
    rf"Signal (?P<num>\d{{1,3}}) \((?P<name>SIG[A-Z0-9]{{2,8}})\) received by PID (?P<pid>{N})")
SRUN = re.compile(
    r"srun: error: (?P<host>[\w.\-]{1,100}): tasks? (?P<tasks>[\d,\-\[\]]{1,100}): "
    r"(?P<what>Killed|Exited with exit code (?P<code>\d{1,3})|Segmentation fault|Aborted"
    r"|Bus error)")
MPI = re.compile(
    rf"process rank (?P<rank>{N}) with PID (?P<pid>{N}) on node (?P<host>[\w.\-]{{1,100}}) "
    r"exited on signal (?P<num>\d{1,3})")
DS_EXIT = re.compile(rf"exits with return code = (?P<code>-?{N})")
SUBPROC = re.compile(
    r"died with <Signals\.(?P<name>SIG[A-Z0-9]{2,8}): (?P<num>\d{1,3})>"
    rf"|returned non-zero exit status (?P<code>{N})")
LOCAL_RANK_ARG = re.compile(r"--local[_-]rank[= ](?P<lr>\d{1,5})")

SIGNALS: Mapping[int, str] = {
    1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
    11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}

KEYWORDS = (
    "nccl", "watchdog", "timeout", "timed out", "ibv_", "net/", "socket", "connection",
    "bootstrap", "exitcode", "childfailed", "signal", "libibverbs", "fi_", "ofi", "gloo",
    "store", "srun: error", "exited on signal", "return code", "died with", "exit status",
    "milliseconds", "network", "broken pipe", "no route", "local_rank", "net :")
"""Lowercase words one of which every rule's match contains: other lines are skipped."""

WRAPPERS = frozenset({"system", "remote", "aborted"})
IB_STATUS: Mapping[int, str] = {
    1: "local length error", 2: "local QP operation error", 4: "local protection error",
    5: "work request flushed", 7: "bad response", 8: "local access error",
    9: "remote invalid request", 10: "remote access error", 11: "remote operation error",
    12: "transport retry counter exceeded", 13: "RNR retry counter exceeded",
    19: "fatal error", 20: "response timeout", 21: "general error"}
IB_STATUS_NAMES: Mapping[str, int] = {
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
KIND_TEXT: Mapping[str, tuple[str, str]] = {
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
