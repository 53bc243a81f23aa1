"""The flight recorder (TRAINPROF_FLIGHT=N, README "The flight recorder"):
outside windows the last N steps are kept and dumped as a trace and its
reports, named rank0.flight-REASON.STEP, on a slow step, an allocation out
of memory and a fatal signal; a clean exit writes no flight file; windows
of a schedule work as before and the ring resumes after them; bad values
are one line and the job runs unprofiled.  The programs are
tests/programs/train_loop.c (--slow, --oom-at) and fatal_loop.c."""

import json
import os
import re
import resource
import signal
import subprocess

import tputil

# no window of the schedule, no trigger file watched: only the recorder writes
QUIET = {"TRAINPROF_SCHEDULE": "none", "TRAINPROF_TRIGGER": "none"}


# for the dumps that are not slow-step ones: no slow-step dump of a loaded
# machine's hiccup beside them
STEADY = {"TRAINPROF_FLIGHT_SLOW": 1000}

# the slow-step tests: step 30 is 30 times as long, and the factor 10, so
# that a loaded machine's hiccup of a step before it (at most one dump per
# 100 steps) does not take the dump's place
SLOW = "--slow=30:30"
FACTOR = {"TRAINPROF_FLIGHT_SLOW": 10}


def flight_env(n=10, **extra):
    return dict(QUIET, TRAINPROF_FLIGHT=n, **extra)


def reports(cwd):
    d = os.path.join(cwd, "test", "reports")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def x_events(trace):
    return sorted(tputil.events(trace, ph="X"), key=lambda e: e["ts"] + e.get("dur", 0))


def check_one_dump(r, reason, step):
    """The run wrote exactly one trace, the dump for "reason" at "step", with
    its summary, and the trace's trainprof object says so."""
    assert [os.path.basename(t) for t in r.traces] == \
        ["rank0.flight-%s.%d.pt.trace.json.gz" % (reason, step)], (r.traces, r.stderr)
    # a failed allocation for want of memory also gets the ledger's report
    oom = ["rank0.oom.json", "rank0.oom.txt"] if reason == "oom" else []
    assert reports(r.cwd) == sorted(["rank0.flight-%s.%d.pt.trace.summary.%s" % (reason, step, x)
                                     for x in ("json", "txt")] + oom)
    trace = tputil.load_trace(r.traces[0])
    fl = trace["trainprof"]["flight"]
    assert fl["reason"] == reason and fl["step"] == step, fl
    lines = [ln for ln in r.stderr.decode().splitlines() if "flight recorder" in ln]
    assert len(lines) == 1 and r.traces[0].endswith(lines[0].split(" to ")[-1]), r.stderr
    return trace


