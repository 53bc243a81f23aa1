"""The exec handler (SPEC 8): TRAINPROF_EXEC runs once per saved trace with
{path} and the SPEC 7 variables, with TRAINPROF_ENABLED=0, its stdout on
stderr; a failure is a warning that changes neither rc nor stdout;
TRAINPROF_KEEP waits for the command before deleting its trace; the host's
own children keep their exit statuses."""

import os

import tputil

SCHED = "warmup=0,active=1,repeat=3"     # three one-step windows


def _run(exec_cmd, extra=None, prog="train_loop", args=("--steps=5",)):
    env = {"TRAINPROF_SCHEDULE": SCHED, "TRAINPROF_EXEC": exec_cmd}
    env.update(extra or {})
    return tputil.run(prog, list(args), env=env)


def _lines(r, name):
    with open(os.path.join(r.cwd, name)) as f:
        return f.read().splitlines()


def test_each_trace_once_with_vars_and_disabled():
    r = _run("echo got {path} {rank} $TRAINPROF_ENABLED >> out; echo hello")
    plain = tputil.run("train_loop", ["--steps=5"], preload=False)
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert r.stdout == plain.stdout          # nothing of the child's on stdout
    assert len(r.traces) == 3
    got = sorted(_lines(r, "out"))
    want = sorted("got %s 0 0" % os.path.relpath(t, r.cwd) for t in r.traces)
    assert got == want
    assert r.stderr.decode().splitlines().count("hello") == 3


def test_failure_is_a_warning():
    r = _run("exit 3", {"TRAINPROF_SCHEDULE": "warmup=1,active=1"})
    plain = tputil.run("train_loop", ["--steps=5"], preload=False)
    assert r.rc == 0
    assert r.stdout == plain.stdout
    assert len(r.traces) == 1
    warns = [l for l in r.stderr.decode().splitlines() if "TRAINPROF_EXEC" in l]
    assert len(warns) == 1, warns
    assert warns[0].startswith("trainprof: warning: ") and "status 3" in warns[0]


def test_keep_waits_for_the_command():
    r = _run("sleep 0.3; cat {path} > /dev/null && echo ok >> out", {"TRAINPROF_KEEP": "1"})
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert _lines(r, "out") == ["ok"] * 3
    assert len(r.traces) == 1


def test_host_children_keep_their_status():
    r = _run("sleep 0.1", {"TRAINPROF_SCHEDULE": "warmup=0,active=1,repeat=0"},
             prog="fork_child", args=("2", "2"))
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert b"child exit 0" in r.stdout
