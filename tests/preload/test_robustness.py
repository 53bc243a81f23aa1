"""The library never changes what the program does (README "Never harming
the job"): same
stdout and exit status, nothing of ours on stdout, inert without CUDA, bad
configuration reported once and ignored, SIGTERM, threads, fork."""

import os
import re
import signal
import subprocess
import time

import pytest

import tputil


def _stderr_lines(r):
    return r.stderr.decode("utf-8", errors="replace").splitlines()


def _only_our_lines(r):
    for line in _stderr_lines(r):
        assert line.startswith("trainprof: "), line


# ---- same behaviour with and without the library ---------------------------

SAME_OUTPUT = [
    ("train_loop", ["--steps=7", "--bad-launch"], {}),
    ("train_loop", ["--steps=6", "--mode=nvtx"], {"TRAINPROF_SCHEDULE": "all"}),
    ("train_loop", ["--steps=4", "--mode=none"], {"TRAINPROF_STEP_ON": "launch:*adam*"}),
    ("threads", ["4", "500"], {"TRAINPROF_SCHEDULE": "all"}),
    ("hostile_names", ["2"], {"TRAINPROF_SCHEDULE": "all"}),
]


@pytest.mark.parametrize("prog,args,env", SAME_OUTPUT,
                         ids=["%s-%d" % (p, i) for i, (p, _, _) in enumerate(SAME_OUTPUT)])
def test_same_stdout_and_status(prog, args, env):
    plain = tputil.run(prog, args, env=env, preload=False)
    pre = tputil.run(prog, args, env=env)
    assert plain.rc == 0
    assert pre.rc == plain.rc
    assert pre.stdout == plain.stdout
    assert plain.stderr == b""
    _only_our_lines(pre)
    assert pre.traces, "the profiled run saved no trace"


def test_return_codes_and_errno_pass_through():
    """A failing launch returns the runtime's error and sets its last error,
    and errno is what the runtime left, with the library as without it."""
    pre = tputil.run("train_loop", ["--steps=1", "--bad-launch"])
    first = pre.stdout.decode().splitlines()[0]
    assert first == ("bad launch: cudaErrorInvalidDeviceFunction peek "
                     "cudaErrorInvalidDeviceFunction last cudaErrorInvalidDeviceFunction "
                     "after cudaSuccess errno 1234")


# ---- inert without CUDA ------------------------------------------------------

@pytest.mark.parametrize("prog", ["no_cuda", "/bin/true"])
def test_inert_without_cuda(prog):
    plain = tputil.run(prog, preload=False)
    pre = tputil.run(prog)
    assert pre.rc == plain.rc == 0
    assert pre.stdout == plain.stdout   # for no_cuda: also the thread count
    assert pre.stderr == b""
    assert os.listdir(pre.cwd) == []


def test_inert_even_when_misconfigured():
    """Configuration errors are reported at activation, never by a process
    that does not use CUDA."""
    pre = tputil.run("no_cuda", env={"TRAINPROF_SCHEDULE": "wait=-1", "TRAINPROF_STRICT": "1"})
    assert pre.rc == 0
    assert pre.stderr == b""
    assert os.listdir(pre.cwd) == []


# ---- configuration errors ----------------------------------------------------

BAD_VALUES = [
    ("TRAINPROF_SCHEDULE", "wait=-1"),
    ("TRAINPROF_SCHEDULE", "active=0"),
    ("TRAINPROF_SCHEDULE", "warmup=x"),
    ("TRAINPROF_SCHEDULE", "bogus=1"),
    ("TRAINPROF_STEP_ON", "sometimes"),
    ("TRAINPROF_STEP_ON", "launch:*adam*/0"),
    ("TRAINPROF_GZIP", "maybe"),
    ("TRAINPROF_BUFFER_MB", "0"),
    ("TRAINPROF_FILENAME", "rank{nope}.json"),
    ("TRAINPROF_LOG", "loud"),
]


@pytest.mark.parametrize("var,value", BAD_VALUES, ids=["%s=%s" % v for v in BAD_VALUES])
def test_bad_value_is_one_error_line(var, value):
    plain = tputil.run("train_loop", ["--steps=6"], preload=False)
    pre = tputil.run("train_loop", ["--steps=6"], env={var: value})
    assert pre.rc == 0
    assert pre.stdout == plain.stdout
    lines = _stderr_lines(pre)
    assert len(lines) == 1, lines
    assert lines[0].startswith("trainprof: error: "), lines
    assert var in lines[0] and value in lines[0], lines
    assert pre.traces == []