def test_slow_step_dumps_it_and_the_steps_before():
    """Steps of 3 ms, step 30 five times longer: one dump of steps 21-30
    (N=10), the slow step last and the longest, each step with its calls."""
    r = tputil.run("train_loop", ["--steps=45", "--sleep-us=3000", SLOW],
                   env=flight_env(10, **FACTOR))
    assert r.rc == 0, r.stderr
    trace = check_one_dump(r, "slow-step", 30)
    fl = trace["trainprof"]["flight"]
    assert fl["step_ms"] > fl["threshold_ms"] and fl["threshold_ms"] == \
        pytest_approx(10 * fl["median_ms"]), fl
    assert tputil.steps(trace) == list(range(21, 31))
    per = tputil.launches_per_step(trace)
    assert all(per[s] == 5 for s in range(21, 31)), per     # 4 + the optimizer's
    durs = {int(e["name"].split("#")[1]): e["dur"] for e in tputil.events(trace, ph="X")
            if e["name"].startswith("ProfilerStep#")}
    assert max(durs, key=durs.get) == 30, durs
    assert durs[30] > 4 * sorted(durs.values())[len(durs) // 2], durs
    # nothing older than step 21: every call lies in a kept step
    first = min(e["ts"] for e in tputil.events(trace, ph="X") if e["name"] == "ProfilerStep#21")
    assert min(e["ts"] for e in tputil.events(trace, ph="X", cat="cuda_runtime")) >= first


def test_slow_step_median_is_the_median_of_the_50_steps_before():
    """The dump's median_ms is the median of the 50 step durations before
    the slow step, as the trace's own step events give them (the running
    median is kept sorted as steps come and go: checked against a sort).
    Step 60 is 40 times as long and the factor 15: a loaded machine's
    hiccup of a step before it (at most one dump per 100 steps) does not
    take the dump's place."""
    r = tputil.run("train_loop", ["--steps=70", "--sleep-us=2000", "--slow=60:40"],
                   env=flight_env(61, TRAINPROF_FLIGHT_SLOW=15))
    assert r.rc == 0, r.stderr
    trace = check_one_dump(r, "slow-step", 60)
    durs = {int(e["name"].split("#")[1]): e["dur"] for e in tputil.events(trace, ph="X")
            if e["name"].startswith("ProfilerStep#")}
    before = sorted(durs[s] for s in range(10, 60))
    median_ms = (before[24] + before[25]) / 2 / 1000
    assert trace["trainprof"]["flight"]["median_ms"] == pytest_approx_abs(median_ms, 0.002), \
        (trace["trainprof"]["flight"], median_ms)


def pytest_approx_abs(v, tol):
    import pytest
    return pytest.approx(v, abs=tol)


def test_dump_has_its_memory_table():
    """A dump's summary has the memory table a window's has, though the
    ring never took the totals at its first kept step: each step allocates
    its activations and frees them, so the dump of 5 steps starts and ends
    at the same level, peaks one activation (1 MiB) above it, and counts 5
    times the step's allocations and frees."""
    r = tputil.run("train_loop", ["--steps=40", "--sleep-us=2000", SLOW,
                                  "--activations=1048576"], env=flight_env(5, **FACTOR))
    assert r.rc == 0, r.stderr
    check_one_dump(r, "slow-step", 30)
    path = os.path.join(r.cwd, "test", "reports", "rank0.flight-slow-step.30.pt.trace.summary.json")
    with open(path) as f:
        mem = json.load(f)["memory"]
    assert len(mem) == 1 and mem[0]["where"] == "GPU0", mem
    m = mem[0]
    assert m["start_bytes"] == m["end_bytes"] and m["peak_bytes"] >= m["start_bytes"] + (1 << 20), m
    assert m["allocs"] == m["frees"] and m["allocs"] > 0 and m["allocs"] % 5 == 0, m


def pytest_approx(v):
    import pytest
    return pytest.approx(v, rel=1e-3)


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def test_sigsegv_after_10_steps_dumps_and_still_dies_of_it():
    cwd = tputil.new_dir()
    env = tputil.base_env(flight_env(10, **STEADY))
    if os.environ.get("TP_TEST_ASAN"):      # the fault is the program's (test_fatal.py)
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "detect_leaks=0") + ":handle_segv=0"
    p = subprocess.run([tputil.program("fatal_loop"), "20", "10:segv"], cwd=cwd, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60, preexec_fn=_no_core)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    r = tputil.Result(p.returncode, p.stdout, p.stderr, tputil.find_traces(cwd))
    r.cwd = cwd
    trace = check_one_dump(r, "SIGSEGV", 10)
    assert tputil.steps(trace) == list(range(0, 10))
    # the step under way is there too: its calls come after step 9's end
    end9 = [e["ts"] + e["dur"] for e in tputil.events(trace, ph="X")
            if e["name"] == "ProfilerStep#9"][0]
    after = [e["name"] for e in tputil.events(trace, ph="X", cat="cuda_runtime") if e["ts"] > end9]
    assert "cudaStreamSynchronize" in after, after


def test_a_second_fault_in_the_programs_handler_after_the_dump():
    """The program's own SIGSEGV handler faults again (the signal blocked
    there: the kernel ends the process with it): the dump, made before
    the program's handler runs, is whole, and the process dies of SIGSEGV."""
    cwd = tputil.new_dir()
    env = tputil.base_env(flight_env(10, **STEADY))
    if os.environ.get("TP_TEST_ASAN"):
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "detect_leaks=0") + ":handle_segv=0"
    p = subprocess.run([tputil.program("fatal_loop"), "20", "10:segv", "fault"], cwd=cwd, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60, preexec_fn=_no_core)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    assert b"fatal_loop: handler SIGSEGV" in p.stderr, p.stderr
    r = tputil.Result(p.returncode, p.stdout, p.stderr, tputil.find_traces(cwd))
    r.cwd = cwd
    trace = check_one_dump(r, "SIGSEGV", 10)
    assert tputil.steps(trace) == list(range(0, 10))


def test_failed_cudamalloc_dumps_with_the_failed_call_last():
    r = tputil.run("train_loop", ["--steps=40", "--oom-at=12"],
                   env=flight_env(5, **STEADY, FAKE_CUDA_OOM_BYTES=100 << 20))
    assert r.rc == 3 and b"train_loop: oom:" in r.stderr, r.stderr
    trace = check_one_dump(r, "oom", 12)
    assert tputil.steps(trace) == list(range(7, 12))
    last = x_events(trace)[-1]
    assert last["name"] == "cudaMalloc", last
    assert last["args"]["failed"] == 1 and last["args"]["bytes"] == 1 << 30, last


