"""Faults the library must survive (issue 14, section 4), and what it must
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
import socket
import subprocess
import time

import pytest

import tputil


def _lines(r):
    return r.stderr.decode("utf-8", errors="replace").splitlines()


def _tmp_host():
    """This host's name as the library writes it into temporary names."""
    h = socket.gethostname()[:32]
    return re.sub(r"[^A-Za-z0-9_-]", "_", h) or "_"


def _listing(root):
    """Every file under root, relative, with the links marked."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out.append(os.path.relpath(p, root) + (" -> link" if os.path.islink(p) else ""))
    return sorted(out)


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
    finals = [os.path.join(cwd, "test", "traces", "rank0.3.pt.trace.json.gz"),
              os.path.join(cwd, "test", "reports", "rank0.3.pt.trace.summary.txt")]
    for p in finals:
        os.makedirs(os.path.dirname(p), exist_ok=True)

    def plant():
        pid = os.getpid()
        for p in finals:
            names = [p + ".tmp", "%s.%d.tmp" % (p, pid), "%s.%s.%d.tmp" % (p, _tmp_host(), pid)]
            names += ["%s.%s.%d-%d.tmp" % (p, _tmp_host(), pid, k) for k in range(1, 4)]
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
        assert os.path.isfile(f) and not os.path.islink(f), _listing(cwd)
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
    left = ["%s.%s.%d.tmp" % ("rank0.6000.pt.trace.json.gz", _tmp_host(), pid)]
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
    assert [os.path.basename(p) for p in r.traces] == ["rank0.3.pt.trace.json.gz"], after
    assert _parses(r.traces[0])
