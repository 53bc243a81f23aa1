"""Where the library's outputs go, and what it hands to others.

- Relative TRAINPROF_FOLDER and TRAINPROF_REPORTS are resolved against the
  working directory at activation, once (still expanded per window): a
  program that changes its directory between two windows (os.chdir) kept
  writing its later windows, and hang reports, under the new directory, so
  one run was split over two folders; and every path the library prints is
  absolute.
- TRAINPROF_EXEC's commands write to a log of their own,
  {reports}/rank{rank}.exec.log, not to the job's stderr: a caller reading the
  job's output (subprocess.run(capture_output=True), `| cat`) waited for
  every command to end before."""

import os
import re
import subprocess
import time

import tputil

SAVED_RE = re.compile(r"^trainprof: rank 0: saved steps \S+ \(.*\) to ([^;\s]+)")


def _saved_paths(stderr):
    return [m.group(1) for m in map(SAVED_RE.match, stderr.decode().splitlines()) if m]


def test_chdir_between_windows_keeps_one_folder():
    """Windows of steps 2 and 5 (wait=1,warmup=1,active=1,repeat=2); the
    program moves to "elsewhere" right after step 2: both traces and their summaries land
    under the directory where the job started, and the saved lines give
    absolute paths."""
    cwd = tputil.new_dir()
    os.mkdir(os.path.join(cwd, "elsewhere"))
    r = tputil.run("chdir_loop", ["6", "3", "elsewhere"], cwd=cwd,
                   env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=1,repeat=2",
                        "TRAINPROF_HANDLERS": "chrome,summary"})
    err = r.stderr.decode(errors="replace")
    assert r.rc == 0 and r.stdout == b"chdir_loop 6 steps\n", err
    assert len(r.traces) == 2, (tputil.files_under(cwd), err)
    assert tputil.files_under(os.path.join(cwd, "elsewhere")) == [], err
    assert len(os.listdir(os.path.join(cwd, "test", "reports"))) == 4, tputil.files_under(cwd)
    saved = _saved_paths(r.stderr)
    assert sorted(saved) == r.traces, err          # absolute: the very paths
    for p in saved:
        assert os.path.isabs(p), err


def test_folder_with_batch_is_still_expanded_per_window():
    """A folder that names {batch} gets one folder per window, both under
    the starting directory."""
    cwd = tputil.new_dir()
    os.mkdir(os.path.join(cwd, "elsewhere"))
    r = tputil.run("chdir_loop", ["6", "3", "elsewhere"], cwd=cwd,
                   env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=1,repeat=2",
                        "TRAINPROF_HANDLERS": "chrome",
                        "TRAINPROF_FOLDER": "./out/w{batch}"})
    err = r.stderr.decode(errors="replace")
    assert r.rc == 0, err
    assert tputil.files_under(cwd) == ["out/w3/rank0.00000003.pt.trace.json.gz",
                                       "out/w6/rank0.00000006.pt.trace.json.gz"], err
    assert _saved_paths(r.stderr) == [os.path.join(cwd, "out", "w%d" % b,
                                                   "rank0.%08d.pt.trace.json.gz" % b) for b in (3, 6)], err


def test_hang_report_after_chdir_lands_beside_the_reports():
    """The hang doctor writes into the same reports folder as the windows,
    and says where with an absolute path."""
    cwd = tputil.new_dir()
    os.mkdir(os.path.join(cwd, "elsewhere"))
    r = tputil.run("chdir_loop", ["3", "2", "elsewhere"], cwd=cwd,
                   env={"TRAINPROF_SCHEDULE": "wait=0,warmup=1,active=1,repeat=1",
                        "TRAINPROF_HANDLERS": "chrome", "TRAINPROF_HANG_S": "1",
                        "CHDIR_LOOP_STALL_US": "2300000"})
    err = r.stderr.decode(errors="replace")
    assert r.rc == 0, err
    assert tputil.files_under(os.path.join(cwd, "elsewhere")) == [], err
    reports = os.path.join(cwd, "test", "reports")
    assert sorted(os.listdir(reports)) == ["rank0.hang.json", "rank0.hang.txt"], tputil.files_under(cwd)
    lines = [l for l in err.splitlines() if "hang report" in l]
    assert len(lines) == 1 and lines[0].endswith(" hang report %s/rank0.hang.txt" % reports), err


# ---- TRAINPROF_EXEC's output ----------------------------------------------

SLEEP_S = 8


def _exec_run(cwd, cmd, steps="3"):
    """Runs chdir_loop as a caller that reads its output would, returning
    (CompletedProcess, seconds until both pipes closed)."""
    env = tputil.base_env({"TRAINPROF_SCHEDULE": "wait=0,warmup=1,active=1,repeat=1",
                           "TRAINPROF_HANDLERS": "chrome", "TRAINPROF_EXEC": cmd})
    t0 = time.monotonic()
    p = subprocess.run([tputil.program("chdir_loop"), steps, "0", "."], cwd=cwd, env=env,
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    return p, time.monotonic() - t0


def test_exec_commands_do_not_hold_the_jobs_pipes():
    """A command that outlives the job (sleep 8) no longer keeps the
    caller's pipes open: subprocess.run returns when the job ends (it waits
    up to 2 s at exit for running commands), well before the sleep ends; the
    command's output, stdout and stderr, is in the log, and its stdin is
    /dev/null."""
    cwd = tputil.new_dir()
    p, took = _exec_run(cwd, "read x; echo out [$x] {path}; echo err >&2; sleep %d" % SLEEP_S)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0 and p.stdout == b"chdir_loop 3 steps\n", err
    assert took < SLEEP_S - 3, (took, err)
    assert "out [" not in err and "\nerr\n" not in "\n" + err
    (trace,) = tputil.find_traces(cwd)
    log = os.path.join(cwd, "test", "reports", "rank0.exec.log")
    with open(log) as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("trainprof: ") and lines[0].endswith(" for " + trace), lines
    assert lines[1:] == ["out [] " + trace, "err"], lines
    assert os.stat(log).st_mode & 0o777 == 0o666 & ~_umask()


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_exec_log_is_appended_across_runs():
    cwd = tputil.new_dir()
    for _ in range(2):
        p, _took = _exec_run(cwd, "echo one {path}")
        assert p.returncode == 0, p.stderr
    with open(os.path.join(cwd, "test", "reports", "rank0.exec.log")) as f:
        got = [l for l in f.read().splitlines() if not l.startswith("trainprof: ")]
    traces = tputil.find_traces(cwd)
    assert len(traces) == 2
    assert sorted(got) == ["one " + t for t in traces], got


def test_link_planted_at_the_exec_log_is_not_followed():
    """A link at the log's name is never written through: the command's
    output goes to /dev/null and one warning says so."""
    cwd = tputil.new_dir()
    victim = os.path.join(cwd, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    os.makedirs(os.path.join(cwd, "test", "reports"))
    os.symlink(victim, os.path.join(cwd, "test", "reports", "rank0.exec.log"))
    p, _took = _exec_run(cwd, "echo leaked; echo ran >> ran")
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, err
    with open(victim) as f:
        assert f.read() == "precious"
    assert "leaked" not in err
    with open(os.path.join(cwd, "ran")) as f:
        assert f.read() == "ran\n"
    warns = [l for l in err.splitlines() if "exec.log" in l]
    assert len(warns) == 1 and warns[0].startswith("trainprof: warning: TRAINPROF_EXEC: cannot use the log "
                                                   + os.path.join(cwd, "test", "reports", "rank0.exec.log")), err