def test_sticky_cuda_error_dumps_with_the_failed_call_last():
    """The 13th cudaStreamSynchronize (step 12's) returns
    cudaErrorIllegalAddress on the fake: the dump of steps 7-11 and step 12
    up to that call, which is its last event, with its status."""
    r = tputil.run("train_loop", ["--steps=40"], env=flight_env(5, **STEADY, FAKE_CUDA_STICKY_AT=13))
    assert r.rc == 1 and b"cudaStreamSynchronize" in r.stderr, r.stderr
    trace = check_one_dump(r, "cuda-error", 12)
    assert tputil.steps(trace) == list(range(7, 12))
    last = x_events(trace)[-1]
    assert last["name"] == "cudaStreamSynchronize" and last["args"]["status"] == 700, last


def test_nccl_error_dumps_with_the_failed_collective_last():
    """The 9th ncclAllReduce (step 8's) returns ncclRemoteError on the fake,
    as NCCL does when a peer's connection breaks: the dump of steps 3-7 and
    step 8 up to that call, which is its last event, with its status (6)."""
    r = tputil.run("ddp_loop", ["--steps=20"],
                   env=flight_env(5, **STEADY, FAKE_NCCL_FAIL_AT=9, RANK=0, WORLD_SIZE=1))
    assert r.rc == 1 and b"ncclAllReduce" in r.stderr, r.stderr
    trace = check_one_dump(r, "nccl-error", 8)
    assert tputil.steps(trace) == list(range(3, 8))
    last = x_events(trace)[-1]
    assert last["name"] == "ncclAllReduce" and last["args"]["status"] == 6, last