# A value that would split the line, forge a line of ours, colour the
# terminal and put a byte that is not UTF-8 into the log, were it echoed raw.
FORGE = "\x1b[31m\ntrainprof: forged\xff"
FORGED_VALUES = [
    ("TRAINPROF_ACTIVITIES", "cpu,%s"),
    ("TRAINPROF_SYS", "cpu,%s"),
    ("TRAINPROF_STEP_ON", "api,%s"),
    ("TRAINPROF_SCHEDULE", "%s=1"),
    ("TRAINPROF_HANDLERS", "chrome,%s"),
    ("TRAINPROF_RANKS", "0,%s"),
    ("TRAINPROF_FILENAME", "rank{%s}.json"),
    ("TRAINPROF_FOLDER", "{run_name}/%s}"),
    ("TRAINPROF_METADATA", '{"a": 1%s}'),          # jansson's "near '...'" holds the ESC
    ("TRAINPROF_METADATA", '{"a": "%s"}'),
    ("TRAINPROF_NOT_A_VARIABLE%s", "1"),           # the unknown-name warning
]


@pytest.mark.parametrize("var,value", FORGED_VALUES, ids=[v[0] for v in FORGED_VALUES])
def test_echoed_value_is_escaped(var, value):
    """Every echoed value is escaped, so the error stays one line
    of ours with no raw control or non-UTF-8 byte."""
    raw = lambda s: s.replace("%s", FORGE).encode("latin-1").decode("utf-8", "surrogateescape")
    plain = tputil.run("train_loop", ["--steps=6"], preload=False)
    pre = tputil.run("train_loop", ["--steps=6"],       # warn: no "saved" line
                     env={raw(var): raw(value), "TRAINPROF_LOG": "warn"})
    assert pre.rc == 0
    assert pre.stdout == plain.stdout
    err = pre.stderr
    for b in (b"\x1b", b"\xff", b"\r", b"\x7f"):
        assert b not in err, err
    lines = err.decode("utf-8").splitlines()     # valid UTF-8 throughout
    assert len(lines) == 1, lines
    assert lines[0].startswith("trainprof: error: " if "%s" in value else "trainprof: warning: ")
    assert "forged" in lines[0] and "[31m" in lines[0], lines     # visible, escaped


def test_strict_exits_2():
    pre = tputil.run("train_loop", ["--steps=6"],
                     env={"TRAINPROF_SCHEDULE": "wait=-1", "TRAINPROF_STRICT": "1"})
    assert pre.rc == 2
    lines = _stderr_lines(pre)
    assert len(lines) >= 1 and lines[0].startswith("trainprof: error: ")
    assert "TRAINPROF_SCHEDULE" in lines[0] and "wait=-1" in lines[0]
    assert pre.traces == []


def test_strict_quiet_still_says_why():
    """TRAINPROF_LOG=quiet silences messages, but never the error that makes
    TRAINPROF_STRICT=1 end the program."""
    pre = tputil.run("train_loop", ["--steps=6"],
                     env={"TRAINPROF_SCHEDULE": "wait=-1", "TRAINPROF_STRICT": "1",
                          "TRAINPROF_LOG": "quiet"})
    assert pre.rc == 2
    lines = _stderr_lines(pre)
    assert len(lines) == 1, lines
    assert lines[0].startswith("trainprof: error: TRAINPROF_SCHEDULE=") and "wait=-1" in lines[0]
    quiet = tputil.run("train_loop", ["--steps=6"],
                       env={"TRAINPROF_SCHEDULE": "wait=-1", "TRAINPROF_LOG": "quiet"})
    assert quiet.rc == 0 and quiet.stderr == b""


def test_disabled_is_silent():
    plain = tputil.run("train_loop", ["--steps=6"], preload=False)
    pre = tputil.run("train_loop", ["--steps=6"], env={"TRAINPROF_ENABLED": "0"})
    assert pre.rc == 0
    assert pre.stdout == plain.stdout
    assert pre.stderr == b""
    assert os.listdir(pre.cwd) == []


