"""The kernel log without root: journalctl, else dmesg, else a syslog file."""

from __future__ import annotations

import calendar
import errno
import json
import os
import re
import shutil
import time

from .commands import one_line, read_text, rooted
from .logs import KERNEL_BYTES_PER_TICK, MAX_EVENT_LINE, ChildLines, FileTail
from .output import PROTOCOL_VERSION

KERNEL_LOG_MODES = ("auto", "journal", "dmesg", "file", "off")
KERNEL_LOG_ORDER = {"auto": ("journalctl", "dmesg", "file"), "journal": ("journalctl",),
                    "dmesg": ("dmesg",), "file": ("file",)}
KERNEL_LOOKBACK_LINES = 2000
KERNEL_FILE_LOOKBACK_BYTES = 256 * 1024

KERNEL_PROBE_S = 0.6
MAX_JOURNAL_LINE = 64 * 1024
KERNEL_LOG_FILES = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
JOURNAL_DIRS = ("/run/log/journal", "/var/log/journal")
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# What journalctl and dmesg print when they refuse (matched with LC_ALL=C).
JOURNAL_DENIED = ("insufficient permissions", "not seeing messages from other users",
                  "permission denied")
JOURNAL_NONE = ("no journal files were found",)
DMESG_DENIED = ("operation not permitted", "permission denied")
_DMESG_MONO = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")
# A syslog file line: [<PRI>][1 ]TIMESTAMP HOST PROGRAM…  The program field is the word after
# the host name: "kernel:" in the RFC 3164 / rsyslog file formats, "kernel" followed by the
# PROCID in RFC 5424.  "kernel:" anywhere else (``logger -t alice 'kernel: NVRM: Xid …'``,
# "alice: build done kernel: …") is a local user's message, not the kernel's.
_SYSLOG_HEAD = re.compile(r"^(?:<\d{1,3}>)?(1 )?(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?"
                          r"(?:Z|[+-]\d\d:?\d\d)?|[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d) +\S+ +"
                          r"(\S+)(?: |$)")
_SYSLOG_PRI = re.compile(r"^<\d{1,3}>(?:1 )?")
SYSLOG_FILE_NOTE = ("a syslog file that local users can write to (logger): only lines whose "
                    "program field is 'kernel' count, and even those can be forged; "
                    "journalctl -k and dmesg cannot")
_ISO_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?"
                     r"(Z|[+-]\d\d:?\d\d)?\s")
_BSD_TS = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)\s")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def journal_argv(lookback, after_cursor=None):
    """The journalctl command line (an argument list: no shell ever sees it)."""
    argv = ["journalctl", "-k", "-o", "json", "--no-pager", "--follow"]
    if after_cursor:
        argv.append("--after-cursor=" + after_cursor)
    else:
        argv.append("--lines=%d" % max(0, int(lookback)))
    return argv


def dmesg_argv():
    return ["dmesg", "-w"]


def journal_entry(raw):
    """One ``journalctl -o json`` line -> (line, ts, boot, cursor); None for an entry
    without a message.  Raises ValueError when the line is not a JSON object."""
    entry = json.loads(raw.decode("utf-8", "replace"))
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    msg = entry.get("MESSAGE")
    if isinstance(msg, list):  # not UTF-8: journalctl sends the bytes
        try:
            msg = bytes(bytearray(msg)).decode("utf-8", "replace")
        except (TypeError, ValueError):
            raise ValueError("MESSAGE is not a byte array") from None
    if not isinstance(msg, str):
        return None  # null: journalctl leaves out fields over 4 KiB
    try:
        ts = int(entry.get("__REALTIME_TIMESTAMP")) / 1e6
    except (TypeError, ValueError):
        ts = None
    boot = entry.get("_BOOT_ID")
    cursor = entry.get("__CURSOR")
    return (msg.rstrip("\n")[:MAX_EVENT_LINE], ts,
            boot if isinstance(boot, str) else None,
            cursor if isinstance(cursor, str) else None)


def from_kernel(line):
    """Whether a syslog file line's program field is ``kernel`` (see _SYSLOG_HEAD)."""
    m = _SYSLOG_HEAD.match(line)
    if m is None:
        return False
    return m.group(2) == ("kernel" if m.group(1) else "kernel:")


