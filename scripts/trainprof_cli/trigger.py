"""trainprof trigger / trainprof status: on-demand capture of a running job
(TRAINPROF_TRIGGER), with no daemon.  Python standard library only;
scripts/trainprof imports it.

The processes' side is collector/control/trigger.c.  Each process that watches
triggers (TRAINPROF_SCHEDULE=none, or TRAINPROF_TRIGGER set) keeps, in its
run folder (the trigger file's folder, default {run_name}):
  status/rank{rank}.{pid}.json  its status, rewritten about once a second
                                and at exit;
and polls, every 0.5 s, the trigger file (default {run_name}/trigger): one
line "id=ID start=S warmup=1 active=N".  Each process acts on an id once:
it warms up at step S and records steps S+1 .. S+N, saving one trace; a
process that reads the file after step S has begun starts at the step that
begins next, and says so.

`trigger` writes the file atomically (trainprof_cli.files.create: a fresh
temporary name, O_EXCL|O_NOFOLLOW, then rename), with
S a margin past the largest step the live processes publish: their step
plus their step rate times the status file's age, plus max(2, rate x 1.5 s)
so that every process polls the file before S begins.  Given PIDs instead
of a folder, it finds each process's run folder among the links in
/proc/PID/fd (the process holds its run folder open), so the PIDs must be
on this host and readable by the caller; the trigger then reaches every
process of that folder, as the folder is the job's.  With
TRAINPROF_TRIGGER_SIGNAL set in the job, it also sends that signal to the
processes of this host whose handler is in place, so they read the file at
once.  Then it waits (--wait seconds) for every live process to answer
through its status file and prints what each will record.

Whoever can write the run folder (a shared project or scratch folder) can
write status files, so `trigger` acts only on what collector/control/trigger.c
writes (check_status): a regular file owned by the user, named after its
own rank and pid, a pid above 1, a plain trigger file name, SIGUSR1,
SIGUSR2 or SIGRTMIN+N within SIGRTMAX; and it signals a pid only when that
process belongs to the user, holds the run folder open and has
libtrainprof.so mapped (process_of_run), through a pidfd opened before
those checks.  Anything else is skipped with one line saying why.

`status` prints one row per process: rank, host, pid, step, step rate,
traces saved, dropped events, alive (kill -0 on this host; elsewhere, a
status updated in the last 10 s), the last trigger's state and the last
error line.
"""

import argparse
import errno
import json
import math
import os
import re
import signal
import socket
import sys
import time
import uuid

try:
    from trainprof_cli.files import FileError, create, read_regular
except ImportError:                     # loaded by path: the package from its parent folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from trainprof_cli.files import FileError, create, read_regular

STALE_S = 10.0          # a status older than this, from another host, is not live
MARGIN_S = 1.5          # seconds of steps between the trigger and its start step
MIN_MARGIN = 2          # steps
STATUS_MAX = 64 << 10   # bytes: the library's status files are under 10 KiB
MAPS_MAX = 64 << 20     # bytes of /proc/PID/maps read at most
PID_MAX = 1 << 22       # Linux's pid_max is at most 2^22
STATUS_NAME = re.compile(r"^rank(-?[0-9]{1,10})\.([0-9]{1,7})\.json$")
RTMIN_RE = re.compile(r"^SIGRTMIN\+([0-9]{1,3})$")
LIB_NAME = "libtrainprof.so"


def err(msg):
    sys.stderr.write("trainprof: %s\n" % printable(msg))


# ---- status files: only what collector/control/trigger.c writes --------------------------
#
# A run folder may sit on a shared file system where others can write, and
# `trigger` acts on what it reads there: it signals the pid a status names and
# writes the trigger file it names.  So a status file counts only when it is
# exactly what tp_tr_write_status writes: a regular file (not a link, not a
# FIFO) of at most STATUS_MAX bytes, named rank{rank}.{pid}.json after its own
# rank and pid, one JSON object whose fields have the library's types and
# ranges (README "Capturing a running job"); `trigger` also wants it owned by
# the user who runs it.  Anything else is skipped with one line saying why.


def _int(v, lo, hi):
    return type(v) is int and lo <= v <= hi


def _num(v):
    return type(v) in (int, float) and math.isfinite(v) and abs(v) < 1e18