def test_clean_exit_writes_no_flight_file_and_sigterm_does():
    """The same loop: run to its end it leaves no file; stopped by SIGTERM
    after step 15 it leaves the dump of its last 10 steps and the step under
    way, and dies of SIGTERM."""
    args = ["--steps=400", "--sleep-us=2000"]
    r = tputil.run("train_loop", ["--steps=40", "--sleep-us=500"], env=flight_env(10, **STEADY))
    assert r.rc == 0, r.stderr
    assert r.traces == [] and reports(r.cwd) == [], tputil.files_under(r.cwd)
    assert b"flight" not in r.stderr

    cwd = tputil.new_dir()
    p = subprocess.Popen([tputil.program("train_loop"), "--notify=15"] + args, cwd=cwd,
                         env=tputil.base_env(flight_env(10, **STEADY)), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = b""
    while b"step 15 done" not in err:
        line = p.stderr.readline()
        assert line, err
        err += line
    p.send_signal(signal.SIGTERM)
    err += p.stderr.read()
    assert p.wait(timeout=60) == -signal.SIGTERM, err
    traces = tputil.find_traces(cwd)
    assert len(traces) == 1 and os.path.basename(traces[0]).startswith("rank0.flight-SIGTERM."), \
        (traces, err)
    trace = tputil.load_trace(traces[0])
    fl = trace["trainprof"]["flight"]
    assert fl["reason"] == "SIGTERM" and fl["step"] >= 16, fl
    assert tputil.steps(trace) == list(range(fl["step"] - 10, fl["step"]))


def test_windows_work_as_before_and_the_ring_resumes_after_them():
    """A schedule's window holds what it holds without the recorder, and a
    slow step after it dumps the steps since the window only."""
    sched = {"TRAINPROF_SCHEDULE": "wait=2,warmup=1,active=3"}
    args = ["--steps=40", "--sleep-us=3000", SLOW]
    plain = tputil.run("train_loop", args, env=dict(sched, TRAINPROF_TRIGGER="none"))
    r = tputil.run("train_loop", args, env=dict(sched, TRAINPROF_TRIGGER="none",
                                                TRAINPROF_FLIGHT=40, **FACTOR))
    assert plain.rc == 0 and r.rc == 0, r.stderr
    names = [os.path.basename(t) for t in r.traces]
    assert names == ["rank0.00000006.pt.trace.json.gz", "rank0.flight-slow-step.30.pt.trace.json.gz"]
    assert [os.path.basename(t) for t in plain.traces] == names[:1]
    win, win0 = tputil.load_trace(r.traces[0]), tputil.load_trace(plain.traces[0])
    assert tputil.steps(win) == tputil.steps(win0) == [3, 4, 5]
    assert tputil.launches_per_step(win) == tputil.launches_per_step(win0)
    assert win["trainprof"]["flight"] is None
    assert win["trainprof"]["dropped_events"] == 0 and win["trainprof"]["late_events"] == 0
    dump = tputil.load_trace(r.traces[1])
    assert tputil.steps(dump) == list(range(6, 31))     # from the first step after the window


def test_dump_right_after_a_window_while_it_is_written():
    """The step after a window is slow: its dump is asked while tp-flush is
    still writing the window (it waits up to two steps for the window's
    device records): both files, each whole, the dump holding only the
    steps since the ring started again."""
    r = tputil.run("train_loop", ["--steps=45", "--sleep-us=3000", SLOW],
                   env=flight_env(10, TRAINPROF_SCHEDULE="wait=26,warmup=1,active=3", **FACTOR))
    assert r.rc == 0, r.stderr
    names = [os.path.basename(t) for t in r.traces]
    assert names == ["rank0.00000030.pt.trace.json.gz", "rank0.flight-slow-step.30.pt.trace.json.gz"], \
        (names, r.stderr)
    assert tputil.steps(tputil.load_trace(r.traces[0])) == [27, 28, 29]
    dump = tputil.load_trace(r.traces[1])
    assert tputil.steps(dump) == [30] and dump["trainprof"]["flight"]["reason"] == "slow-step"


def test_memory_cap_keeps_the_newest_steps():
    """TRAINPROF_FLIGHT_MB=1 with 3,000 launches a step (about 190 KiB of
    records each): the dump keeps fewer steps than asked, the newest."""
    r = tputil.run("train_loop", ["--steps=40", "--launches=3000", "--sleep-us=3000",
                                  SLOW],
                   env=flight_env(20, TRAINPROF_FLIGHT_MB=1, **FACTOR))
    assert r.rc == 0, r.stderr
    trace = check_one_dump(r, "slow-step", 30)
    st = tputil.steps(trace)
    assert st and st[-1] == 30 and len(st) < 10, st
    assert st == list(range(st[0], 31))
    assert trace["trainprof"]["dropped_events"] == 0


BAD = [
    ("TRAINPROF_FLIGHT", "-1", "must be an integer between 0 and 10000"),
    ("TRAINPROF_FLIGHT", "many", "must be an integer between 0 and 10000"),
    ("TRAINPROF_FLIGHT_MB", "0", "must be an integer between 1 and 65536"),
    ("TRAINPROF_FLIGHT_SLOW", "1", "must be a number greater than 1 and at most 1000"),
    ("TRAINPROF_FLIGHT_SLOW", "x3", "must be a number greater than 1 and at most 1000"),
]


def test_bad_values_are_one_line_and_the_job_runs_unprofiled():
    args = ["--steps=40", "--sleep-us=3000", "--slow=30:5"]
    plain = tputil.run("train_loop", args, preload=False)
    for var, value, accepted in BAD:
        env = {"TRAINPROF_FLIGHT": "10", var: value}
        r = tputil.run("train_loop", args, env=env)       # the default schedule too
        assert r.rc == 0 and r.stdout == plain.stdout, r.stderr
        lines = [ln for ln in r.stderr.decode().splitlines() if ln.startswith("trainprof:")]
        assert lines == ['trainprof: error: %s="%s": %s' % (var, value, accepted)], lines
        assert r.traces == [], (var, value, r.traces)


def test_trainprof_run_flight_option():
    cwd = tputil.new_dir()
    env = tputil.base_env(QUIET, preload=False)
    if os.environ.get("TP_TEST_ASAN"):      # sanitized: the ASan runtime must come first
        env["LD_PRELOAD"] = os.environ["TP_TEST_ASAN"]
    p = subprocess.run([os.path.join(tputil.ROOT, "scripts", "trainprof"), "run",
                        "--lib", tputil.lib_path(), "--flight", "10", "--flight-slow", "10",
                        "--", tputil.program("train_loop"), "--steps=45", "--sleep-us=3000",
                        SLOW], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr
    names = [os.path.basename(t) for t in tputil.find_traces(cwd)]
    assert names == ["rank0.flight-slow-step.30.pt.trace.json.gz"], (names, p.stderr)
    fl = tputil.load_trace(tputil.find_traces(cwd)[0])["trainprof"]["flight"]
    assert re.match(r"\d", str(fl["threshold_ms"])) and \
        fl["threshold_ms"] == pytest_approx(10 * fl["median_ms"])