def syslog_ts(line, now):
    """The time at the start of a syslog line (RFC 3339 or "Dec  2 03:14:07"), else now."""
    line = _SYSLOG_PRI.sub("", line, count=1)
    m = _ISO_TS.match(line)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float(m.group(7)) if m.group(7) else 0.0
        zone = m.group(8)
        if zone is None:
            return time.mktime((y, mo, d, h, mi, s, 0, 0, -1)) + frac
        offset = 0
        if zone != "Z":
            z = zone.replace(":", "")
            offset = (int(z[1:3]) * 3600 + int(z[3:5]) * 60) * (1 if z[0] == "+" else -1)
        return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac - offset
    m = _BSD_TS.match(line)
    if m and m.group(1) in _MONTHS:
        mo = _MONTHS.index(m.group(1)) + 1
        d, h, mi, s = (int(x) for x in m.groups()[1:])
        year = time.localtime(now).tm_year
        try:
            t = time.mktime((year, mo, d, h, mi, s, 0, 0, -1))
            if t > now + 86400:  # "Dec 31" read on Jan 1: last year
                t = time.mktime((year - 1, mo, d, h, mi, s, 0, 0, -1))
        except (OverflowError, ValueError):
            return now
        return t
    return now


def journal_files(log_root):
    """Whether journald has left any journal file: True, False, or None (cannot look).

    journalctl in JSON follow mode says nothing when there are none, so look first.
    """
    unknown = False
    for top in JOURNAL_DIRS:
        base = rooted(log_root, top)
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            continue
        except OSError:
            unknown = True
            continue
        for name in names:
            if name.endswith((".journal", ".journal~")):
                return True
            try:
                inner = os.listdir(os.path.join(base, name))
            except OSError as exc:
                unknown = unknown or not isinstance(exc, (FileNotFoundError, NotADirectoryError))
                continue
            if any(n.endswith((".journal", ".journal~")) for n in inner):
                return True
    return None if unknown else False


def _user_name():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, OSError):
        return os.environ.get("USER") or "USER"