def plain_name(name):
    """A file name as collector/control/trigger.c keeps it: not empty, no "/", not
    "." or "..", shorter than its 256-byte buffer."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\0" not in name and len(name.encode("utf-8", "surrogatepass")) < 256)


def signal_number(name):
    """The signal of a status's trigger_signal as tp_tr_write_status writes
    it (SIGUSR1, SIGUSR2, SIGRTMIN+N with SIGRTMIN+N <= SIGRTMAX), else None."""
    if name in ("SIGUSR1", "SIGUSR2"):
        return getattr(signal, name)
    m = RTMIN_RE.match(name) if isinstance(name, str) else None
    if m and int(m.group(1)) <= signal.SIGRTMAX - signal.SIGRTMIN:
        return signal.SIGRTMIN + int(m.group(1))
    return None


def check_status(st, name):
    """None when `st` (parsed from the file `name`) is a status as the library
    writes it, else why not."""
    if not isinstance(st, dict):
        return "not a JSON object"
    m = STATUS_NAME.match(name)
    pid, rank = st.get("pid"), st.get("rank")
    if not _int(pid, 2, PID_MAX):
        return "pid %.40r is not a process id (2 to %d)" % (pid, PID_MAX)
    if not _int(rank, -(1 << 31), (1 << 31) - 1):
        return "rank %.40r is not an integer" % (rank,)
    if not m or int(m.group(1)) != rank or int(m.group(2)) != pid:
        return "its name is not rank%d.%d.json (its rank and pid)" % (rank, pid)
    if not isinstance(st.get("host"), str):
        return "no host"
    if not _int(st.get("step"), 0, (1 << 63) - 1):
        return "step %.40r is not a step count" % (st.get("step"),)
    if not _num(st.get("updated")):
        return "updated %.40r is not a time" % (st.get("updated"),)
    rate = st.get("steps_per_s")
    if rate is not None and not (_num(rate) and rate >= 0):
        return "steps_per_s %.40r is not a step rate" % (rate,)
    if not plain_name(st.get("trigger_file")):
        return "trigger_file %.80r is not a file name" % (st.get("trigger_file"),)
    sig = st.get("trigger_signal")
    if sig is not None and signal_number(sig) is None:
        return ("trigger_signal %.40r is not SIGUSR1, SIGUSR2 or SIGRTMIN+N (N = 0 to %d)"
                % (sig, signal.SIGRTMAX - signal.SIGRTMIN))
    for k in ("exited", "signal_installed"):
        if k in st and type(st[k]) is not bool:
            return "%s %.40r is not true or false" % (k, st[k])
    for k in ("windows_saved", "dropped_events"):
        if k in st and not _int(st[k], 0, (1 << 63) - 1):
            return "%s %.40r is not a count" % (k, st[k])
    for k, kinds in (("last_trigger", dict), ("last_error", str), ("run_folder", str),
                     ("schedule", str), ("program", str), ("run_name", str)):
        if st.get(k) is not None and not isinstance(st[k], kinds):
            return "%s is not a %s" % (k, "JSON object" if kinds is dict else "string")
    return None


def read_statuses(folder, said=None, mine=False):
    """The status files of a run folder, parsed and checked (check_status);
    each one skipped is said once per `said` set.  `mine`: only files owned by
    this user (what `trigger` acts on)."""
    said = set() if said is None else said
    d = os.path.join(folder, "status")
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    out = []
    for name in names:
        if not name.startswith("rank") or not name.endswith(".json"):
            continue
        path = os.path.join(d, name)
        try:
            data, fst = read_regular(path, STATUS_MAX, follow=False)
            st = json.loads(data)
        except FileError as e:
            if e.errno == errno.ENOENT:
                continue                # gone between listdir and open
            why = str(e)
        except (ValueError, RecursionError) as e:
            why = "%s: not a status file (%s)" % (path, "nested too deeply"
                                                   if isinstance(e, RecursionError) else e)
        else:
            reason = check_status(st, name)
            if reason is None and mine and fst.st_uid != os.geteuid():
                reason = "owned by uid %d, not by you (uid %d): not acted on" % (
                    fst.st_uid, os.geteuid())
            if reason is None:
                st["_path"] = path
                out.append(st)
                continue
            why = "%s: skipped: %s" % (path, reason)
        if why not in said:
            said.add(why)
            err(why)
    out.sort(key=lambda s: (s["rank"], s["host"], s["pid"]))
    return out


def alive(st, now=None):
    """True, False, or None (another host, not known)."""
    now = time.time() if now is None else now
    if st.get("exited"):
        return False
    if st.get("host") == socket.gethostname():
        try:
            os.kill(st["pid"], 0)       # pid > 1: checked by check_status
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return now - float(st.get("updated", 0)) < STALE_S


def folder_of_pid(pid):
    """The run folder that process `pid` holds open (collector/control/trigger.c),
    or None."""
    fd_dir = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("/") and any(
                STATUS_NAME.match(n) and n.endswith(".%d.json" % pid)
                for n in _listdir(os.path.join(target, "status"))):
            return target
    return None


def _listdir(d):
    try:
        return os.listdir(d)
    except OSError:
        return []


def process_of_run(pid, folder):
    """None when process `pid` is one of this run's, on this host: it belongs
    to this user, holds the run folder open (collector/control/trigger.c keeps it
    open, O_PATH) and maps libtrainprof.so; else why not."""
    try:
        uid = os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return "no process %d here" % pid
    if uid != os.geteuid():
        return "process %d belongs to uid %d, not to you (uid %d)" % (pid, uid, os.geteuid())
    real = os.path.realpath(folder)
    fd_dir = "/proc/%d/fd" % pid
    held = False
    for fd in _listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) == real:
                held = True
                break
        except OSError:
            continue
    if not held:
        return "process %d does not hold the run folder %s open" % (pid, real)
    try:
        maps, _ = read_regular("/proc/%d/maps" % pid, MAPS_MAX)
    except FileError:
        maps = b""
    if not any(line.rstrip().endswith(b"/" + LIB_NAME.encode()) or
               line.rstrip().endswith(b"/" + LIB_NAME.encode() + b" (deleted)")
               for line in maps.splitlines()):
        return "process %d has not loaded %s" % (pid, LIB_NAME)
    return None


def send_signal(pid, sig, folder):
    """Signals process `pid` when process_of_run says it is this run's; None
    or why not.  Through a pidfd opened before the checks, so that the signal
    reaches the process checked, or none, even if the pid is reused."""
    pidfd = None
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pass                            # old kernel or Python: kill(2) below
    try:
        why = process_of_run(pid, folder)
        if why is not None:
            return why
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(pid, sig)
        except OSError as e:
            return "cannot signal process %d: %s" % (pid, e.strerror)
        return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def choose_start(live, now):
    """(start step, largest current step, margin, fastest rate or None)."""
    top, rate = 0.0, None
    for st in live:
        r = st.get("steps_per_s")
        age = max(0.0, now - float(st.get("updated", now)))
        est = st.get("step", 0) + (r or 0.0) * age
        top = max(top, est)
        if r is not None:
            rate = r if rate is None else max(rate, r)
    margin = max(MIN_MARGIN, int(math.ceil((rate or 0.0) * MARGIN_S)))
    return int(math.ceil(top)) + margin, int(math.ceil(top)), margin, rate


def estimate_rates(folder, live, said):
    """Fill in a step rate where a status has none yet (it needs 2 s of
    steps): from two reads of the status files a second apart."""
    if all(st.get("steps_per_s") is not None for st in live):
        return live
    first = {st["_path"]: (st["step"], float(st["updated"])) for st in live}
    time.sleep(1.2)
    again = {st["_path"]: st for st in read_statuses(folder, said, mine=True)}
    for st in live:
        new = again.get(st["_path"])
        if st.get("steps_per_s") is not None or not new or new["pid"] != st["pid"]:
            continue
        s0, t0 = first[st["_path"]]
        dt = float(new["updated"]) - t0
        st.update(new)
        if dt > 0:
            st["steps_per_s"] = max(new["step"] - s0, 0) / dt
    return live


def write_trigger(folder, name, line):
    """Writes the trigger file `name` (a plain name: check_status) in the
    run folder, atomically, never through a planted link (trainprof_cli.files)."""
    path = os.path.join(folder, name)
    with create(path) as f:
        f.write(line.encode())
    return path


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def printable(v):
    """str(v) with control characters as "?": a status file's text must not
    drive the terminal."""
    return _CONTROL.sub("?", str(v))


def describe(st):
    t = st.get("last_trigger") or {}
    state = t.get("state")
    if state is None:
        return "no answer"
    if state == "ignored":
        return "ignored: %s" % t.get("reason", "")
    if t.get("flight"):
        if state == "dumped":
            return "flight ring dumped at step %s (reason trigger)" % t.get("dump_step")
        if state == "no-ring":
            return "no flight dump: %s" % t.get("reason", "")
        return "flight dump %s" % state
    text = "warmup at step %s, records steps %s-%s (%s)" % (
        t.get("warmup_step"), t.get("first_step"), t.get("last_step"), state)
    if t.get("late"):
        text += "; late: asked for step %s, read during step %s" % (
            t.get("requested"), t.get("read_at_step"))
    return text


def cmd_trigger(argv):
    p = argparse.ArgumentParser(
        prog="trainprof trigger",
        description="Start a profiling window at the same step in every process of a running "
                    "job (TRAINPROF_SCHEDULE=none, or TRAINPROF_TRIGGER set): 1 warmup step, "
                    "then N recorded steps, one trace per process.  With --flight, have every "
                    "process of a job run with the flight recorder (TRAINPROF_FLIGHT) dump its "
                    "ring now instead.")
    p.add_argument("pids", nargs="*", type=int, metavar="PID",
                   help="processes of the job on this host (their run folder is found in "
                        "/proc/PID/fd)")
    p.add_argument("--run", metavar="FOLDER", help="the job's run folder (default {run_name})")
    p.add_argument("--steps", type=int, default=4, metavar="N", help="steps to record (default 4)")
    p.add_argument("--start", type=int, metavar="STEP",
                   help="the warmup step (default: a margin past the largest current step)")
    p.add_argument("--flight", action="store_true",
                   help="dump every process's flight-recorder ring now (its last N steps and "
                        "the step under way) instead of starting a window")
    p.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                   help="wait this long for every live process to answer (default 10; 0: "
                        "do not wait)")
    a = p.parse_args(argv)
    if bool(a.run) == bool(a.pids):
        p.error("give either --run FOLDER or PIDs")
    if not 1 <= a.steps <= 10000:
        p.error("--steps must be from 1 to 10000")
    if a.flight and a.start is not None:
        p.error("--start does not go with --flight (the ring is dumped at once)")
    if a.start is not None and not 0 <= a.start < 1 << 62:
        p.error("--start must be a step from 0")
    if not (math.isfinite(a.wait) and 0 <= a.wait <= 86400):
        p.error("--wait must be from 0 to 86400 seconds")
    folders = []
    if a.run:
        folders.append(os.path.abspath(a.run))
    for pid in a.pids:
        f = folder_of_pid(pid)
        if f is None:
            err("process %d: no run folder found in /proc/%d/fd (not running here, not ours to "
                "read, or not watching triggers: TRAINPROF_SCHEDULE=none or TRAINPROF_TRIGGER)"
                % (pid, pid))
            return 1
        if f not in folders:
            folders.append(f)
    rc = 0
    for folder in folders:
        rc = max(rc, trigger_folder(folder, a))
    return rc


def trigger_folder(folder, a):
    said = set()
    now = time.time()
    statuses = read_statuses(folder, said, mine=True)
    live = [st for st in statuses if alive(st, now) is not False]
    if not live:
        err("%s: no live process publishes its status in %s (is the job running with "
            "TRAINPROF_SCHEDULE=none, TRAINPROF_TRIGGER or TRAINPROF_FLIGHT?)"
            % (folder, os.path.join(folder, "status")))
        return 1
    if a.flight:
        return flight_folder(folder, a, live, said)
    live = estimate_rates(folder, live, said)
    now = time.time()
    start, top, margin, rate = choose_start(live, now)
    if a.start is not None:
        start = a.start
    if all(st["step"] == 0 for st in live):
        err("warning: no process has counted a step yet: the window begins only once steps are "
            "signalled (TRAINPROF_STEP_ON)")
    names = {st["trigger_file"] for st in live}
    tid = "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"), uuid.uuid4().hex[:8])
    line = "id=%s start=%d warmup=1 active=%d\n" % (tid, start, a.steps)
    for name in sorted(names):
        try:
            path = write_trigger(folder, name, line)
        except FileError as e:
            err(str(e))
            return 1
    sys.stdout.write("trigger %s: warmup at step %d, recording steps %d-%d (largest current step "
                     "%d, margin %d steps%s) -> %s\n"
                     % (tid, start, start + 1, start + a.steps, top, margin,
                        ", %.1f steps/s" % rate if rate is not None else "", printable(path)))
    signal_live(folder, live)
    if a.wait <= 0:
        return 0
    answered = wait_answers(folder, a, live, said, tid, lambda t: True)
    rc = 0
    for st in live:
        got = answered.get(st["_path"])
        text = describe(got) if got else "no answer within %g s" % a.wait
        if not got or (got.get("last_trigger") or {}).get("state") == "ignored":
            rc = 1
        sys.stdout.write("  rank %d pid %d on %s: %s\n" % (st["rank"], st["pid"], printable(st["host"]),
                                                           printable(text)))
    return rc


def signal_live(folder, live):
    """With TRAINPROF_TRIGGER_SIGNAL, have the live processes of this host
    read the trigger file at once."""
    host = socket.gethostname()
    for st in live:
        sig = signal_number(st.get("trigger_signal"))
        if sig and st.get("signal_installed") and st["host"] == host:
            why = send_signal(st["pid"], sig, folder)
            if why is not None:
                err("%s: not signalled: %s" % (st["_path"], why))


def wait_answers(folder, a, live, said, tid, done):
    """{status path: status} of the live processes whose last trigger is
    "tid" and done(last_trigger), waiting up to --wait."""
    want = {st["_path"] for st in live}
    deadline = time.time() + a.wait
    answered = {}
    while True:
        for st in read_statuses(folder, said, mine=True):
            t = st.get("last_trigger") or {}
            if st["_path"] in want and t.get("id") == tid and done(t):
                answered[st["_path"]] = st
        if len(answered) == len(want) or time.time() >= deadline:
            return answered
        time.sleep(0.2)


def flight_folder(folder, a, live, said):
    names = {st["trigger_file"] for st in live}
    tid = "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"), uuid.uuid4().hex[:8])
    path = None
    for name in sorted(names):
        try:
            path = write_trigger(folder, name, "id=%s flight=1\n" % tid)
        except FileError as e:
            err(str(e))
            return 1
    sys.stdout.write("trigger %s: flight dump asked -> %s\n" % (tid, printable(path)))
    signal_live(folder, live)
    if a.wait <= 0:
        return 0
    answered = wait_answers(folder, a, live, said, tid, lambda t: t.get("state") != "pending")
    rc = 0
    for st in live:
        got = answered.get(st["_path"])
        text = describe(got) if got else "no answer within %g s" % a.wait
        if not got or (got.get("last_trigger") or {}).get("state") != "dumped":
            rc = 1
        sys.stdout.write("  rank %d pid %d on %s: %s\n" % (st["rank"], st["pid"], printable(st["host"]),
                                                           printable(text)))
    return rc


def cmd_status(argv):
    p = argparse.ArgumentParser(
        prog="trainprof status",
        description="The processes of a job that watch triggers, from their status files "
                    "(RUN_FOLDER/status/rank*.json).")
    p.add_argument("folders", nargs="+", metavar="RUN_FOLDER")
    p.add_argument("--json", action="store_true", help="print the status files as one JSON list")
    a = p.parse_args(argv)
    now = time.time()
    rows, said = [], set()
    for folder in a.folders:
        for st in read_statuses(folder, said):
            st["alive"] = alive(st, now)
            rows.append(st)
    if a.json:
        for st in rows:
            st.pop("_path", None)
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0 if rows else 1
    if not rows:
        err("no status files in %s" % ", ".join(os.path.join(f, "status") for f in a.folders))
        return 1
    head = ("RANK", "HOST", "PID", "STEP", "STEPS/S", "TRACES", "DROPPED", "ALIVE", "TRIGGER",
            "LAST ERROR")
    table = [head]
    for st in rows:
        t = st.get("last_trigger") or {}
        rate = st.get("steps_per_s")
        live = st["alive"]
        table.append(tuple(printable(c) for c in (
            st["rank"], st["host"], st["pid"], st["step"],
            "%.1f" % rate if rate is not None else "-", st.get("windows_saved"),
            st.get("dropped_events"),
            "exited" if st.get("exited") else "yes" if live else "no" if live is False else "stale?",
            "%s %s" % (t.get("id"), t.get("state")) if t else "-",
            st.get("last_error") or "-")))
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
    for r in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] + "\n")
    live = [st for st in rows if st["alive"]]
    if live and all(st.get("step", 0) == 0 for st in live):
        err("no step counted yet in the live processes: a trigger waits for steps "
            "(TRAINPROF_STEP_ON)")
    return 0
