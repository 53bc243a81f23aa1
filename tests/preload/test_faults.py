"""Faults the library must survive, and what it must
not do to the files around it: links planted at the names it writes are
never followed, a save cut by SIGKILL leaves no half file under a final name
and its temporary file is removed by the next run, the output folder missing
or unwritable or full, a file already present (TRAINPROF_OVERWRITE=0 and 1),
children made by fork/exec, vfork and posix_spawn, 256 threads, a small
buffer, another interposer in LD_PRELOAD, and the partial window at exit.
test_robustness.py has the rest (signals, threads losing nothing, fork
without exec, hostile names)."""

import gzip
import json
import os
import re
import signal
import subprocess
import time

import pytest

import tputil


def _lines(r):
    return r.stderr.decode("utf-8", errors="replace").splitlines()






def _parses(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    if path.endswith((".json", ".json.gz")):
        json.loads(data)
    return True


# ---- the partial window at exit ----------------------------------------------

def test_exit_right_after_a_save_writes_no_second_trace():
    """warmup=0: a window opens again at once after each save; exit before
    the next step ends must not save an empty window under the previous
    {batch} (it did: "exists; saved as rank0.4-1", 0 steps)."""
    env = {"TRAINPROF_SCHEDULE": "warmup=0,active=2,repeat=0"}
    r = tputil.run("train_loop", ["--steps=4"], env=env)
    assert r.rc == 0, r.stderr
    assert [tputil.trace_batch(p) for p in r.traces] == [2, 4], (r.traces, r.stderr)
    assert b"exists" not in r.stderr, r.stderr
    for p in r.traces:
        assert tputil.steps(tputil.load_trace(p)), p


def test_real_partial_window_at_exit_has_its_own_batch():
    env = {"TRAINPROF_SCHEDULE": "warmup=0,active=2,repeat=0"}
    r = tputil.run("train_loop", ["--steps=5"], env=env)
    assert r.rc == 0, r.stderr
    assert [tputil.trace_batch(p) for p in r.traces] == [2, 4, 5], r.traces
    last = tputil.load_trace(r.traces[-1])
    assert last["trainprof"]["partial"] is True
    assert tputil.steps(last) == [4]
    assert b"exists" not in r.stderr, r.stderr


# ---- planted links -------------------------------------------------------------

def test_planted_links_are_not_followed():
    """Links at every temporary name the run will try (its pid is known in
    preexec_fn, which runs in the child before exec), and at the old fixed
    names, point at a victim file: it stays as it was, and the trace and
    summary are saved under their final names."""
    cwd = tputil.new_dir()
    victim = os.path.join(cwd, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    finals = [os.path.join(cwd, "test", "traces", "rank0.00000003.pt.trace.json.gz"),
              os.path.join(cwd, "test", "reports", "rank0.00000003.pt.trace.summary.txt")]
    for p in finals:
        os.makedirs(os.path.dirname(p), exist_ok=True)

    def plant():
        pid = os.getpid()
        for p in finals:
            names = [p + ".tmp", "%s.%d.tmp" % (p, pid), "%s.%s.%d.tmp" % (p, tputil.tmp_host(), pid)]
            names += ["%s.%s.%d-%d.tmp" % (p, tputil.tmp_host(), pid, k) for k in range(1, 4)]
            for n in names:
                os.symlink(victim, n)

    env = tputil.base_env({"TRAINPROF_SCHEDULE": "all"})
    p = subprocess.run([tputil.program("train_loop"), "--steps=3"], cwd=cwd, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       preexec_fn=plant, timeout=60)
    assert p.returncode == 0, p.stderr
    with open(victim) as f:
        assert f.read() == "precious"
    for f in finals:
        assert os.path.isfile(f) and not os.path.islink(f), tputil.files_under(cwd)
        assert _parses(f)
    assert b"error" not in p.stderr, p.stderr


# ---- SIGKILL during a save -------------------------------------------------------

def _kill_during_save(cwd):
    """Start a run with one big window saved at exit, SIGKILL it while its
    trace's temporary file exists; returns the folder listing then, or None
    if the save finished first."""
    traces = os.path.join(cwd, "test", "traces")
    env = tputil.base_env({"TRAINPROF_SCHEDULE": "all"})
    p = subprocess.Popen([tputil.program("train_loop"), "--steps=6000", "--launches=40"],
                         cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while p.poll() is None:
            if os.path.isdir(traces) and any(f.endswith(".tmp") for f in os.listdir(traces)):
                p.send_signal(signal.SIGKILL)
                p.wait()
                return p.pid, sorted(os.listdir(traces))
            time.sleep(0.001)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.pid, None


def test_sigkill_during_save_then_next_run_cleans_up():
    for _ in range(5):
        cwd = tputil.new_dir()
        pid, listing = _kill_during_save(cwd)
        if listing is not None:
            break
    assert listing is not None, "the save always finished before the kill"
    traces = os.path.join(cwd, "test", "traces")
    left = ["%s.%s.%d.tmp" % ("rank0.00006000.pt.trace.json.gz", tputil.tmp_host(), pid)]
    assert [f for f in listing if f.endswith(".tmp")] == left, listing
    # nothing under a final name that does not parse
    for f in listing:
        if not f.endswith(".tmp"):
            assert _parses(os.path.join(traces, f)), f
    # the next run in that folder removes the dead writer's file, and only it
    r = tputil.run("train_loop", ["--steps=3"], env={"TRAINPROF_SCHEDULE": "all"}, cwd=cwd)
    assert r.rc == 0, r.stderr
    after = sorted(os.listdir(traces))
    assert not [f for f in after if f.endswith(".tmp")], after
    assert [os.path.basename(p) for p in r.traces] == ["rank0.00000003.pt.trace.json.gz"], after
    assert _parses(r.traces[0])


# ---- the output folder: missing, unwritable, full; a file already there ------------

FS_ARGS = ["--steps=400", "--launches=8"]       # a trace of some 100 KiB, gzipped
FS_ENV = {"TRAINPROF_SCHEDULE": "all", "TRAINPROF_LOG": "warn"}
FS_TRACE = "rank0.00000400.pt.trace.json.gz"


def _plain():
    return tputil.run("train_loop", FS_ARGS, preload=False)


def _check_fault(plain, rc, out, err, cwd, line_re):
    """Same status and stdout as without the library, exactly one stderr line
    (matching line_re), no temporary file left, every file of ours parses."""
    assert rc == plain.rc == 0, err
    assert out == plain.stdout
    lines = err.decode("utf-8", errors="replace").splitlines()
    assert len(lines) == 1, lines
    assert re.match(line_re, lines[0]), lines[0]
    files = tputil.files_under(cwd)
    assert not [f for f in files if ".tmp" in f], files
    for f in files:
        if f.startswith("test/") and not f.endswith(" -> link"):
            assert _parses(os.path.join(cwd, f)), f
    return files


def test_path_component_is_a_file():
    plain = _plain()
    cwd = tputil.new_dir()
    with open(os.path.join(cwd, "test"), "w") as f:
        f.write("keep")
    r = tputil.run("train_loop", FS_ARGS, env=FS_ENV, cwd=cwd)
    files = _check_fault(plain, r.rc, r.stdout, r.stderr, cwd,
                         r"^trainprof: error: cannot create folder %s/test/traces: Not a directory$"
                         % re.escape(cwd))
    assert files == ["test"]
    with open(os.path.join(cwd, "test")) as f:
        assert f.read() == "keep"


def test_unwritable_folder():
    """The trace folder exists but cannot be written: as root, the program runs
    as nobody (root writes anywhere), else the folder is made read-only."""
    plain = _plain()
    cwd = tputil.new_dir()
    traces = os.path.join(cwd, "test", "traces")
    os.makedirs(traces)
    os.chmod(traces, 0o555)
    preexec = None
    if os.geteuid() == 0:
        for d in (os.path.dirname(cwd), cwd, os.path.join(cwd, "test")):
            os.chmod(d, 0o755)

        def preexec():
            os.setgid(65534)
            os.setuid(65534)
    env = tputil.base_env(FS_ENV)
    p = subprocess.run([tputil.program("train_loop")] + FS_ARGS, cwd=cwd, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       preexec_fn=preexec, timeout=60)
    files = _check_fault(plain, p.returncode, p.stdout, p.stderr, cwd,
                         r"^trainprof: error: cannot write %s/%s: Permission denied$"
                         % (re.escape(traces), re.escape(FS_TRACE)))
    assert files == []


def _fsize_limit():
    import resource
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))


def _tmpfs_usable():
    try:
        return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                               "mount -t tmpfs -o size=16k tmpfs /mnt"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize("how", ["tmpfs", "fsize"])
def test_disk_full_mid_write(how):
    """tmpfs: the trace folder is a 16 KiB tmpfs (mounted in a user and mount
    namespace of the run's own), so the write fails with ENOSPC part way.
    fsize: RLIMIT_FSIZE of 16 KiB with SIGXFSZ ignored, as the program's
    parent set it (EFBIG; the library must leave the disposition alone, or
    the program would die of SIGXFSZ)."""
    plain = _plain()
    cwd = tputil.new_dir()
    traces = os.path.join(cwd, "test", "traces")
    os.makedirs(traces)
    env = tputil.base_env(FS_ENV)
    argv = [tputil.program("train_loop")] + FS_ARGS
    preexec = None
    if how == "tmpfs":
        if not _tmpfs_usable():
            pytest.skip("no user+mount namespace here to mount a tmpfs (the fsize case runs)")
        argv = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                'mount -t tmpfs -o size=16k tmpfs "$0" && exec "$@"', traces] + argv
        error = "No space left on device"
    else:
        preexec = _fsize_limit
        error = "File too large"
    p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec,
                       timeout=60)
    files = _check_fault(plain, p.returncode, p.stdout, p.stderr, cwd,
                         r"^trainprof: error: cannot write %s/%s: %s$"
                         % (re.escape(traces), re.escape(FS_TRACE), error))
    assert files == []