class KernelLog(object):
    """The host's kernel log, read-only and without root: journalctl, else dmesg, else a
    syslog file, whichever this user may read.  ``send`` gets the event and logsource
    messages in order; ``error`` gets (probe, message) to report."""

    def __init__(self, mode, send, error, lookback=KERNEL_LOOKBACK_LINES, log_root="/",
                 after_cursor=None):
        self.mode = mode
        self.send = send
        self.error = error
        self.lookback = lookback
        self.log_root = log_root
        self.after_cursor = after_cursor
        self.todo = list(KERNEL_LOG_ORDER.get(mode, ()))
        self.refused = []  # (name, "denied" | "missing" | "failed", what it said)
        self.via = None
        self.child = None
        self.tail = None
        self.boot = None
        self.bad_json = 0
        self._bad_reported = False
        self._held = []

    # -- choosing a source

    def start(self):
        """Try the sources in order until one works; then send the logsource message."""
        while self.todo and self.via is None:
            name = self.todo.pop(0)
            if name == "journalctl":
                if shutil.which("journalctl") is None:
                    self.refused.append(("journalctl", "missing", "not installed"))
                    continue
                if journal_files(self.log_root) is False:
                    self.refused.append(("journalctl", "missing", "No journal files were found "
                                         "(%s hold none)" % ", ".join(JOURNAL_DIRS)))
                    continue
                self._try_child("journalctl", journal_argv(self.lookback, self.after_cursor),
                                MAX_JOURNAL_LINE)
            elif name == "dmesg":
                self.boot = (read_text(rooted(self.log_root, BOOT_ID_PATH)) or "").strip() or None
                self._try_child("dmesg", dmesg_argv(), MAX_EVENT_LINE)
            else:
                self._try_files()
        self.send(self.message())
        held, self._held = self._held, []
        for raw in held:
            self._emit(raw)

    def _try_child(self, name, argv, max_line):
        child = ChildLines(argv, max_line)
        why = child.start()
        if why is not None:
            self.refused.append((name, "missing" if why == "not installed" else "failed", why))
            return
        deadline = time.monotonic() + KERNEL_PROBE_S
        while True:
            self._held += child.lines(wait=0.0)
            refusal = self._refusal(name, child)
            if refusal is not None:
                child.stop()
                self._held = []
                self.refused.append(refusal)
                return
            if self._held or time.monotonic() >= deadline:
                break  # it answers, or it runs and has nothing to say yet
            time.sleep(0.02)
        self.child, self.via = child, name

    def _refusal(self, name, child):
        """(name, kind, text) when the command has refused or ended, else None."""
        err = child.stderr_text()
        low = err.lower()
        denied = JOURNAL_DENIED if name == "journalctl" else DMESG_DENIED
        for line in err.splitlines():
            if any(m in line.lower() for m in denied):
                return name, "denied", one_line(line)
        if name == "journalctl" and any(m in low for m in JOURNAL_NONE):
            return name, "missing", "No journal files were found"
        code = child.exited()
        if code is None:
            return None
        last = [x for x in err.splitlines() if x.strip()]
        said = ": " + one_line(last[-1]) if last else ""
        return name, "failed", "exited with status %s%s" % (code, said)

    def _try_files(self):
        for path in KERNEL_LOG_FILES:
            full = rooted(self.log_root, path)
            try:
                with open(full, "rb"):
                    pass
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    self.refused.append(("file:" + path, "denied", "Permission denied"))
                elif exc.errno != errno.ENOENT:
                    self.refused.append(("file:" + path, "failed", exc.strerror or str(exc)))
                continue
            self.tail = FileTail(full, at_end=True, lookback=KERNEL_FILE_LOOKBACK_BYTES)
            self.via = "file:" + path
            return
        if not any(r[0].startswith("file:") for r in self.refused):
            self.refused.append(("files", "missing", "none of %s exists" % ", ".join(
                KERNEL_LOG_FILES)))

    # -- reporting

    def state(self):
        if self.via is not None:
            return "ok"
        if any(kind == "denied" for _, kind, _ in self.refused):
            return "denied"
        return "unavailable"

    def detail(self):
        return "; ".join("%s: %s" % (name, text) for name, _, text in self.refused)[:1000]

    def fix(self):
        """What an operator could do about the refusals (text only: nothing is changed)."""
        denied = [name for name, kind, _ in self.refused if kind == "denied"]
        if not denied:
            return None
        user = _user_name()
        out = []
        if "journalctl" in denied:
            out.append("add %s to the systemd-journal or adm group (usermod -aG "
                       "systemd-journal %s) and reconnect" % (user, user))
        if "dmesg" in denied:
            out.append("allow dmesg for users: sysctl kernel.dmesg_restrict=0 (persist it in "
                       "/etc/sysctl.d/)")
        files = [name[5:] for name in denied if name.startswith("file:")]
        if files:
            out.append("let %s read %s (usermod -aG adm %s)" % (user, ", ".join(files), user))
        return "; or ".join(out)

    def note(self):
        """A caveat about the source in use: a syslog file is writable by local users."""
        if self.via is not None and self.via.startswith("file:"):
            return SYSLOG_FILE_NOTE
        return None

    def message(self):
        msg = {"type": "logsource", "v": PROTOCOL_VERSION, "ts": time.time(),
               "source": "kernel", "state": self.state(), "via": self.via,
               "detail": self.detail(), "fix": self.fix()}
        note = self.note()
        if note:
            msg["note"] = note
        return msg

    # -- reading

    def poll(self):
        """Send what arrived since the last tick; fall back when the source gives out."""
        if self.tail is not None:
            now = time.time()
            for line in self.tail.lines(KERNEL_BYTES_PER_TICK):
                if not from_kernel(line):  # kern.log too: logger -p kern.* writes there
                    continue
                self.send(self._event(line, syslog_ts(line, now)))
            return
        if self.child is None:
            return
        for raw in self.child.lines():
            self._emit(raw)
        refusal = self._refusal(self.via, self.child)
        if self.bad_json and not self._bad_reported:
            self._bad_reported = True
            self.error("kernel-log", "journalctl printed %d line(s) that are not JSON; they "
                                     "are skipped (counted, reported once)" % self.bad_json)
        if refusal is not None:
            self.child.stop()
            self.child = self.via = None
            self.refused.append(refusal)
            self.start()

    def _emit(self, raw):
        if self.via == "journalctl":
            if raw.startswith(b"-- "):  # "-- No entries --", "-- Boot …": not entries
                return
            try:
                entry = journal_entry(raw)
            except ValueError:
                self.bad_json += 1
                return
            if entry is None:
                return
            line, ts, boot, cursor = entry
            ev = self._event(line, ts if ts is not None else time.time())
            if boot:
                ev["boot"] = boot
            if cursor:
                ev["cursor"] = cursor
                self.after_cursor = cursor
            self.send(ev)
            return
        line = raw.decode("utf-8", "replace")
        ev = self._event(line, self._dmesg_ts(line))
        if self.boot:
            ev["boot"] = self.boot
        self.send(ev)

    def _dmesg_ts(self, line):
        now = time.time()
        m = _DMESG_MONO.match(line)
        up = (read_text(rooted(self.log_root, "/proc/uptime")) or "").split()
        try:
            ts = now - float(up[0]) + float(m.group(1)) if m else now
        except (IndexError, ValueError):
            return now
        return ts if ts <= now + 1.0 else now

    def _event(self, line, ts):
        return {"type": "event", "v": PROTOCOL_VERSION, "ts": ts, "source": "kernel",
                "line": line}

    def stop(self):
        if self.child is not None:
            self.child.stop()


class QuietLog(object):
    """A kernel log that is not read (``off``, or a simulated host's): the logsource
    message says why, and there is nothing to poll."""

    def __init__(self, send, state, detail):
        self.send = send
        self.state = state
        self.detail = detail

    def start(self):
        self.send({"type": "logsource", "v": PROTOCOL_VERSION, "ts": time.time(),
                   "source": "kernel", "state": self.state, "via": None,
                   "detail": self.detail, "fix": None})

    def poll(self):
        pass

    def stop(self):
        pass
