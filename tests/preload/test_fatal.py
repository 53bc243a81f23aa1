"""Fatal signals during a recording window (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
SIGABRT): the window up to the fault is saved as a partial trace naming the
signal, then the original disposition runs - the default (the process dies
of the same signal) or the program's own handler, chained (its output and
exit status are the program's).  The program is tests/programs/fatal_loop.c;
core dumps are off (RLIMIT_CORE 0) so that the tests leave none."""

import os
import resource
import signal
import subprocess

import pytest

import tputil

SCHEDULE = "warmup=1,active=1000"        # step 0 warms up, then every step records
CRASH_AT = 4
FAULTS = [("segv", signal.SIGSEGV), ("bus", signal.SIGBUS), ("fpe", signal.SIGFPE),
          ("ill", signal.SIGILL), ("abrt", signal.SIGABRT)]


# Under make check-sanitize (TP_TEST_ASAN: the ASan runtime preloaded
# first) ASan would take these signals itself and exit 1 with its report;
# the faults are the program's (fatal_loop is built without sanitizers,
# tests/programs/fatal_loop.mk), so ASan leaves them to the dispositions
# under test.
SAN = ({"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=0") +
        ":handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0"}
       if os.environ.get("TP_TEST_ASAN") else {})


def fatal_env(env=None, preload=True):
    return tputil.base_env(dict({"TRAINPROF_SCHEDULE": SCHEDULE}, **SAN, **(env or {})), preload)


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(how, handler=None, preload=True, env=None, timeout=60):
    """fatal_loop 20 CRASH_AT:how [handler], core dumps off."""
    cwd = tputil.new_dir()
    args = [tputil.program("fatal_loop"), "20", "%d:%s" % (CRASH_AT, how)]
    if handler:
        args.append(handler)
    e = fatal_env(env, preload)
    p = subprocess.run(args, cwd=cwd, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, preexec_fn=_no_core)
    return tputil.Result(p.returncode, p.stdout, p.stderr, tputil.find_traces(cwd))


def check_partial(r, signame):
    """One trace, parsed, marked partial by "signame", holding the recorded
    steps before the fault and the launches of the step it cut short."""
    assert len(r.traces) == 1, (r.traces, r.stderr)
    trace = tputil.load_trace(r.traces[0])
    meta = trace["trainprof"]
    assert meta["partial"] is True
    assert meta["partial_reason"] == signame
    assert tputil.steps(trace) == list(range(1, CRASH_AT)), tputil.steps(trace)
    assert tputil.trace_batch(r.traces[0]) == CRASH_AT
    # 3 launches per step: steps 1..K-1, and those of step K before its fault
    assert len(tputil.launches(trace)) == 3 * CRASH_AT
    lines = r.stdout.decode().splitlines()
    assert lines == ["step %d" % s for s in range(CRASH_AT + 1)], lines


def our_lines(r):
    return [l for l in r.stderr.decode(errors="replace").splitlines()
            if l.startswith("trainprof:")]


@pytest.mark.parametrize("how,sig", FAULTS, ids=[h for h, _ in FAULTS])
def test_default_disposition_dies_of_the_signal_with_a_partial_trace(how, sig):
    plain = run(how, preload=False)
    assert plain.rc == -sig, plain.stderr
    r = run(how)
    assert r.rc == -sig, (r.rc, r.stderr)
    assert r.stdout == plain.stdout
    check_partial(r, signal.Signals(sig).name)


@pytest.mark.parametrize("how,sig", FAULTS, ids=[h for h, _ in FAULTS])
@pytest.mark.parametrize("kind", ["siginfo", "plain"])
def test_program_handler_is_chained(how, sig, kind):
    handler = "42" if kind == "siginfo" else "42,plain"
    marker = "fatal_loop: handler %s%s" % (signal.Signals(sig).name,
                                          " (siginfo)" if kind == "siginfo" else "")
    plain = run(how, handler, preload=False)
    assert plain.rc == 42 and plain.stderr.decode().splitlines() == [marker], plain.stderr
    r = run(how, handler)
    assert r.rc == 42, (r.rc, r.stderr)
    assert r.stdout == plain.stdout
    assert [l for l in r.stderr.decode().splitlines() if not l.startswith("trainprof:")] == [marker]
    check_partial(r, signal.Signals(sig).name)


def test_returning_handler_then_abort_default():
    """A program handler of SIGABRT that returns: abort() then restores the
    default and raises again; the process dies of SIGABRT, the handler ran
    once, the trace is saved."""
    r = run("abrt", "return")
    assert r.rc == -signal.SIGABRT, (r.rc, r.stderr)
    assert r.stderr.decode().count("fatal_loop: handler SIGABRT (siginfo)") == 1, r.stderr
    check_partial(r, "SIGABRT")