@pytest.mark.parametrize("overwrite", [0, 1])
def test_file_already_present(overwrite):
    plain = _plain()
    cwd = tputil.new_dir()
    traces = os.path.join(cwd, "test", "traces")
    os.makedirs(traces)
    old = os.path.join(traces, FS_TRACE)
    with open(old, "wb") as f:
        f.write(gzip.compress(b'{"old": true}'))
    env = dict(FS_ENV, TRAINPROF_OVERWRITE=overwrite)
    r = tputil.run("train_loop", FS_ARGS, env=env, cwd=cwd)
    if overwrite:
        assert r.rc == 0 and r.stdout == plain.stdout
        assert r.stderr == b"", r.stderr
        assert [os.path.basename(p) for p in r.traces] == [FS_TRACE]
        assert tputil.steps(tputil.load_trace(old)) == list(range(400))
        return
    new = FS_TRACE.replace(".pt.trace", "-1.pt.trace")
    _check_fault(plain, r.rc, r.stdout, r.stderr, cwd,
                 r"^trainprof: warning: %s/%s exists; saved as %s/%s "
                 r"\(TRAINPROF_OVERWRITE=0\)$" % (re.escape(traces), re.escape(FS_TRACE),
                                                   re.escape(traces), re.escape(new)))
    assert tputil.load_trace(old) == {"old": True}
    assert sorted(os.path.basename(p) for p in r.traces) == sorted([FS_TRACE, new])
    assert tputil.steps(tputil.load_trace(os.path.join(traces, new))) == list(range(400))


