"""The exec handler: TRAINPROF_EXEC runs once per saved file (each
trace, then its reports) with {path} and the format-string variables, with
TRAINPROF_ENABLED=0, its output in {reports}/rank{rank}.exec.log (not on the
job's stderr: test_outputs_folder.py); a failure is a warning that
changes neither rc nor stdout; TRAINPROF_KEEP waits for the commands before
deleting a trace and its reports; the host's own children keep their exit
statuses."""

import os

import tputil

SCHED = "warmup=0,active=1,repeat=3"     # three one-step windows


def _summaries_of(trace, cwd):
    """The summary handler's two reports of a trace (.summary.txt, .summary.json)."""
    base = os.path.basename(trace)[:-len(".json.gz")]
    return [os.path.join(os.path.dirname(os.path.dirname(trace)), "reports", base + ext)
            for ext in (".summary.txt", ".summary.json")]


def _run(exec_cmd, extra=None, prog="train_loop", args=("--steps=5",)):
    env = {"TRAINPROF_SCHEDULE": SCHED, "TRAINPROF_EXEC": exec_cmd}
    env.update(extra or {})
    return tputil.run(prog, list(args), env=env)


def _lines(r, name):
    with open(os.path.join(r.cwd, name)) as f:
        return f.read().splitlines()


def test_each_saved_file_once_with_vars_and_disabled():
    r = _run("echo got {path} {rank} $TRAINPROF_ENABLED >> out; echo hello")
    plain = tputil.run("train_loop", ["--steps=5"], preload=False)
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert r.stdout == plain.stdout          # nothing of the child's on stdout
    assert len(r.traces) == 3
    got = sorted(_lines(r, "out"))
    files = list(r.traces) + [f for t in r.traces for f in _summaries_of(t, r.cwd)]
    for f in files:
        assert os.path.exists(f), f
    want = sorted("got %s 0 0" % f for f in files)      # absolute paths
    assert got == want
    assert "hello" not in r.stderr.decode().splitlines()
    assert _lines(r, "test/reports/rank0.exec.log").count("hello") == 9


def test_reports_of_every_handler():
    # TRAINPROF_ACTIVITIES=cpu: whether the fake CUPTI is enabled before the
    # recorded steps end is a race on these fast steps, and when it is the
    # stacks handler also writes .stacks.gpu.txt (seen once in ~30 runs)
    r = _run("echo {path} >> out", {"TRAINPROF_SCHEDULE": "warmup=1,active=2",
                                     "TRAINPROF_HANDLERS": "chrome,summary,memory",
                                     "TRAINPROF_WITH_STACK": "1", "TRAINPROF_ACTIVITIES": "cpu"},
             args=("--steps=5", "--activations=4096"))
    assert r.rc == 0, r.stderr.decode(errors="replace")
    (trace,) = r.traces
    got = _lines(r, "out")
    base = os.path.basename(trace)[:-len(".json.gz")]
    assert sorted(os.path.basename(p) for p in got) == sorted(
        [os.path.basename(trace)] + [base + s for s in (".summary.txt", ".summary.json", ".memory.html",
                                                        ".memory.json", ".stacks.txt")])
    for p in got:
        assert os.path.exists(os.path.join(r.cwd, p)), p


def test_failure_is_a_warning():
    r = _run("exit 3", {"TRAINPROF_SCHEDULE": "warmup=1,active=1"})
    plain = tputil.run("train_loop", ["--steps=5"], preload=False)
    assert r.rc == 0
    assert r.stdout == plain.stdout
    assert len(r.traces) == 1
    warns = [l for l in r.stderr.decode().splitlines() if "TRAINPROF_EXEC" in l]
    assert len(warns) == 3, warns            # the trace and its summary (txt, json)
    for w in warns:
        assert w.startswith("trainprof: warning: ") and "status 3" in w
    assert any(".summary.txt" in w for w in warns) and any(".json.gz" in w for w in warns)
    assert any(".summary.json" in w for w in warns)