def test_resethand_is_honoured():
    """A SA_RESETHAND handler that returns from a fault: the fault happens
    again under the default disposition, as without the library (with our
    handler left installed it would loop forever)."""
    plain = run("segv", "return,resethand", preload=False)
    assert plain.rc == -signal.SIGSEGV, plain.stderr
    r = run("segv", "return,resethand", timeout=20)
    assert r.rc == -signal.SIGSEGV, (r.rc, r.stderr)
    assert r.stderr.decode().count("fatal_loop: handler SIGSEGV") == 1, r.stderr
    check_partial(r, "SIGSEGV")


def test_sent_signal_is_raised_again():
    """raise(SIGSEGV) is no fault that happens again on return: the default
    disposition is restored and the signal raised again."""
    r = run("raise")
    assert r.rc == -signal.SIGSEGV, (r.rc, r.stderr)
    check_partial(r, "SIGSEGV")


def test_stack_overflow_on_the_activating_thread():
    """Stack overflow: the activating thread has our alternate signal stack,
    so the handler runs and saves; the process still dies of SIGSEGV."""
    plain = run("stack", preload=False)
    assert plain.rc == -signal.SIGSEGV
    r = run("stack")
    assert r.rc == -signal.SIGSEGV, (r.rc, r.stderr)
    check_partial(r, "SIGSEGV")


def test_fault_outside_a_window_saves_nothing():
    """During warmup (step 0) nothing is recorded: no trace, same death."""
    cwd = tputil.new_dir()
    e = fatal_env()
    p = subprocess.run([tputil.program("fatal_loop"), "20", "0:segv"], cwd=cwd, env=e,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                       preexec_fn=_no_core)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    assert tputil.find_traces(cwd) == []
    assert not tputil.not_startup(l for l in p.stderr.decode().splitlines() if l.startswith("trainprof:"))


def test_exit_mid_window_names_exit():
    """partial_reason at exit: a normal exit mid-window says "exit"."""
    r = tputil.run("fatal_loop", ["6", "99:segv"], env=dict(SAN, TRAINPROF_SCHEDULE=SCHEDULE))
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1
    meta = tputil.load_trace(r.traces[0])["trainprof"]
    assert meta["partial"] is True and meta["partial_reason"] == "exit"


def test_fault_while_the_previous_window_is_written():
    """Every step is a window of 20,000 launches: the fault of step K comes
    while tp-flush still writes the window of step K-1 (formatting a record
    costs more than making one); the open window is saved after it, not
    forgotten.  A race, so 2 runs."""
    for _ in range(2):
        r = run("segv", env={"TRAINPROF_SCHEDULE": "warmup=0,active=1,repeat=0",
                             "FATAL_LAUNCHES": 20000})
        assert r.rc == -signal.SIGSEGV, (r.rc, r.stderr)
        metas = [tputil.load_trace(t)["trainprof"] for t in r.traces]
        assert len(metas) == CRASH_AT + 1, (r.traces, r.stderr)
        assert [m["partial_reason"] for m in metas if m["partial"]] == ["SIGSEGV"]


def test_stuck_flush_thread_is_given_up():
    """tp-flush cannot finish the save: its "saved" line blocks on a stderr
    pipe that is full and never read.  The handler gives up at its bound
    (10 s) and the original disposition runs; without a bound the process
    would hang (the subprocess timeout catches that)."""
    r_fd, w_fd = os.pipe()
    try:
        os.set_blocking(w_fd, False)
        for chunk in (b"x" * 4096, b"x"):
            try:
                while True:
                    os.write(w_fd, chunk)
            except BlockingIOError:
                pass
        os.set_blocking(w_fd, True)
        cwd = tputil.new_dir()
        args = [tputil.program("fatal_loop"), "20", "%d:segv" % CRASH_AT]
        p = subprocess.run(args, cwd=cwd, env=fatal_env(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=w_fd,
                           timeout=60, preexec_fn=_no_core)
    finally:
        os.close(w_fd)
        os.close(r_fd)
    assert p.returncode == -signal.SIGSEGV


def test_schedule_all_is_partial_on_a_signal_only():
    """TRAINPROF_SCHEDULE=all: the one window ends at exit by design (not
    partial), but a fatal signal cuts it short (partial, named)."""
    r = run("segv", env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == -signal.SIGSEGV, (r.rc, r.stderr)
    assert len(r.traces) == 1, r.stderr
    meta = tputil.load_trace(r.traces[0])["trainprof"]
    assert meta["partial"] is True and meta["partial_reason"] == "SIGSEGV"
    ok = tputil.run("fatal_loop", ["6", "99:segv"], env=dict(SAN, TRAINPROF_SCHEDULE="all"))
    assert ok.rc == 0 and len(ok.traces) == 1, ok.stderr
    meta = tputil.load_trace(ok.traces[0])["trainprof"]
    assert meta["partial"] is False and meta["partial_reason"] is None
