"""The agent's main loop and command line: a hello, then one sample per tick.

Agent reads the host through one HostSource (source.py) and adds what every host has:
the job logs of ``--tail`` and the kernel log, each line an ``event`` message.
"""

from __future__ import annotations

import argparse
import glob
import sys
import time

from .commands import exit_now
from .kernel_log import KERNEL_LOG_MODES, KERNEL_LOOKBACK_LINES
from .logs import FileTail
from .output import (
    AGENT_VERSION,
    COMPACT_VERSION,
    PROTOCOL_VERSION,
    CompactEncoder,
    ProbeErrors,
    Writer,
    compact_columns,
    watch_stdin_eof,
)
from .source import open_source, simulator_class
from .watchdog import GPU_DEADLINE_S

MAX_TAILED_FILES = 64
PCIE_EVERY_TICKS = 30
LOG_GLOB_EVERY_S = 10.0
MAX_TAIL_LOOKBACK = 16 * 1024 * 1024
"""A job log's look-back is read at MAX_TAIL_BYTES_PER_TICK a tick: bounded, never a flood."""


class Agent(object):
    """Sends the hello, then a sample per tick, with events in between, to ``writer``."""

    def __init__(self, args, writer, source, error):
        self.args = args
        self.w = writer
        self.source = source
        self.error = error
        self.seq = 0
        self.tails = {}
        self._next_glob = 0.0
        # a job's own files: literal paths, read only as regular files of its user
        self.job_tails = [FileTail(p, lookback=args.tail_lookback, owner=args.job_log_owner,
                                   follow=False) for p in list(dict.fromkeys(args.job_log))[:64]]
        self._job_states = {}
        self._scan_logs(first=True)
        self.t0 = time.time()
        self.klog = None
        self.compact = CompactEncoder() if args.wire == COMPACT_VERSION else None

    def _scan_logs(self, first=False):
        """Expand the --tail globs; files that appear later are read from their start."""
        now = time.monotonic()
        if now < self._next_glob:
            return
        self._next_glob = now + LOG_GLOB_EVERY_S
        own = set(self.args.job_log)  # followed only with their checks
        for pattern in self.args.tail:
            for path in sorted(glob.glob(pattern))[:MAX_TAILED_FILES]:
                if path not in self.tails and path not in own \
                        and len(self.tails) < MAX_TAILED_FILES:
                    # a job log already there at start: its last --tail-lookback bytes
                    # first (a job that failed before the console opened is still seen)
                    self.tails[path] = FileTail(path, at_end=first,
                                                lookback=self.args.tail_lookback)

    def _job_log_states(self, ts):
        """A logsource message for each --job-log file whose state changed."""
        for t in self.job_tails:
            why = t.refused
            state = "denied" if why else "ok" if t.reading else "unavailable"
            if self._job_states.get(t.path) != (state, why):
                self._job_states[t.path] = (state, why)
                self.w.send({"type": "logsource", "v": PROTOCOL_VERSION, "ts": ts,
                             "source": "job:" + t.path, "state": state, "fix": None,
                             "via": "file:" + t.path if state == "ok" else None,
                             "detail": ("%s: %s (read only as a regular file of the job's "
                                        "user)" % (t.path, why))[:1000] if why else ""})

    def hello(self):
        self.t0 -= self.backlog_samples() * self.step()
        facts, gpus = self.source.facts()
        extra = self.source.topology()
        hello = {"type": "hello", "v": PROTOCOL_VERSION, "agent": AGENT_VERSION,
                 "ts": time.time(), "host": facts, "gpus": gpus,
                 "probes": self.source.probes(), "simulated": self.source.scenarios(),
                 "clock": self.source.clock(self.args.speed)}
        hello.update(extra)
        if self.compact is not None:
            hello["v"] = COMPACT_VERSION
            hello["columns"] = compact_columns()
        self.w.send(hello)
        self.start_kernel_log()

    def start_kernel_log(self):
        """Pick the kernel-log source and say which (the logsource message)."""
        mode = kernel_log_mode(self.args)
        if mode is None:
            return
        self.klog = self.source.kernel_log(mode, self.w.send, self.error)
        self.klog.start()

    def step(self):
        """Seconds of the host's time between two samples (simulated time runs faster)."""
        return self.args.interval * self.args.speed

    def backlog_samples(self):
        """Samples of --sim-history (simulated hosts only), sent before the live ones;
        their clock ends at now."""
        step = self.step()
        if step <= 0:
            return 0
        return int(self.args.sim_history // step)

    def sample(self):
        t = self.seq * self.step()
        ts = self.source.timestamp(self.t0, t)
        for source, line in self.source.events(t):
            self.w.send({"type": "event", "v": PROTOCOL_VERSION, "ts": ts, "source": source,
                         "line": line})
        gpus, host, disks = self.source.sample(t)
        if self.klog is not None:
            self.klog.poll()
        self._scan_logs()
        for tail in self.job_tails + list(self.tails.values()):
            for line in tail.lines():
                self.w.send({"type": "event", "v": PROTOCOL_VERSION, "ts": ts,
                             "source": "job:" + tail.path, "line": line})
        self._job_log_states(ts)
        fabric = self.source.fabric(t)
        if fabric is not None:
            self.w.send(dict({"type": "fabric", "v": PROTOCOL_VERSION, "ts": ts}, **fabric))
        msg = {"type": "sample", "v": PROTOCOL_VERSION, "seq": self.seq, "ts": ts,
               "gpus": gpus, "host": host, "disks": disks}
        if self.seq > 0 and self.seq % PCIE_EVERY_TICKS == 0:
            msg["pcie"] = self.source.pcie(t)
        if self.compact is None:
            self.w.send(msg)
        else:
            for out in self.compact.encode(msg):
                self.w.send(out)
        self.seq += 1

    def run(self):
        interval = self.args.interval
        self.hello()
        if self.args.once:
            time.sleep(self.source.first_wait(interval, True))
            self.sample()
            return
        count = 0
        for _ in range(self.backlog_samples()):
            self.sample()
        next_tick = time.monotonic() + self.source.first_wait(interval, False)
        while self.args.count is None or count < self.args.count:
            delay = next_tick - time.monotonic()
            if delay > 0 and not self.args.fast:
                time.sleep(delay)
            self.sample()
            count += 1
            next_tick += interval
            if next_tick < time.monotonic():
                next_tick = time.monotonic() + interval


def kernel_log_mode(args):
    """The kernel-log mode to run, or None for none and no logsource message.

    Asked for with --kernel-log; otherwise ``auto`` when the console runs the agent
    (--stdin-eof-exit, which its bootstrap always passes) and ``off`` for a bare run.
    ``--once`` (one hello, one sample) and a simulated host send no logsource message
    unless --kernel-log asks (a simulated host's is then ``simulated``).
    """
    if args.kernel_log is not None:
        return args.kernel_log
    if args.once or args.simulate is not None:
        return None
    return "auto" if args.stdin_eof_exit else "off"


NO_SIMULATOR = "this agent was sent without the simulator"


def parse_args(argv):
    sim = simulator_class()
    p = argparse.ArgumentParser(prog="rigwatch-agent",
                                description="Stream a GPU host's state as NDJSON (read-only).")
    p.add_argument("--once", action="store_true", help="print one hello and one sample, then exit")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--count", type=int, default=None,
                   help="stop after N live samples (--sim-history's come on top)")
    p.add_argument("--simulate", metavar="SCENARIO[,SCENARIO...]", default=None,
                   help="emit a simulated 8-GPU host: " + (", ".join(sim.SCENARIOS) if sim
                                                           else NO_SIMULATOR))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    p.add_argument("--fast", action="store_true",
                   help="do not wait between samples (simulator and tests: time is simulated)")
    p.add_argument("--sim-history", type=float, default=0.0, metavar="SECONDS",
                   help="simulated seconds already run at start, sent at once (the demo's "
                        "charts and soak detectors then have the history a watcher would)")
    p.add_argument("--hostname", default=None, help="name to report instead of the real one")
    p.add_argument("--tail", action="append", default=[], metavar="GLOB",
                   help="follow job logs matching GLOB read-only; new lines become events")
    p.add_argument("--job-log", action="append", default=[], metavar="PATH",
                   help="follow a job's log: a literal path, a regular file of "
                        "--job-log-owner")
    p.add_argument("--job-log-owner", type=int, default=None, metavar="UID")
    p.add_argument("--tail-lookback", type=int, default=0, metavar="BYTES",
                   help="read up to BYTES before the end of a --tail file already there at "
                        "start (default 0: from its end)")
    p.add_argument("--gpu-deadline", type=float, default=GPU_DEADLINE_S,
                   help="seconds before a GPU probe call counts as hung")
    p.add_argument("--dataset", action="append", default=[], metavar="PATH",
                   help="report which block device holds PATH (repeatable)")
    p.add_argument("--kernel-log", choices=KERNEL_LOG_MODES, default=None,
                   help="where to read the kernel log: auto tries journalctl, dmesg, then "
                        "/var/log/kern.log|messages|syslog (default: auto when the console "
                        "runs the agent, off otherwise)")
    p.add_argument("--kernel-lookback", type=int, default=KERNEL_LOOKBACK_LINES, metavar="N",
                   help="journal lines of the current boot to send first (default %(default)s)")
    p.add_argument("--kernel-after-cursor", default=None, metavar="CURSOR",
                   help="start the journal after this cursor instead (no repeats on reconnect)")
    p.add_argument("--sys-root", default="/sys", help=argparse.SUPPRESS)
    p.add_argument("--log-root", default="/", help=argparse.SUPPRESS)
    p.add_argument("--wire", type=int, choices=(PROTOCOL_VERSION, COMPACT_VERSION),
                   default=PROTOCOL_VERSION,
                   help="wire protocol: 1 sends every field each tick (default), 2 sends static "
                        "facts once and each tick's moving numbers as one array")
    p.add_argument("--stdin-eof-exit", action="store_true",
                   help="exit when stdin closes (the console went away)")
    args = p.parse_args(argv)
    if args.interval < 0 or args.speed <= 0:
        p.error("--interval must be >= 0 and --speed > 0")
    if args.sim_history < 0 or (args.sim_history and args.simulate is None):
        p.error("--sim-history needs --simulate and a value >= 0")
    if args.kernel_lookback < 0:
        p.error("--kernel-lookback must be >= 0")
    if args.job_log and (args.job_log_owner is None or args.job_log_owner < 0):
        p.error("--job-log needs --job-log-owner UID")
    if not 0 <= args.tail_lookback <= MAX_TAIL_LOOKBACK:
        p.error("--tail-lookback must be between 0 and %d" % MAX_TAIL_LOOKBACK)
    if args.simulate is not None:
        if sim is None:
            p.exit(2, "%s: error: %s (--simulate)\n" % (p.prog, NO_SIMULATOR))
        try:
            sim.parse_scenarios(args.simulate)
        except ValueError as exc:
            p.error(str(exc))
    return args


def main(argv=None):
    """Run the agent with ``argv`` (default: the command line) until done or told to stop."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.stdin_eof_exit:
        watch_stdin_eof()
    writer = Writer(sys.stdout)
    error = ProbeErrors(writer).report
    try:
        Agent(args, writer, open_source(args, error), error).run()
    except KeyboardInterrupt:
        pass
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    exit_now(0)


if __name__ == "__main__":
    main()
