"""trainprof trigger / trainprof status: on-demand capture of a running job
(SPEC 4, TRAINPROF_TRIGGER), with no daemon.  Python standard library only;
scripts/trainprof imports it.

The processes' side is collector/trigger.c.  Each process that watches
triggers (TRAINPROF_SCHEDULE=none, or TRAINPROF_TRIGGER set) keeps, in its
run folder (the trigger file's folder, default {run_name}):
  status/rank{rank}.{pid}.json  its status, rewritten about once a second
                                and at exit;
and polls, every 0.5 s, the trigger file (default {run_name}/trigger): one
line "id=ID start=S warmup=1 active=N".  Each process acts on an id once:
it warms up at step S and records steps S+1 .. S+N, saving one trace; a
process that reads the file after step S has begun starts at the step that
begins next, and says so.

`trigger` writes the file atomically (a temporary name, then rename), with
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

`status` prints one row per process: rank, host, pid, step, step rate,
traces saved, dropped events, alive (kill -0 on this host; elsewhere, a
status updated in the last 10 s), the last trigger's state and the last
error line.
"""

import argparse
import glob
import json
import math
import os
import signal
import socket
import sys
import time
import uuid

STALE_S = 10.0          # a status older than this, from another host, is not live
MARGIN_S = 1.5          # seconds of steps between the trigger and its start step
MIN_MARGIN = 2          # steps


def err(msg):
    sys.stderr.write("trainprof: %s\n" % msg)


def read_statuses(folder):
    """The status files of a run folder, parsed; unreadable ones skipped."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "status", "rank*.json"))):
        try:
            with open(path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(st, dict) and isinstance(st.get("pid"), int):
            st["_path"] = path
            out.append(st)
    out.sort(key=lambda s: (s.get("rank", 0), s.get("host", ""), s["pid"]))
    return out


def alive(st, now=None):
    """True, False, or None (another host, not known)."""
    now = time.time() if now is None else now
    if st.get("exited"):
        return False
    if st.get("host") == socket.gethostname():
        try:
            os.kill(st["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return now - float(st.get("updated", 0)) < STALE_S


def folder_of_pid(pid):
    """The run folder that process `pid` holds open (collector/trigger.c),
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
        if target.startswith("/") and glob.glob(
                os.path.join(glob.escape(target), "status", "rank*.%d.json" % pid)):
            return target
    return None


def signal_number(name):
    if name in ("SIGUSR1", "SIGUSR2"):
        return getattr(signal, name)
    if name and name.startswith("SIGRTMIN+"):
        return signal.SIGRTMIN + int(name[len("SIGRTMIN+"):])
    return None


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


def estimate_rates(folder, live):
    """Fill in a step rate where a status has none yet (it needs 2 s of
    steps): from two reads of the status files a second apart."""
    if all(st.get("steps_per_s") is not None for st in live):
        return live
    first = {st["_path"]: (st.get("step", 0), float(st.get("updated", 0))) for st in live}
    time.sleep(1.2)
    again = {st["_path"]: st for st in read_statuses(folder)}
    for st in live:
        new = again.get(st["_path"])
        if st.get("steps_per_s") is not None or not new:
            continue
        s0, t0 = first[st["_path"]]
        dt = float(new.get("updated", 0)) - t0
        st.update(new)
        if dt > 0:
            st["steps_per_s"] = (new.get("step", 0) - s0) / dt
    return live


def write_trigger(folder, name, line):
    path = os.path.join(folder, name)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def describe(st):
    t = st.get("last_trigger") or {}
    state = t.get("state")
    if state is None:
        return "no answer"
    if state == "ignored":
        return "ignored: %s" % t.get("reason", "")
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
                    "then N recorded steps, one trace per process.")
    p.add_argument("pids", nargs="*", type=int, metavar="PID",
                   help="processes of the job on this host (their run folder is found in "
                        "/proc/PID/fd)")
    p.add_argument("--run", metavar="FOLDER", help="the job's run folder (default {run_name})")
    p.add_argument("--steps", type=int, default=4, metavar="N", help="steps to record (default 4)")
    p.add_argument("--start", type=int, metavar="STEP",
                   help="the warmup step (default: a margin past the largest current step)")
    p.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                   help="wait this long for every live process to answer (default 10; 0: "
                        "do not wait)")
    a = p.parse_args(argv)
    if bool(a.run) == bool(a.pids):
        p.error("give either --run FOLDER or PIDs")
    if not 1 <= a.steps <= 10000:
        p.error("--steps must be from 1 to 10000")
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
    now = time.time()
    statuses = read_statuses(folder)
    live = [st for st in statuses if alive(st, now) is not False]
    if not live:
        err("%s: no live process publishes its status in %s (is the job running with "
            "TRAINPROF_SCHEDULE=none or TRAINPROF_TRIGGER?)" % (folder, os.path.join(folder, "status")))
        return 1
    live = estimate_rates(folder, live)
    now = time.time()
    start, top, margin, rate = choose_start(live, now)
    if a.start is not None:
        start = a.start
    if all(st.get("step", 0) == 0 for st in live):
        err("warning: no process has counted a step yet: the window begins only once steps are "
            "signalled (TRAINPROF_STEP_ON)")
    names = {st.get("trigger_file") or "trigger" for st in live}
    tid = "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"), uuid.uuid4().hex[:8])
    line = "id=%s start=%d warmup=1 active=%d\n" % (tid, start, a.steps)
    for name in sorted(names):
        path = write_trigger(folder, name, line)
    sys.stdout.write("trigger %s: warmup at step %d, recording steps %d-%d (largest current step "
                     "%d, margin %d steps%s) -> %s\n"
                     % (tid, start, start + 1, start + a.steps, top, margin,
                        ", %.1f steps/s" % rate if rate is not None else "", path))
    host = socket.gethostname()
    for st in live:
        sig = signal_number(st.get("trigger_signal"))
        if sig and st.get("signal_installed") and st.get("host") == host:
            try:
                os.kill(st["pid"], sig)
            except OSError as e:
                err("process %d: cannot signal: %s" % (st["pid"], e.strerror))
    if a.wait <= 0:
        return 0
    want = {st["_path"] for st in live}
    deadline = time.time() + a.wait
    answered = {}
    while True:
        for st in read_statuses(folder):
            t = st.get("last_trigger") or {}
            if st["_path"] in want and t.get("id") == tid:
                answered[st["_path"]] = st
        if len(answered) == len(want) or time.time() >= deadline:
            break
        time.sleep(0.2)
    rc = 0
    for st in live:
        got = answered.get(st["_path"])
        text = describe(got) if got else "no answer within %g s" % a.wait
        if not got or (got.get("last_trigger") or {}).get("state") == "ignored":
            rc = 1
        sys.stdout.write("  rank %s pid %s on %s: %s\n" % (st.get("rank"), st["pid"], st.get("host"), text))
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
    rows = []
    for folder in a.folders:
        for st in read_statuses(folder):
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
        table.append((
            str(st.get("rank")), str(st.get("host")), str(st["pid"]), str(st.get("step")),
            "%.1f" % rate if rate is not None else "-", str(st.get("windows_saved")),
            str(st.get("dropped_events")),
            "exited" if st.get("exited") else "yes" if live else "no" if live is False else "stale?",
            "%s %s" % (t.get("id"), t.get("state")) if t else "-",
            st.get("last_error") or "-"))
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
    for r in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] + "\n")
    live = [st for st in rows if st["alive"]]
    if live and all(st.get("step", 0) == 0 for st in live):
        err("no step counted yet in the live processes: a trigger waits for steps "
            "(TRAINPROF_STEP_ON)")
    return 0