# ---- children: fork+exec, vfork, posix_spawn -------------------------------------

@pytest.mark.parametrize("how", ["exec", "vfork", "spawn"])
def test_children_that_exec_write_nothing(how):
    """The child runs no_cuda (LD_PRELOAD inherited): no output of ours, no
    file of its own; the parent's trace holds all its launches.  fork without
    exec is test_robustness.test_forked_child_goes_passive."""
    r = tputil.run("fork_child", [2, 2, how, tputil.program("no_cuda")],
                   env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    out = r.stdout.decode()
    parent = int(re.search(r"parent (\d+) child exit 0", out).group(1))
    assert "without CUDA, threads 1\n" in out, out      # the child ran, one thread
    lines = tputil.not_startup(_lines(r))
    for line in lines:
        assert line.startswith("trainprof: rank 0: saved"), line
    assert len(lines) == 1, r.stderr
    assert len(_lines(r)) <= 2, r.stderr        # the parent's start-up line, none of the child's
    assert [os.path.basename(p) for p in r.traces] == ["rank0.00000004.pt.trace.json.gz"]
    assert tputil.files_under(r.cwd) == ["test/reports/rank0.00000004.pt.trace.summary.json",
                               "test/reports/rank0.00000004.pt.trace.summary.txt",
                               "test/traces/rank0.00000004.pt.trace.json.gz"]
    trace = tputil.load_trace(r.traces[0])
    assert {ev["pid"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime")} == {parent}
    la = tputil.launches(trace)
    assert len(la) == 3 * 4 and {x["args"]["kernel"] for x in la} == {"parent_kernel()"}


# ---- another interposer of the same symbols ----------------------------------------

@pytest.mark.parametrize("order", ["spy-first", "spy-last"])
def test_another_interposer_before_or_after_us(order):
    spy = os.path.join(tputil.build_dir(), "fakes", "libdlsym_spy.so")
    ours = tputil.preload_value().split()
    # under make check-sanitize the ASan runtime stays first of all
    asan = ours[:1] if os.environ.get("TP_TEST_ASAN") else []
    ours = ours[len(asan):]
    preload = " ".join(asan + ([spy] + ours if order == "spy-first" else ours + [spy]))
    r = tputil.run("train_loop", ["--steps=5", "--launches=3"],
                   env={"LD_PRELOAD": preload, "DLSYM_SPY_REPORT": "1",
                        "TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    m = re.search(rb"dlsym_spy: cudaDeviceSynchronize calls=(\d+) cudaLaunchKernel calls=(\d+)",
                  r.stderr)
    assert m, r.stderr
    assert int(m.group(2)) == 5 * 3
    trace = tputil.load_trace(r.traces[0])
    names = [ev["name"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime")]
    assert names.count("cudaLaunchKernel") == 5 * 3
    assert names.count("cudaDeviceSynchronize") == int(m.group(1))


# ---- many threads, a small buffer ------------------------------------------------------

def test_256_threads_launching_allocating_and_exiting_mid_window():
    """256 threads launch and allocate while the main thread's steps close
    windows (warmup=1, active=3, repeat=0) and the threads exit, some within
    a window: the same stdout as without us, nothing lost unless counted."""
    args = [256, 200, "alloc"]
    plain = tputil.run("threads", args, preload=False, timeout=120)
    # host side only: the step that opens recording waits (bounded) for
    # tp-flush to start CUPTI, while these threads would finish meanwhile
    r = tputil.run("threads", args, env={"TRAINPROF_SCHEDULE": "warmup=1,active=3,repeat=0",
                                         "TRAINPROF_ACTIVITIES": "cpu"}, timeout=120)
    assert r.rc == plain.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    assert r.traces, r.stderr
    # windows after the threads are done hold the main thread's calls only:
    # the threads' work is checked over all windows
    tids, mallocs = set(), 0
    for p in r.traces:
        t = tputil.load_trace(p)
        tids |= {x["tid"] for x in tputil.launches(t)}
        mallocs += len(tputil.events(t, ph="X", cat="cuda_runtime", name="cudaMalloc"))
        assert t["trainprof"]["dropped_events"] == 0
    assert len(tids) > 1 and mallocs > 0, (tids, mallocs)


def _maxrss_kib(args, env):
    e = tputil.base_env(env)
    cwd = tputil.new_dir()
    p = subprocess.Popen([tputil.program("train_loop")] + args, cwd=cwd, env=e,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, err
    return ru.ru_maxrss, tputil.find_traces(cwd), cwd


HEAVY = ["--steps=16000", "--launches=50"]      # some 850,000 records


def _bounded(env):
    light, _, _ = _maxrss_kib(["--steps=10"], env)
    heavy, traces, cwd = _maxrss_kib(HEAVY, env)
    return light, heavy, traces, cwd


def test_small_buffer_bounds_host_memory_and_counts_drops():
    env = {"TRAINPROF_SCHEDULE": "all", "TRAINPROF_BUFFER_MB": 1, "TRAINPROF_ACTIVITIES": "cpu"}
    light, heavy, traces, cwd = _bounded(env)
    assert heavy - light < 16 * 1024, (light, heavy)
    trace = tputil.load_trace(traces[0])
    dropped = trace["trainprof"]["dropped_events"]
    assert dropped > 0
    summary = os.path.join(cwd, "test", "reports",
                           os.path.basename(traces[0]).replace(".json.gz", ".summary.txt"))
    with open(summary) as f:
        m = re.search(r"^Events: \d+ records, (\d+) dropped", f.read(), re.M)
    assert m and int(m.group(1)) == dropped


def test_small_buffer_bounds_memory_with_the_device_side():
    """CUPTI's buffers (their count) and the decoded records waiting for a
    window follow TRAINPROF_BUFFER_MB too: they grew 180 bytes per launch
    (14 MB -> 157 MB for 800,000 launches) before.  What is over is counted."""
    env = {"TRAINPROF_SCHEDULE": "all", "TRAINPROF_BUFFER_MB": 1}
    light, heavy, traces, _ = _bounded(env)
    assert heavy - light < 16 * 1024, (light, heavy)
    meta = tputil.load_trace(traces[0])["trainprof"]
    assert meta["gpu_activity"].startswith("active"), meta["gpu_activity"]
    assert meta["coverage"]["device_records_dropped"] > 0


# ---- same run name and rank, two processes ---------------------------------------------

def test_same_rank_saving_at_once_two_files():
    cwd = tputil.new_dir()
    env = tputil.base_env({"TRAINPROF_SCHEDULE": "all", "TRAINPROF_LOG": "warn"})
    procs = [subprocess.Popen([tputil.program("train_loop"), "--steps=300", "--launches=8"],
                              cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    errs = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errs
    traces = tputil.find_traces(cwd)
    assert len(traces) == 4, (traces, errs)
    pids = set()
    for t in traces:
        tr = tputil.load_trace(t)
        assert tputil.steps(tr) == list(range(300))
        pids |= {ev["pid"] for ev in tputil.launches(tr)}
    assert pids == {p.pid for p in procs}
    assert not [f for f in tputil.files_under(cwd) if ".tmp" in f]