def test_unknown_variable_warns_with_closest_name():
    pre = tputil.run("train_loop", ["--steps=6"], env={"TRAINPROF_SCHEDUEL": "all"})
    assert pre.rc == 0
    warn = [l for l in _stderr_lines(pre) if l.startswith("trainprof: warning: ")]
    assert len(warn) == 1, _stderr_lines(pre)
    assert "TRAINPROF_SCHEDUEL" in warn[0] and "TRAINPROF_SCHEDULE" in warn[0]
    _only_our_lines(pre)
    # the misspelt variable is not applied: the default schedule saves at 5
    assert [tputil.trace_batch(p) for p in pre.traces] == [5]


# ---- SIGTERM / SIGINT mid-window ---------------------------------------------

def test_program_raising_sigint_at_its_default_saves_the_window():
    """A C program that resets SIGINT to its default and raises it (as
    CPython does on an uncaught KeyboardInterrupt) dies of it without C's
    exit handlers: the window is saved first, partial, "SIGINT"."""
    r = tputil.run("train_loop", ["--steps=10", "--raise-at=2"],
                   env={"TRAINPROF_SCHEDULE": "warmup=1,active=5"})
    assert r.rc == -signal.SIGINT, r.stderr
    assert len(r.traces) == 1, r.stderr
    t = tputil.load_trace(r.traces[0])["trainprof"]
    assert t["partial"] is True and t["partial_reason"] == "SIGINT", t


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_window_saves_partial_trace(sig):
    cwd = tputil.new_dir()
    env = tputil.base_env({"TRAINPROF_SCHEDULE": "warmup=1,active=1000"})
    # SIGINT as a terminal delivers it: a test run in the background (make
    # under nohup or a CI runner's shell) hands its children SIGINT ignored,
    # which the library rightly leaves alone
    p = subprocess.Popen([tputil.program("train_loop"), "--steps=100000", "--sleep-us=2000",
                          "--notify=5", "--launches=3"],
                         cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = b""
    deadline = time.monotonic() + 30
    try:
        while b"train_loop: step 5 done" not in err:
            assert time.monotonic() < deadline, err
            line = p.stderr.readline()
            assert line, "program ended early: %r" % err
            err += line
        p.send_signal(sig)
        out, rest = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err += rest
    assert p.returncode == -sig, (p.returncode, err)
    traces = tputil.find_traces(cwd)
    assert len(traces) == 1, (traces, err)
    trace = tputil.load_trace(traces[0])
    assert trace["trainprof"]["partial"] is True
    assert trace["trainprof"]["partial_reason"] == sig.name
    got = tputil.steps(trace)
    assert got[:5] == [1, 2, 3, 4, 5], got          # step 0 warms up
    assert got == list(range(1, got[-1] + 1)), got
    completed = len(out.decode().splitlines())      # one stdout line per finished iteration
    assert tputil.trace_batch(traces[0]) in (completed, completed - 1, completed + 1)
    per = tputil.launches_per_step(trace)
    for s in got[:-1]:
        assert per[s] == 4, per
    assert per[got[-1]] <= 4
    # Launches of the iteration cut by the signal may be recorded without a
    # ProfilerStep of their own: they must come after the last step.
    steps_ev = [ev for ev in tputil.events(trace, ph="X") if tputil.STEP_RE.match(ev["name"])]
    last_end = max(ev["ts"] + ev["dur"] for ev in steps_ev)
    loose = len(tputil.launches(trace)) - sum(per.values())
    assert 0 <= loose <= 4, loose
    assert sum(1 for la in tputil.launches(trace) if la["ts"] >= last_end) >= loose


# ---- threads -----------------------------------------------------------------

def test_threads_lose_nothing():
    n, k = 16, 2000
    r = tputil.run("threads", [n, k], env={"TRAINPROF_SCHEDULE": "all"}, timeout=120)
    assert r.rc == 0, r.stderr
    m = re.search(rb"total launches (\d+)", r.stdout)
    total = int(m.group(1))
    assert total == n * k
    assert len(r.traces) == 1
    trace = tputil.load_trace(r.traces[0])
    assert trace["trainprof"]["dropped_events"] == 0
    launches = tputil.launches(trace)
    assert len(launches) == total
    by_kernel = {}
    for la in launches:
        by_kernel.setdefault(la["args"]["kernel"], set()).add(la["tid"])
    assert sorted(by_kernel) == ["worker_kernel_%02d(float*, int)" % t for t in range(n)]
    for kern, tids in by_kernel.items():
        assert len(tids) == 1, (kern, tids)          # each kernel from its own thread
    counts = {}
    for la in launches:
        counts[la["args"]["kernel"]] = counts.get(la["args"]["kernel"], 0) + 1
    assert set(counts.values()) == {k}
    assert len({t for tids in by_kernel.values() for t in tids}) == n
    corr = [la["args"]["correlation"] for la in launches]
    assert len(set(corr)) == len(corr)


# ---- fork ----------------------------------------------------------------------

def test_forked_child_goes_passive():
    r = tputil.run("fork_child", [2, 2], env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    out = r.stdout.decode()
    parent = int(re.search(r"parent (\d+) child exit 0", out).group(1))
    child = int(re.search(r"child (\d+)", out).group(1))
    assert len(r.traces) == 1, r.traces
    trace = tputil.load_trace(r.traces[0])
    pids = {ev["pid"] for ev in trace["traceEvents"] if ev.get("ph") != "M"}
    assert child not in pids
    launches = tputil.launches(trace)
    assert all(la["pid"] == parent for la in launches)
    assert {la["args"]["kernel"] for la in launches} == {"parent_kernel()"}
    assert len(launches) == 3 * (2 + 2)
    # the child printed nothing of ours either
    _only_our_lines(r)


# ---- hostile names ---------------------------------------------------------------

def _walk_strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_strings(v)


def test_hostile_names_give_valid_json():
    steps = 3
    r = tputil.run("hostile_names", [steps], env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    names = []
    for line in r.stdout.decode().splitlines():
        m = re.match(r"kernel (\d+) ([0-9a-f]+)$", line)
        if m:
            names.append(bytes.fromhex(m.group(2)))
    assert len(names) >= 10
    assert len(r.traces) == 1
    raw = tputil.read_raw(r.traces[0])            # strict UTF-8 decode
    trace = __import__("json").loads(raw)         # strict: no raw control characters
    for s in _walk_strings(trace):
        s.encode("utf-8")                         # no lone surrogates from \\u escapes
    launches = tputil.launches(trace)
    assert len(launches) == steps * len(names)
    kernels = [la["args"]["kernel"] for la in launches]
    for raw_name in names:
        try:
            text = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and not text.startswith("_Z") and len(text) < 1000:
            # valid UTF-8: control characters are escaped, so the name
            # comes back exactly
            assert kernels.count(text) == steps, (text, set(kernels))
        elif text is not None and len(text) >= 1000:
            long_hits = [k for k in kernels if len(k) >= 256 and text.startswith(k)]
            assert len(long_hits) == steps, "5000-character name lost"
        elif text is None:
            prefix = raw_name.split(b"\xff")[0].split(b"\x80")[0].split(b"\xe2")[0].decode()
            assert sum(1 for k in kernels if k.startswith(prefix)) >= steps, prefix
    ranges = [ev["name"] for ev in tputil.events(trace, ph="X", cat="user_annotation")]
    for msg in ("range \"quoted\" \\ back", "range\x01\x02\x1b[31m", "range\U0001F600"):
        assert ranges.count(msg) == steps, (msg, ranges)
    assert sum(1 for n in ranges if n.startswith("range") and n not in (
        "range \"quoted\" \\ back", "range\x01\x02\x1b[31m", "range\U0001F600")) == steps


# ---- exit: our initialisers run once ---------------------------------------------

def test_initialisers_run_once_through_exit():
    """gemm_calls makes no launch, so the exit flush used to run from our
    destructor, after _dl_fini had marked us uninitialised; tp-flush, still
    loading CUPTI, then took our own handle with dlopen(RTLD_NOLOAD), which
    ran our constructors again (an ODR report under ASan).  The loader's own
    log counts the calls of our initialisers."""
    name = os.path.basename(tputil.lib_path())
    for _ in range(3):
        cwd = tputil.new_dir()
        log = os.path.join(cwd, "ld")
        r = tputil.run("gemm_calls", cwd=cwd,
                       env={"GEMM_STEPS": "1", "TRAINPROF_SCHEDULE": "warmup=1,active=1",
                            "LD_DEBUG": "files", "LD_DEBUG_OUTPUT": log})
        assert r.rc == 0, r.stderr
        inits = []
        for f in os.listdir(cwd):
            if f.startswith("ld."):
                with open(os.path.join(cwd, f), errors="replace") as fh:
                    inits += [l for l in fh if "calling init:" in l and l.rstrip().endswith("/" + name)]
        assert len(inits) == 1, inits
        assert len(r.traces) == 1
