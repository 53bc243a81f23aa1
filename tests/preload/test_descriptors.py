"""A program that closes its descriptors after the library activated
(close_range(3, ~0U, 0), as daemonizing code, some launchers and test
harnesses do) and then opens files of its own: the library must neither
read nor write them, nor spin on what it had open, nor take descriptors a
program under a low RLIMIT_NOFILE needs.  The
program is tests/programs/close_fds.c."""

import glob
import json
import os
import re
import resource
import subprocess

import pytest

import tputil

TEXT = b"hello, world\n"
IDLE_MS = 1000


def _run_files(env=None, args=(), close_loop=False, cwd=None):
    cwd = cwd or tputil.new_dir()
    with open(os.path.join(cwd, "in.txt"), "wb") as f:
        f.write(TEXT)
    e = {"IDLE_MS": IDLE_MS}
    if close_loop:
        e["CLOSE_LOOP"] = 1
    e.update(env or {})
    r = tputil.run("close_fds", ["files"] + list(args), env=e, cwd=cwd, timeout=60)
    assert r.rc == 0, r.stderr
    m = re.search(rb"fds dir (-?\d+) in (\d+) out (\d+) copied (\d+) idle_cpu_ms (\d+) (\d+) (\d+)",
                  r.stdout)
    assert m, r.stdout
    return r, [int(x) for x in m.groups()]


def _file(cwd, name):
    with open(os.path.join(cwd, name), "rb") as f:
        return f.read()


@pytest.mark.parametrize("close_loop", [False, True], ids=["close_range", "close_loop"])
def test_closed_descriptors_are_not_reused(close_loop):
    """After the close, in.txt and out.txt get the lowest numbers (those of
    the old wake-up pipe: tp-flush read in.txt's 13 bytes and wrote wake
    bytes into out.txt, 0 bytes copied and 2 bytes written).  Their bytes
    must be exactly the program's, and the process must stay idle while
    it sleeps (tp-flush spun on the closed pipe: 650-690 ms of CPU per
    second of sleep)."""
    r, (fd_dir, fd_in, fd_out, copied, cpu0, cpu1, cpu2) = _run_files(close_loop=close_loop)
    assert (fd_in, fd_out) == (3, 4), r.stdout       # the lowest free numbers
    assert copied == len(TEXT), r.stdout
    assert _file(r.cwd, "in.txt") == TEXT
    assert _file(r.cwd, "out.txt") == TEXT
    # tp-flush wakes once a second and the fake CUPTI's thread every 20 ms:
    # a few ms of CPU per idle second, against most of a core for a spin
    for cpu in (cpu0, cpu1, cpu2):
        assert cpu < IDLE_MS * 0.25, (cpu0, cpu1, cpu2)
    # the window recorded across the close is saved as usual
    assert len(r.traces) == 1, (r.traces, r.stderr)
    assert tputil.steps(tputil.load_trace(r.traces[0])) == [1, 2, 3, 4]
    assert b"error" not in r.stderr, r.stderr


def test_run_folder_descriptor_is_not_reused():
    """With on-demand capture the run folder stays open (O_PATH).  The
    program closes it and opens a folder of its own at once, which gets
    its number: the library must notice that the number is no longer its
    own, leave the program's folder alone and keep writing the status file
    in the run folder (it wrote nothing more: "Bad file descriptor", the
    last status at step 0 and "exited": false)."""
    cwd = tputil.new_dir()
    prog_status = os.path.join(cwd, "progdir", "status")
    os.makedirs(prog_status)
    r, (fd_dir, fd_in, fd_out, copied, *_) = _run_files(
        env={"TRAINPROF_TRIGGER": "{run_name}/trigger"}, args=["progdir"], cwd=cwd)
    assert fd_dir == 3, r.stdout
    assert copied == len(TEXT)
    assert os.listdir(prog_status) == []
    assert _file(r.cwd, "out.txt") == TEXT
    paths = glob.glob(os.path.join(r.cwd, "test", "status", "rank0.*.json"))
    assert len(paths) == 1, paths
    with open(paths[0]) as f:
        status = json.load(f)
    assert status["exited"] is True, status
    assert status["step"] == 9, status                # 1 before the close, 8 after
    assert status["windows_saved"] == 1, status
    assert b"error" not in r.stderr, r.stderr


def _count(preload, env=None, nofile=6):
    cwd = tputil.new_dir()
    e = tputil.base_env(dict({"IDLE_MS": 600}, **(env or {})), preload=preload)
    p = subprocess.run([tputil.program("close_fds"), "count"], cwd=cwd, env=e,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                             (nofile, nofile)),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    m = re.search(rb"opened (\d+) errno (\d+)", p.stdout)
    assert m, p.stdout
    return int(m.group(1)), int(m.group(2)), p


def test_low_nofile_limit_leaves_the_program_its_descriptors():
    """At RLIMIT_NOFILE 6 a program has 3 descriptors of its own; the
    library took 2 of them (its wake-up pipe): it must take none."""
    plain, err_plain, _ = _count(preload=False)
    got, err, p = _count(preload=True)
    assert err_plain == err == 24                   # EMFILE
    assert plain == 3
    assert got == plain, p.stderr
    assert b"error" not in p.stderr, p.stderr


def test_low_nofile_limit_with_on_demand_capture_takes_one():
    """On-demand capture keeps its run folder open (README): one
    descriptor, no more."""
    plain, _, _ = _count(preload=False)
    got, _, p = _count(preload=True, env={"TRAINPROF_TRIGGER": "{run_name}/trigger"})
    assert got == plain - 1, p.stderr