def test_keep_waits_for_the_command():
    r = _run("sleep 0.3; cat {path} > /dev/null && echo ok >> out", {"TRAINPROF_KEEP": "1"})
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert _lines(r, "out") == ["ok"] * 9    # every file still there when read
    assert len(r.traces) == 1
    reports = [f for f in os.listdir(os.path.join(r.cwd, "test", "reports")) if f != "rank0.exec.log"]
    assert sorted(reports) == sorted(os.path.basename(f) for f in _summaries_of(r.traces[0], r.cwd)), reports


def test_host_children_keep_their_status():
    r = _run("sleep 0.1", {"TRAINPROF_SCHEDULE": "warmup=0,active=1,repeat=0"},
             prog="fork_child", args=("2", "2"))
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert b"child exit 0" in r.stdout


def test_keep_deletes_the_reports_it_wrote():
    """TRAINPROF_KEEP deletes the report files its windows actually wrote.
    Two runs with their own trace folders share one reports folder: the
    first keeps everything, so every report of the second collides and is
    saved as "...trace-1.summary.txt" (OVERWRITE=0); the second run's KEEP
    must remove its own older reports, never the first run's."""
    d = tputil.new_dir()
    env = {"TRAINPROF_SCHEDULE": SCHED, "TRAINPROF_REPORTS": "reports"}
    first = tputil.run("train_loop", ["--steps=5"], cwd=d, env=dict(env, TRAINPROF_FOLDER="a"))
    second = tputil.run("train_loop", ["--steps=5"], cwd=d,
                        env=dict(env, TRAINPROF_FOLDER="b", TRAINPROF_KEEP="1"))
    assert first.rc == 0 and second.rc == 0, second.stderr.decode(errors="replace")
    assert len(os.listdir(os.path.join(d, "a"))) == 3
    assert os.listdir(os.path.join(d, "b")) == ["rank0.00000003.pt.trace.json.gz"]
    reports = sorted(os.listdir(os.path.join(d, "reports")))
    assert reports == sorted(["rank0.%08d.pt.trace.summary.%s" % (i, e) for i in (1, 2) for e in ("txt", "json")] +
                             ["rank0.00000003.pt.trace-1.summary.%s" % e for e in ("txt", "json")] +
                             ["rank0.00000003.pt.trace.summary.%s" % e for e in ("txt", "json")]), reports


# ---- values reach the shell as data ----------------------------------------

# Each holds something /bin/sh would run or split if it were pasted raw; the
# last is a byte that is not UTF-8 (os.fsencode gives 0xff back).
HOSTILE = ["x$(touch PWNED)", "x`touch PWNED`", "x;touch PWNED", "x&&touch PWNED #",
           "it's", 'say "$(touch PWNED)"', "'$(touch PWNED)'", "two  words\tand\na line",
           "-n", "x\\", "tail\xff".encode("latin-1").decode("utf-8", "surrogateescape")]

# The same value written bare, in single quotes, in double quotes, in a
# command substitution inside double quotes, and as case's word (README).
TEMPLATES = ["printf '%s' {v} > got", "printf '%s' '{v}' > got", 'printf "%s" "{v}" > got',
             "printf '%s' \"$(printf '%s' {v}; printf .)\" > got",
             "case {v} in *) printf '%s' {v} > got;; esac"]


def _files_named(top, name):
    return [os.path.join(d, name) for d, _, files in os.walk(top) if name in files]


def _sees_exactly(template, var, want, env, prog=None):
    """Runs one window with TRAINPROF_EXEC = template with {v} -> {var};
    the command must have written `want` (bytes) and nothing else ran."""
    e = {"TRAINPROF_SCHEDULE": "warmup=0,active=1", "TRAINPROF_HANDLERS": "chrome",
         "TRAINPROF_EXEC": template.replace("{v}", "{%s}" % var)}
    e.update(env)
    r = tputil.run(prog or "train_loop", ["--steps=2"], env=e)
    err = r.stderr.decode(errors="replace")
    assert r.rc == 0, err
    assert _files_named(r.cwd, "PWNED") == [], (template, err)
    traces = [os.path.join(d, f) for d, _, fs in os.walk(r.cwd) for f in fs
              if f.endswith(".json.gz")]
    assert len(traces) == 1, (traces, err)
    if want is None:                      # {path}: the trace, as the library named it
        want = os.fsencode(traces[0])     # absolute
    with open(os.path.join(r.cwd, "got"), "rb") as f:
        got = f.read()
    if "$(" in template:
        want += b"."
    assert got == want, (template, err)
    return r


