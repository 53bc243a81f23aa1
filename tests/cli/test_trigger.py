"""On-demand capture of a running job (README "Capturing a running job"): TRAINPROF_SCHEDULE=none,
the trigger file, the status files, `trainprof trigger` and `trainprof status`.

A job here is two train_loop processes (ranks 0 and 1 of 2) in one run
folder, each step sleeping 10 ms, started with no window; the trigger comes
while they run, and they are stopped with SIGTERM once checked.
"""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import tputil

CLI = os.path.join(tputil.ROOT, "scripts", "trainprof")
SLEEP_US = 10000


class Job:
    def __init__(self, env=None, ranks=2, steps=100000):
        self.cwd = tputil.new_dir()
        self.folder = os.path.join(self.cwd, "job")
        self.procs = []
        for rank in range(ranks):
            e = tputil.base_env(dict({
                "TRAINPROF_RUN_NAME": "job", "TRAINPROF_SCHEDULE": "none",
                "RANK": rank, "WORLD_SIZE": ranks}, **(env or {})))
            err = open(os.path.join(self.cwd, "rank%d.err" % rank), "wb")
            self.procs.append(subprocess.Popen(
                [tputil.program("train_loop"), "--steps=%d" % steps, "--sleep-us=%d" % SLEEP_US],
                cwd=self.cwd, env=e, stdout=subprocess.DEVNULL, stderr=err))

    def pids(self):
        return [p.pid for p in self.procs]

    def statuses(self):
        out = {}
        for path in glob.glob(os.path.join(self.folder, "status", "rank*.json")):
            with open(path) as f:
                st = json.load(f)
            out[st["pid"]] = st
        return out

    def wait_status(self, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                st = self.statuses()
            except (OSError, ValueError):
                st = {}
            if set(st) == set(self.pids()) and all(pred(s) for s in st.values()):
                return st
            assert all(p.poll() is None for p in self.procs), "a process of the job ended"
            time.sleep(0.1)
        raise AssertionError("status not reached: %s" % self.statuses())

    def traces(self):
        return tputil.find_traces(self.cwd, "job")

    def wait_traces(self, n, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.traces()) < n:
            time.sleep(0.1)
        return self.traces()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait(timeout=30)

    def stderr(self, rank):
        with open(os.path.join(self.cwd, "rank%d.err" % rank), "rb") as f:
            return f.read().decode(errors="replace")


def cli(*args, timeout=60):
    return subprocess.run([sys.executable, CLI] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, env=tputil.base_env(preload=False))


def cupti_calls(log):
    """The calls the fake CUPTI logged (FAKE_CUPTI_LOG), first words."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [line.split()[0] for line in f if line.strip()]


def running(st):
    return st["step"] > 0 and st["steps_per_s"] is not None


def window(path):
    t = tputil.load_trace(path)
    meta = t["trainprof"]
    return meta, sorted(tputil.steps(t))


def trigger_line(job):
    with open(os.path.join(job.folder, "trigger")) as f:
        return dict(kv.split("=", 1) for kv in f.read().split())


def check_same_window(job, active):
    traces = job.wait_traces(2)
    assert len(traces) == 2, (traces, job.stderr(0), job.stderr(1))
    req = trigger_line(job)
    start = int(req["start"])
    firsts = set()
    for path in traces:
        meta, steps = window(path)
        assert meta["steps_recorded"] == active and not meta["partial"], meta
        assert steps == list(range(meta["first_step"], meta["first_step"] + active)), steps
        firsts.add(meta["first_step"])
        assert meta["trigger"] == {"id": req["id"], "requested_step": start, "late": False}, meta
    # both windows begin at the same step: the one after the trigger's warmup step
    assert firsts == {start + 1}, (firsts, start)
    return start


def test_trigger_run_folder_same_step_in_both_ranks():
    job = Job(env={"FAKE_CUPTI_LOG": "cupti.log"})
    try:
        before = job.wait_status(running)
        assert all(s["schedule"] == "none" and s["windows_saved"] == 0 for s in before.values())
        assert not job.traces()
        res = cli("trigger", "--run", job.folder, "--steps", 3)
        assert res.returncode == 0, res.stderr
        out = res.stdout.decode()
        start = check_same_window(job, 3)
        for rank in (0, 1):
            assert "rank %d pid" % rank in out and "records steps %d-%d" % (start + 1, start + 3) in out, out
        after = job.wait_status(lambda s: s["windows_saved"] == 1)
        assert {s["last_trigger"]["state"] for s in after.values()} == {"done"}
        assert {s["last_trigger"]["first_step"] for s in after.values()} == {start + 1}
        for rank in (0, 1):
            assert re.search(r"trainprof: rank %d: trigger \S+: warmup at step %d, recording steps %d-%d"
                             % (rank, start, start + 1, start + 3), job.stderr(rank))
        # the trigger brought CUPTI in: subscribed once, at the warmup
        assert "subscribe" in cupti_calls(os.path.join(job.cwd, "cupti.log"))

        res = cli("status", job.folder)
        assert res.returncode == 0, res.stderr
        rows = [l.split() for l in res.stdout.decode().splitlines()[1:]]
        assert sorted((r[0], r[2]) for r in rows) == sorted(
            (str(s["rank"]), str(pid)) for pid, s in after.items())
        assert all(r[7] == "yes" and r[5] == "1" for r in rows), rows
    finally:
        job.stop()
    # at exit each status says so, and `status` no longer counts them alive
    st = job.statuses()
    assert all(s["exited"] for s in st.values()), st
    rows = [l.split() for l in cli("status", job.folder).stdout.decode().splitlines()[1:]]
    assert all(r[7] == "exited" for r in rows), rows


def test_trigger_by_pids_with_signal():
    job = Job(env={"TRAINPROF_TRIGGER_SIGNAL": "SIGUSR2"})
    try:
        st = job.wait_status(running)
        assert all(s["trigger_signal"] == "SIGUSR2" and s["signal_installed"] for s in st.values()), st
        res = cli("trigger", "--steps", 2, *job.pids())
        assert res.returncode == 0, res.stderr
        check_same_window(job, 2)
    finally:
        job.stop()
    # SIGUSR2 reached our handler only: the processes ended by SIGTERM
    assert [p.returncode for p in job.procs] == [-signal.SIGTERM] * 2


def test_schedule_none_without_trigger_records_nothing_and_never_subscribes():
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    res = tputil.run("train_loop", ["--steps=30", "--sleep-us=20000"], cwd=d,
                     env={"TRAINPROF_SCHEDULE": "none", "FAKE_CUPTI_LOG": log})
    assert res.rc == 0, res.stderr
    assert res.traces == []
    # no warning about steps, nothing saved: the start-up line alone
    assert tputil.not_startup(l for l in res.stderr.decode().splitlines()
                              if l.startswith("trainprof:")) == [], res.stderr
    assert b"records only when triggered" in res.stderr, res.stderr
    # the fake CUPTI logs every call made to it: none was
    assert "subscribe" not in cupti_calls(log)
    st = [json.load(open(p)) for p in glob.glob(os.path.join(d, "test", "status", "*.json"))]
    assert len(st) == 1 and st[0]["exited"] and st[0]["step"] == 30 and st[0]["windows_saved"] == 0
    assert st[0]["last_trigger"] is None


def test_default_schedule_watches_no_trigger_file():
    d = tputil.new_dir()
    res = tputil.run("train_loop", ["--steps=8"], cwd=d)
    assert res.rc == 0 and len(res.traces) == 1, res.stderr
    assert not os.path.exists(os.path.join(d, "test", "status"))


def test_status_names_the_schedule_as_the_startup_line_does():
    """The status file's "schedule" is the schedule the start-up line names,
    for each of its forms.  It said the keys' values for profiler-api, whose
    windows the keys do not shape ("skip_first=0,wait=0,warmup=1,active=4,
    repeat=1"): the status file had a printer of its own, without that case."""
    for sched in ("profiler-api", "all", "none", "wait=1,warmup=1,active=2,repeat=0", "active=3"):
        d = tputil.new_dir()
        res = tputil.run("train_loop", ["--steps=5", "--sleep-us=20000"], cwd=d,
                         env={"TRAINPROF_SCHEDULE": sched, "TRAINPROF_TRIGGER": "{run_name}/trigger"})
        assert res.rc == 0, res.stderr
        said = re.search(rb"^trainprof: rank 0: schedule (\S+): ", res.stderr, re.M)
        assert said, res.stderr
        (path,) = glob.glob(os.path.join(d, "test", "status", "rank0.*.json"))
        with open(path) as f:
            st = json.load(f)
        assert st["exited"] and st["schedule"] == said.group(1).decode(), (sched, st["schedule"])


def test_late_trigger_starts_at_the_next_step_and_says_so():
    job = Job(ranks=1)
    try:
        job.wait_status(running)
        path = os.path.join(job.folder, "trigger")
        with open(path + ".tmp", "w") as f:
            f.write("id=late1 start=1 warmup=1 active=2\n")
        os.replace(path + ".tmp", path)
        traces = job.wait_traces(1)
        assert len(traces) == 1, job.stderr(0)
        meta, steps = window(traces[0])
        st = job.wait_status(lambda s: s["last_trigger"] and s["last_trigger"]["state"] == "done")
        t = list(st.values())[0]["last_trigger"]
        assert t["late"] and t["requested"] == 1 and t["warmup_step"] == t["read_at_step"] > 1, t
        assert meta["first_step"] == t["first_step"] == t["warmup_step"] + 1 and len(steps) == 2
        assert meta["trigger"] == {"id": "late1", "requested_step": 1, "late": True}, meta
        assert "trigger late1 asked for step 1, which had passed" in job.stderr(0)
    finally:
        job.stop()


def test_trigger_file_older_than_the_process_is_not_acted_on():
    cwd = tputil.new_dir()
    os.makedirs(os.path.join(cwd, "job"))
    with open(os.path.join(cwd, "job", "trigger"), "w") as f:
        f.write("id=stale start=0 active=2\n")
    old = time.time() - 60
    os.utime(os.path.join(cwd, "job", "trigger"), (old, old))
    e = tputil.base_env({"TRAINPROF_RUN_NAME": "job", "TRAINPROF_SCHEDULE": "none"})
    r = subprocess.run([tputil.program("train_loop"), "--steps=150", "--sleep-us=10000"], cwd=cwd,
                       env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 0 and tputil.find_traces(cwd, "job") == [], r.stderr


def test_trigger_over_the_schedules_window_is_ignored():
    # a schedule that records steps 3-4 of every 5 (forever), triggers watched
    job = Job(ranks=1, env={"TRAINPROF_SCHEDULE": "wait=2,warmup=1,active=2,repeat=0",
                            "TRAINPROF_TRIGGER": "{run_name}/trigger"})
    try:
        job.wait_status(running)
        res = cli("trigger", "--run", job.folder, "--steps", 2)
        assert res.returncode == 1 and b"ignored: the schedule warms up or records at step" in res.stdout, res
        t = list(job.statuses().values())[0]["last_trigger"]
        assert t["state"] == "ignored", t
        assert "ignored: the schedule warms up or records at step" in job.stderr(0)
    finally:
        job.stop()


def test_bad_trigger_file_is_a_warning():
    job = Job(ranks=1)
    try:
        job.wait_status(running)
        path = os.path.join(job.folder, "trigger")
        with open(path + ".tmp", "w") as f:
            f.write("start=12 active=0 id=x\n")
        os.replace(path + ".tmp", path)
        deadline = time.time() + 10
        while time.time() < deadline and "active must be" not in job.stderr(0):
            time.sleep(0.1)
        assert "trigger file %s: active must be an integer from 1 to 10000" % path in job.stderr(0)
        assert all(p.poll() is None for p in job.procs)
    finally:
        job.stop()
    assert job.traces() == []


def test_trigger_without_a_job_fails_cleanly():
    d = tputil.new_dir()
    res = cli("trigger", "--run", d)
    assert res.returncode == 1 and b"no live process publishes its status" in res.stderr
    res = cli("trigger", "999999999")
    assert res.returncode == 1 and b"no run folder found" in res.stderr


def test_flight_trigger_dumps_every_rings_now():
    """`trainprof trigger --flight`: a job run with the flight recorder (and
    the default schedule, whose window comes and goes first) watches the
    trigger file for that alone; each process dumps its last N steps and the
    step under way, reason "trigger", and says so in its status."""
    log = os.path.join(tputil.new_dir(), "cupti.log")
    # TRAINPROF_FLIGHT_SLOW: no slow-step dump of a loaded machine's hiccups
    job = Job(env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2", "TRAINPROF_FLIGHT": 5,
                   "TRAINPROF_FLIGHT_SLOW": 1000, "FAKE_CUPTI_LOG": log})
    try:
        job.wait_status(lambda st: st["step"] > 20 and st["windows_saved"] >= 1)
        # no window is watched for: the schedule finished, CUPTI was finalized
        assert "finalize" in cupti_calls(log), cupti_calls(log)
        r = cli("trigger", "--flight", "--run", job.folder)
        out = r.stdout.decode()
        assert r.returncode == 0, (out, r.stderr)
        assert out.count("flight ring dumped at step") == 2, out
        deadline = time.time() + 30
        while True:
            names = [os.path.basename(p) for p in job.traces()]
            dumps = sorted(n for n in names if ".flight-trigger." in n and n.endswith(".json.gz"))
            if len(dumps) == 2 or time.time() > deadline:
                break
            time.sleep(0.1)
        assert len(dumps) == 2, names
        for rank, st in sorted((s["rank"], s) for s in job.statuses().values()):
            step = st["last_trigger"]["dump_step"]
            assert dumps[rank] == "rank%d.flight-trigger.%d.pt.trace.json.gz" % (rank, step)
            t = tputil.load_trace(os.path.join(job.folder, "traces", dumps[rank]))
            assert t["trainprof"]["flight"]["reason"] == "trigger"
            assert tputil.steps(t) == list(range(step - 5, step)), tputil.steps(t)
        # a window asked of such a job is ignored, and says why
        r = cli("trigger", "--run", job.folder, "--steps", 2)
        assert r.returncode == 1 and "flight dumps only" in r.stdout.decode(), r.stdout
    finally:
        job.stop()


def test_flight_trigger_without_the_recorder_finds_no_job():
    job = Job(env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2"}, ranks=1, steps=300)
    try:
        time.sleep(1)
        r = cli("trigger", "--flight", "--run", job.folder, "--wait", 1)
        assert r.returncode == 1 and b"TRAINPROF_FLIGHT" in r.stderr, r.stderr
    finally:
        job.stop()