def test_hostile_run_names_are_data():
    # a run name is one path component: '/' and control bytes become '_'
    for value in HOSTILE:
        for t in TEMPLATES:
            _sees_exactly(t, "path", None, {"TRAINPROF_RUN_NAME": value})
        _sees_exactly(TEMPLATES[0], "run_name",
                      os.fsencode(value.replace("\n", "_").replace("\t", "_")),
                      {"TRAINPROF_RUN_NAME": value})


def test_hostile_launcher_run_names_are_data():
    for var in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        for value in HOSTILE:
            _sees_exactly(TEMPLATES[0], "path", None,
                          {"TRAINPROF_RUN_NAME": None, var: value})
            _sees_exactly(TEMPLATES[2], "run_name",
                          os.fsencode(value.replace("\n", "_").replace("\t", "_")),
                          {"TRAINPROF_RUN_NAME": None, var: value})


def test_hostile_folders_are_data():
    # TRAINPROF_FOLDER keeps newlines and '/'; "-n" is a folder named -n
    for value in HOSTILE + ["sub/$(touch PWNED)/dir"]:
        for t in TEMPLATES:
            if "$(" in t and value.endswith("\n"):
                continue
            _sees_exactly(t, "path", None, {"TRAINPROF_FOLDER": value})


def test_hostile_hostnames_are_data():
    """gethostname() in a UTS namespace of our own (unshare -Ur -u); the
    library is preloaded only into the program, after sethostname."""
    import shutil
    import subprocess
    import sys
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-Ur", "-u", "true"]).returncode != 0:
        import pytest
        pytest.skip("no user and UTS namespaces here (unshare -Ur -u)")
    for value in HOSTILE:
        name = os.fsencode(value)
        if b"\n" in name or b"\t" in name:
            continue                      # sethostname takes them; the library writes '_'
        script = ("import os, socket, sys; socket.sethostname(os.fsencode(sys.argv[1])); "
                  "os.environ['LD_PRELOAD'] = os.environ.pop('TP_LATER_PRELOAD'); "
                  "os.execv(sys.argv[2], sys.argv[2:])")
        wrapper = os.path.join(tputil.new_dir(), "in_uts")
        with open(wrapper, "wb") as f:
            f.write(b"#!/bin/sh\nexec " + b" ".join(_sh_quote(os.fsencode(a)) for a in (
                unshare, "-Ur", "-u", sys.executable, "-c", script, value,
                tputil.program("train_loop"))) + b' "$@"\n')
        os.chmod(wrapper, 0o755)
        env = {"LD_PRELOAD": None, "TP_LATER_PRELOAD": tputil.preload_value()}
        for t in TEMPLATES:
            _sees_exactly(t, "hostname", name, env, prog=wrapper)


def _sh_quote(b):
    return b"'" + b.replace(b"'", b"'\\''") + b"'"


def test_program_changing_its_environment():
    """A thread of the program calls setenv/unsetenv in a loop while every
    step is a saved window with TRAINPROF_EXEC (the child's environment was
    once built from environ on tp-flush, a use-after-free)."""
    for _ in range(5):
        # host side only: a libcupti loaded by tp-flush (the fake's resolvers
        # call getenv) races with the program's setenv as any library would
        r = tputil.run("setenv_loop", ["20"], env={
            "TRAINPROF_SCHEDULE": "warmup=0,active=1,repeat=0", "TRAINPROF_HANDLERS": "chrome",
            "TRAINPROF_ACTIVITIES": "cpu",
            "TRAINPROF_EXEC": "echo $TRAINPROF_ENABLED >> ran"})
        assert r.rc == 0, (r.rc, r.stderr.decode(errors="replace"))
        assert r.stdout == b"setenv_loop 20 steps\n"
        assert r.traces
        assert _lines(r, "ran") == ["0"] * len(r.traces)
