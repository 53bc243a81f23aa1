"""The trainprof command against hostile inputs: what anyone who
can write a run folder, or hand over a trace, can make it do.

- `trigger` acts only on status files as collector/control/trigger.c writes them,
  signals only processes of the run, writes only a plain file name in the
  run folder;
- every file the command creates is made under a fresh name with
  O_EXCL|O_NOFOLLOW and renamed into place: a planted link is never written
  through;
- a byte that is not UTF-8 ends `merge` with one line, never a loop;
- `summary` reads regular files only, of bounded size, and skips a
  malformed summary.json with one line;
- huge strings, gzip bombs, corrupt gzip, bad CRCs, deep nesting, odd
  options: one line naming the file, exit status 2, bounded time and memory
  (the bounds are in README "What `merge`, `summary`, `trigger` and `status`
  accept").

Each case runs the command in a child process and measures its peak memory
(wait4) and time, so that a loop or a runaway read fails the test instead of
the machine.
"""

import gzip
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import tputil

CLI = tputil.CLI
ENGINE = os.path.join(tputil.build_dir(), "libtrainprof_merge.so")
MiB = 1 << 20


class Run:
    def __init__(self, rc, out, err, seconds, rss_mb, timed_out):
        self.rc, self.out, self.err = rc, out, err
        self.seconds, self.rss_mb, self.timed_out = seconds, rss_mb, timed_out

    def __repr__(self):
        return "rc=%s %.1f s %.0f MB%s\n%s" % (self.rc, self.seconds, self.rss_mb,
                                             " TIMED OUT" if self.timed_out else "",
                                             self.err.decode(errors="replace")[-3000:])


# Runs the command as its child and writes the child's peak RSS (KiB) to
# argv[1]: a child forked from pytest would carry pytest's own peak (Linux
# keeps the larger of the forked copy's and its own across exec), which is
# hundreds of MB once a test has imported torch in this process.
_RSS_WRAPPER = """
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc if rc >= 0 else 128 - rc)
"""


def run(args, timeout=60, cwd=None, new_session=False, limit_as=None, env=None, rss=False):
    """The command, its exit status, output, seconds and (rss) its peak RSS
    in MB; killed after `timeout` seconds."""
    def pre():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    cmd = [sys.executable, CLI] + [str(a) for a in args]
    rss_file = None
    if rss:
        fd, rss_file = tempfile.mkstemp(prefix="tp-rss-")
        os.close(fd)
        cmd = [sys.executable, "-c", _RSS_WRAPPER, rss_file] + cmd
        new_session = True              # a timeout kills the wrapper's group
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=new_session,
                             preexec_fn=pre, env=env or tputil.base_env(preload=False))
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                if rss:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    os.kill(p.pid, signal.SIGKILL)
                _, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        rss_mb = ru.ru_maxrss / 1024.0
        if rss:
            with open(rss_file) as f:
                text = f.read()
            os.unlink(rss_file)
            rss_mb = int(text) / 1024.0 if text else float("inf")
        return Run(p.returncode, out.read(), err.read(), seconds, rss_mb, timed_out)


def one_error_line(r, path, prefix=b"trainprof: "):
    """Exit status 2, nothing on stdout, and one line naming the file."""
    assert not r.timed_out and r.rc == 2, r
    assert b"Traceback" not in r.err, r
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), r
    assert os.fsencode(path) in lines[0], r
    return lines[0].decode()


def module(name):
    return tputil.cli_module(name)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def gz_stream(path, parts):
    """A gzip of the concatenated parts (each bytes, or (bytes, count))."""
    with gzip.open(path, "wb", 9) as f:
        for p in parts:
            if isinstance(p, tuple):
                for _ in range(p[1]):
                    f.write(p[0])
            else:
                f.write(p)
    return path


def engines():
    return ["c", "python"] if os.path.exists(ENGINE) else ["python"]


# ---- trigger and status: status files ------------------------------------------

def status_doc(pid, rank=0, **kw):
    d = {"schema": 1, "run_name": "job", "trigger_file": "trigger", "host": socket.gethostname(),
         "program": "x", "pid": pid, "rank": rank, "step": 5, "steps_per_s": 10.0,
         "windows_saved": 0, "dropped_events": 0, "last_error": None, "trigger_signal": None,
         "signal_installed": False, "last_trigger": None, "updated": time.time(), "exited": False}
    d.update(kw)
    return d


def put_status(folder, doc, name=None):
    name = name or "rank%s.%s.json" % (doc.get("rank"), doc.get("pid"))
    return write(os.path.join(folder, "status", name), json.dumps(doc).encode())


@pytest.fixture
def victim():
    """A process of this user that is no part of any run."""
    p = subprocess.Popen(["sleep", "120"])
    yield p
    if p.poll() is None:
        p.kill()
    p.wait()


def test_trigger_refuses_a_signal_out_of_the_documented_forms(victim):
    # "SIGRTMIN+-25" is SIGRTMIN - 25 = 9 once parsed with int(): SIGKILL
    run_dir = tputil.new_dir()
    path = put_status(run_dir, status_doc(victim.pid, trigger_signal="SIGRTMIN+-25",
                                          signal_installed=True))
    r = run(["trigger", "--run", run_dir, "--wait", 0])
    time.sleep(0.3)
    assert victim.poll() is None, ("the victim was killed", victim.returncode, r)
    assert r.rc == 1 and b"Traceback" not in r.err, r
    assert ("%s: skipped: trigger_signal 'SIGRTMIN+-25' is not SIGUSR1, SIGUSR2 or SIGRTMIN+N"
            % path).encode() in r.err, r


def test_trigger_signals_no_process_outside_the_run(victim):
    run_dir = tputil.new_dir()
    path = put_status(run_dir, status_doc(victim.pid, trigger_signal="SIGUSR1",
                                          signal_installed=True))
    r = run(["trigger", "--run", run_dir, "--wait", 0])
    time.sleep(0.3)
    assert victim.poll() is None, ("SIGUSR1's default action ended the victim", r)
    assert ("%s: not signalled: process %d does not hold the run folder" % (path, victim.pid)
            ).encode() in r.err, r
    # a process that holds the folder but has not loaded the library is not one either
    holder = subprocess.Popen([sys.executable, "-c", "import os, sys, time; os.open(sys.argv[1], "
                               "os.O_RDONLY); print(1, flush=True); time.sleep(120)", run_dir],
                              stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()
        path = put_status(run_dir, status_doc(holder.pid, rank=1, trigger_signal="SIGUSR1",
                                              signal_installed=True))
        r = run(["trigger", "--run", run_dir, "--wait", 0])
        time.sleep(0.3)
        assert holder.poll() is None, ("SIGUSR1 ended the folder's holder", r)
        assert ("%s: not signalled: process %d has not loaded libtrainprof.so" % (path, holder.pid)
                ).encode() in r.err, r
    finally:
        holder.kill()
        holder.wait()


def test_trigger_refuses_pid_0_and_minus_1():
    # kill(0, sig) signals the caller's process group: the trigger runs in a
    # session of its own, so that before the fix only it died of SIGUSR1
    run_dir = tputil.new_dir()
    p0 = put_status(run_dir, status_doc(0, trigger_signal="SIGUSR1", signal_installed=True))
    r = run(["trigger", "--run", run_dir, "--wait", 0], new_session=True)
    assert r.rc == 1, ("the trigger signalled its own process group", r)
    assert ("%s: skipped: pid 0 is not a process id" % p0).encode() in r.err, r
    # pid -1 (every process of the user) is checked in-process: no signal can
    # be risked here
    od = module("trigger")
    os.unlink(p0)
    pm = put_status(run_dir, status_doc(-1, trigger_signal="SIGUSR1", signal_installed=True))
    assert od.read_statuses(run_dir) == []
    assert od.check_status(json.load(open(pm)), os.path.basename(pm)).startswith("pid -1 is not")


@pytest.mark.parametrize("name", ["ABSOLUTE", "../precious.txt", "a/b", "..", ""])
def test_trigger_writes_only_a_plain_file_name_in_the_run_folder(name):
    top = tputil.new_dir()
    run_dir = os.path.join(top, "run")
    victim_file = write(os.path.join(top, "precious.txt"), b"precious\n")
    name = victim_file if name == "ABSOLUTE" else name
    holder = subprocess.Popen(["sleep", "120"])       # a live pid for the status
    try:
        put_status(run_dir, status_doc(holder.pid, trigger_file=name))
        r = run(["trigger", "--run", run_dir, "--wait", 0])
    finally:
        holder.kill()
        holder.wait()
    with open(victim_file, "rb") as f:
        assert f.read() == b"precious\n", r
    assert r.rc == 1 and r.err.count(b"is not a file name") == 1 and b"Traceback" not in r.err, r
    assert sorted(os.listdir(run_dir)) == ["status"] and sorted(os.listdir(top)) == ["precious.txt", "run"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_trigger_acts_only_on_status_files_of_this_user():
    run_dir = tputil.new_dir()
    holder = subprocess.Popen(["sleep", "120"])
    try:
        path = put_status(run_dir, status_doc(holder.pid))
        os.chown(path, 65534, 65534)
        r = run(["trigger", "--run", run_dir, "--wait", 0])
        assert r.rc == 1 and not os.path.exists(os.path.join(run_dir, "trigger")), r
        assert ("%s: skipped: owned by uid 65534, not by you" % path).encode() in r.err, r
        # `status` only shows: another user's job is shown
        r = run(["status", run_dir])
        assert r.rc == 0 and (b"%d" % holder.pid) in r.out, r
    finally:
        holder.kill()
        holder.wait()


def test_status_files_of_odd_types_and_kinds_are_skipped_with_one_line_each():
    run_dir = tputil.new_dir()
    holder = subprocess.Popen(["sleep", "120"])
    try:
        good = put_status(run_dir, status_doc(holder.pid))
        bad = {
            "step": status_doc(holder.pid, rank=1, step="x"),
            "rate": status_doc(holder.pid, rank=2, steps_per_s=float("inf")),
            "updated": status_doc(holder.pid, rank=3, updated="yesterday", host="elsewhere"),
            "trigger": status_doc(holder.pid, rank=4, last_trigger=[1]),
            "list": [1, 2],
            "name": status_doc(holder.pid, rank=5),
            "deep": None,
        }
        paths = {}
        for k, doc in bad.items():
            if k == "deep":
                paths[k] = write(os.path.join(run_dir, "status", "rank6.%d.json" % holder.pid),
                                 b"[" * 5000 + b"]" * 5000)
            else:
                paths[k] = put_status(run_dir, doc, name="rank%d.%d.json" % (
                    9 if k == "name" else (doc.get("rank", 7) if isinstance(doc, dict) else 7),
                    holder.pid))
        fifo = os.path.join(run_dir, "status", "rank8.%d.json" % holder.pid)
        os.mkfifo(fifo)
        paths["fifo"] = fifo
        big = write(os.path.join(run_dir, "status", "rank10.%d.json" % holder.pid),
                    json.dumps(status_doc(holder.pid, rank=10, last_error="x" * (1 << 20))).encode())
        paths["big"] = big
        for cmd in (["status", run_dir], ["trigger", "--run", run_dir, "--wait", 0]):
            r = run(cmd, timeout=30)
            assert not r.timed_out and b"Traceback" not in r.err, (cmd, r)
            assert r.rc == 0, (cmd, r)
            for k, p in paths.items():
                assert sum(p.encode() in line for line in r.err.splitlines()) == 1, (k, cmd, r)
            assert good.encode() not in r.err, r
    finally:
        holder.kill()
        holder.wait()


def test_trigger_signals_the_real_job_after_its_checks():
    """The checks let the library's own processes through: the status files
    it writes, the signal it names, the folder it holds, its mapping."""
    cwd = tputil.new_dir()
    e = tputil.base_env({"TRAINPROF_RUN_NAME": "job", "TRAINPROF_SCHEDULE": "none",
                         "TRAINPROF_TRIGGER_SIGNAL": "SIGRTMIN+3"})
    p = subprocess.Popen([tputil.program("train_loop"), "--steps=100000", "--sleep-us=10000"],
                         cwd=cwd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    folder = os.path.join(cwd, "job")
    try:
        deadline = time.time() + 30
        st = None
        while time.time() < deadline:
            try:
                st = json.load(open(os.path.join(folder, "status", "rank0.%d.json" % p.pid)))
                if st["steps_per_s"] is not None and st["step"] > 0:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        assert st and st["trigger_signal"] == "SIGRTMIN+3" and st["signal_installed"], st
        r = run(["trigger", "--run", folder, "--steps", 2, "--wait", 20])
        assert r.rc == 0, r
        assert b"skipped" not in r.err and b"not signalled" not in r.err, r
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    # SIGRTMIN+3 reached our handler only: the process ended by SIGTERM
    assert p.returncode == -signal.SIGTERM, p.stderr.read()


# ---- creating files -------------------------------------------------------------

def test_merge_never_writes_through_a_planted_link(tmp_path):
    src = write(str(tmp_path / "in.json"), b'{"traceEvents": [\n{"ph": "X", "pid": 1, "ts": 1}\n]}\n')
    for engine in engines():
        victim_file = tmp_path / ("victim-%s" % engine)
        victim_file.write_bytes(b"precious\n")
        other = tmp_path / ("other-%s" % engine)
        other.write_bytes(b"also precious\n")
        out = tmp_path / ("out-%s.json" % engine)
        os.symlink(victim_file, str(out) + ".tmp")          # the name used before
        os.symlink(other, out)                              # the final name
        r = run(["merge", src, "-o", out, "--engine", engine])
        assert r.rc == 0, r
        assert victim_file.read_bytes() == b"precious\n", engine
        assert other.read_bytes() == b"also precious\n", engine
        assert not os.path.islink(out) and json.load(open(out))["traceEvents"], engine
        assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp") and "out-%s" % engine in n] \
            == ["out-%s.json.tmp" % engine]                 # the planted link, left alone


def test_trigger_file_never_written_through_a_planted_link():
    od = module("trigger")
    run_dir = tputil.new_dir()
    victim_file = write(os.path.join(tputil.new_dir(), "precious"), b"precious\n")
    other = write(os.path.join(tputil.new_dir(), "other"), b"also precious\n")
    path = os.path.join(run_dir, "trigger")
    os.symlink(victim_file, "%s.%d.tmp" % (path, os.getpid()))   # the name used before
    os.symlink(other, path)
    assert od.write_trigger(run_dir, "trigger", "id=x start=3 warmup=1 active=2\n") == path
    assert open(victim_file, "rb").read() == b"precious\n"
    assert open(other, "rb").read() == b"also precious\n"
    assert not os.path.islink(path) and open(path).read() == "id=x start=3 warmup=1 active=2\n"


def test_every_temporary_name_refuses_a_planted_link(monkeypatch, tmp_path):
    """The temporary names are random; planted at the very names drawn, a
    link (or any file) is skipped for a fresh name, never written through."""
    files = module("files")
    victim_file = tmp_path / "victim"
    victim_file.write_bytes(b"precious\n")
    target = str(tmp_path / "out.json")
    names = iter(["%s.planted%d.tmp" % (target, i) for i in range(3)])
    drawn = []

    def planted(path):
        n = next(names, None) or "%s.fresh.tmp" % path
        if "planted" in n:
            os.symlink(victim_file, n)
        drawn.append(n)
        return n
    monkeypatch.setattr(files, "tmp_name", planted)
    with files.create(target) as f:
        f.write(b"new\n")
    assert victim_file.read_bytes() == b"precious\n"
    assert open(target, "rb").read() == b"new\n" and drawn[-1].endswith(".fresh.tmp")
    assert not os.path.exists(drawn[-1])                    # renamed onto target
    # an error while writing leaves nothing behind
    with pytest.raises(RuntimeError):
        with files.create(str(tmp_path / "never.json")) as f:
            f.write(b"half")
            raise RuntimeError("disk on fire")
    assert not [n for n in os.listdir(tmp_path) if "never" in n]


def test_no_file_is_created_but_through_trainprof_files():
    """Every writer of the command goes through trainprof_cli/files.py's
    create: no open() for writing, rename, O_CREAT, tempfile or shutil
    elsewhere (scripts/trainprof and the package's other modules)."""
    bad = re.compile(r"""\bopen\([^)]*["'][^"']*[wax+]|os\.(replace|rename|link|symlink)\(|O_CREAT|"""
                     r"""\btempfile\.|\bshutil\.|write_(text|bytes)\(|gzip\.open\(""")
    found = []
    paths = [tputil.CLI] + [p for n, p in tputil.cli_modules().items() if n != "files"]
    assert len(paths) >= 4, paths
    for path in paths:
        name = os.path.relpath(path, tputil.SCRIPTS)
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if bad.search(line.split("#")[0]):
                    found.append("%s:%d: %s" % (name, i, line.strip()))
    assert not found, "\n".join(found)


# ---- merge: bytes that are not UTF-8 ---------------------------------------------

@pytest.mark.parametrize("engine", ["c", "python"])
@pytest.mark.parametrize("where", ["header", "event"])
def test_merge_non_utf8_byte_is_one_error_line(tmp_path, engine, where):
    if engine == "c" and not os.path.exists(ENGINE):
        pytest.skip("the C engine is not built")
    text = (b'{"a": "x\xffy", "traceEvents": [\n{"ph": "X", "pid": 1}\n]}\n' if where == "header"
            else b'{"traceEvents": [{"ph": "X", "pid": 1, "name": "a\xffb"}, {"ph": "X", "pid": 2}]}')
    src = write(str(tmp_path / "bad.json"), text)
    r = run(["merge", src, "-o", tmp_path / "o.json", "--engine", engine], timeout=30)
    if engine == "c" and where == "event":
        # the engine copies an event's bytes as they are (README)
        assert r.rc == 0, r
        assert open(tmp_path / "o.json", "rb").read().count(b"a\xffb") == 1
        return
    line = one_error_line(r, src)
    assert "not UTF-8 text: byte 0xff at offset" in line, line
    assert sorted(os.listdir(tmp_path)) == ["bad.json"]


# ---- summary: what it reads -------------------------------------------------------

def summary_doc(rank, n):
    return {"schema": "trainprof.summary/1", "trace": "rank%d.1.pt.trace.json.gz" % rank, "run": "r",
            "rank": rank, "world_size": n, "host": "h", "totals": {"peak_tflops": None},
            "collectives": {"time_ns": 0},
            "steps": [{"step": s, "wall_ns": 1000000 + 1000 * rank, "flops": 10, "tflops_per_s": 0.0,
                       "gpu_busy_ns": None} for s in (1, 2)]}


def make_run(n):
    d = tputil.new_dir()
    rep = os.path.join(d, "reports")
    os.makedirs(rep)
    for i in range(n):
        with open(os.path.join(rep, "rank%d.1.pt.trace.summary.json" % i), "w") as f:
            json.dump(summary_doc(i, n), f)
    return d, rep


def job_table_ranks(out):
    """The ranks of the job table's per-rank rows."""
    text = out.decode()
    part = text.split("Per rank")[1]
    return sorted(int(m.group(1)) for m in re.finditer(r"^(\d+)\s+h\s", part, re.M))


def test_summary_skips_a_fifo_and_a_link_to_dev_zero():
    d, rep = make_run(3)
    fifo = os.path.join(rep, "rank9.1.pt.trace.summary.json")
    os.mkfifo(fifo)
    zero = os.path.join(rep, "rank10.1.pt.trace.summary.json")
    os.symlink("/dev/zero", zero)
    r = run(["summary", d], timeout=30, limit_as=2 << 30)
    assert not r.timed_out and b"Traceback" not in r.err, r
    assert r.rc == 2 and job_table_ranks(r.out) == [0, 1, 2], r
    lines = r.err.splitlines()
    assert len(lines) == 2 and all(l.startswith(b"trainprof: error: ") for l in lines), r
    assert fifo.encode() in lines[1] and b"a FIFO" in lines[1], r
    assert zero.encode() in lines[0] and b"a symbolic link" in lines[0], r
    # named on the command line: a link is followed, to a regular file only
    r = run(["summary", zero], timeout=30, limit_as=2 << 30)
    assert "a device, not a regular file" in one_error_line(r, zero), r
    r = run(["summary", fifo], timeout=30)
    assert "a FIFO, not a regular file" in one_error_line(r, fifo), r


def test_summary_skips_a_malformed_summary_among_4097():
    d, rep = make_run(4096)
    bad = os.path.join(rep, "rank4096.1.pt.trace.summary.json")
    with open(bad, "w") as f:
        json.dump(dict(summary_doc(4096, 4097), steps=[{"step": "x", "wall_ns": 1}]), f)
    r = run(["summary", d], timeout=120)
    assert not r.timed_out and r.rc == 2, r
    assert "malformed: steps[0]" in one_error_line(r, bad, b"trainprof: error: ")
    assert job_table_ranks(r.out) == list(range(4096))


@pytest.mark.parametrize("doc", [
    {"rank": "one"}, {"rank": True}, {"steps": 3}, {"steps": [{"step": 1, "wall_ns": "1"}]},
    {"steps": [{"step": 1, "wall_ns": 1, "flops": None}]}, {"collectives": [1]},
    {"totals": {"peak_tflops": "big"}}, {"world_size": 1.5}, {"source": 7},
    {"steps": [{"step": 1, "wall_ns": 10 ** 400}]}, "NaN"])
def test_summary_json_of_odd_types_is_skipped(doc):
    d, rep = make_run(2)
    bad = os.path.join(rep, "rank2.1.pt.trace.summary.json")
    if doc == "NaN":
        text = json.dumps(dict(summary_doc(2, 3), steps=[{"step": 1, "wall_ns": float("nan")}]))
    else:
        text = json.dumps(dict(summary_doc(2, 3), **doc))
    write(bad, text.encode())
    r = run(["summary", d], timeout=30)
    one_error_line(r, bad, b"trainprof: error: ")
    assert job_table_ranks(r.out) == [0, 1], r


# ---- bounds -----------------------------------------------------------------------

def test_merge_header_string_of_64_mib_is_refused_in_bounded_memory(tmp_path):
    # 0.07 MB of gzip; before: all of it inflated at once and decoded in
    # windows doubling past it (3.2 GB of memory for 512 MiB)
    src = gz_stream(str(tmp_path / "hdr.json.gz"),
                    [b'{"x": "', (b"A" * MiB, 64), b'", "traceEvents": [\n{"ph": "X", "pid": 1}\n]}\n'])
    for engine in engines():
        r = run(["merge", src, "-o", tmp_path / "o.json", "--engine", engine], rss=True)
        assert "the value of 'x' longer than 16 MiB" in one_error_line(r, src), r
        assert r.rss_mb < 250, r


def test_merge_long_event_is_refused_in_bounded_memory(tmp_path):
    src = gz_stream(str(tmp_path / "ev.json.gz"),
                    [b'{"traceEvents": [\n{"ph": "X", "pid": 1},\n{"ph": "X", "name": "',
                     (b"A" * MiB, 40), b'"}\n]}\n'])
    for engine in engines():
        r = run(["merge", src, "-o", tmp_path / "o.json.gz", "--engine", engine], rss=True)
        assert "an event longer than 16 MiB" in one_error_line(r, src), (engine, r)
        assert r.rss_mb < 250, (engine, r)
        assert sorted(os.listdir(tmp_path)) == ["ev.json.gz"]


def test_merge_gzip_of_blanks_or_commas_stays_bounded(tmp_path):
    for name, fill in (("blanks", b" " * MiB), ("commas", b"," * MiB)):
        src = gz_stream(str(tmp_path / ("%s.json.gz" % name)), [b"{", (fill, 64), b'"traceEvents": []}'])
        r = run(["merge", src, "-o", tmp_path / "o.json"], timeout=60, rss=True)
        assert "the keys before traceEvents are longer than 16 MiB" in one_error_line(r, src), r
        assert r.rss_mb < 250 and r.seconds < 30, r


def test_summary_header_string_of_128_mib_takes_linear_time(tmp_path):
    # before: 13.5 s to 22 s (the whole buffer decoded again at every MiB)
    src = gz_stream(str(tmp_path / "hdr.json.gz"),
                    [b'{"x": "', (b"A" * MiB, 128), b'", "traceEvents": [\n{"ph": "X", "pid": 1}\n]}\n'])
    r = run(["summary", src], timeout=60, rss=True)
    assert "the value of 'x' longer than 16 MiB" in one_error_line(r, src, b"trainprof: error: "), r
    assert r.seconds < 8 and r.rss_mb < 250, r


def test_summary_operators_out_of_id_order_take_n_log_n(tmp_path):
    # each kernel looked up its operator after an operator whose id was out of
    # order: a sort of every id per kernel (126 s for 20,000 operators)
    n = 10000
    ev = []
    for i in range(n):
        ev.append({"ph": "X", "cat": "cpu_op", "name": "op%d" % (i % 50), "ts": i * 10.0, "dur": 5.0,
                   "tid": 1, "pid": 1, "args": {"Record function id": i, "External id": n - i}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k", "ts": i * 10.0 + 1, "dur": 1.0, "tid": 7,
                   "pid": 0, "args": {"External id": n - i}})
    src = write(str(tmp_path / "ops.json"), (
        '{"trainprof": {"steps": [], "coverage": {"kernels_seen_by_cupti": 1}}, "traceEvents": [\n'
        + ",\n".join(json.dumps(e) for e in ev) + "\n]}\n").encode())
    r = run(["summary", "--json", src], timeout=60)
    assert r.rc == 0 and r.seconds < 15, r
    ops = json.loads(r.out)["operators"]["top"]
    assert sum(o["gpu_ns"] for o in ops) == 20 * 1000 * (n // 50), ops   # every kernel found its operator


BROKEN = {
    "corrupt.json.gz": lambda good: good[:12] + bytes(b ^ 0x5a for b in good[12:30]) + good[30:],
    "badcrc.json.gz": lambda good: good[:-8] + bytes([good[-8] ^ 1]) + good[-7:],
    "truncated.json.gz": lambda good: good[:-5],
    "deep_header.json": lambda good: b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b', "traceEvents": []}',
    "deep_event.json": lambda good: b'{"traceEvents": [' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]}",
    "deep_trailer.json": lambda good: b'{"traceEvents": [], "b": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "huge_number.json": lambda good: b'{"traceEvents": [{"ph": "X", "pid": 1, "ts": 1e999}]}',
    "long_digits.json": lambda good: b'{"traceEvents": [{"ph": "X", "pid": 1, "id": ' + b"9" * 5000 + b"}]}",
    "not_json.json": lambda good: b"\x00\x01garbage",
    "empty.json": lambda good: b"",
}


# text copied as it is, not parsed, when no shift or flow id suffix applies
PASSED_THROUGH = {"huge_number.json": ("c", "python"), "long_digits.json": ("c",)}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_inputs_are_one_error_line(tmp_path, name):
    good = gzip.compress(b'{"trainprof": {"steps": []}, "traceEvents": [\n{"ph": "X", "pid": 1, "ts": 1}\n]}\n')
    src = write(str(tmp_path / name), BROKEN[name](good))
    for engine in engines():
        r = run(["merge", src, "-o", tmp_path / "o.json", "--engine", engine], timeout=30)
        if engine in PASSED_THROUGH.get(name, ()) and r.rc == 0:
            os.unlink(tmp_path / "o.json")
            continue
        one_error_line(r, src)
        assert sorted(os.listdir(tmp_path)) == [name], (engine, os.listdir(tmp_path))
    r = run(["summary", src], timeout=30)
    one_error_line(r, src, b"trainprof: error: ")


@pytest.mark.parametrize("args", [["-j", "-1"], ["-j", "100000"], ["-j", "x"]])
def test_merge_bad_jobs_option_is_a_usage_error(tmp_path, args):
    src = write(str(tmp_path / "in.json"), b'{"traceEvents": [\n{"ph": "X", "pid": 1}\n]}\n')
    r = run(["merge", src, "-o", tmp_path / "o.json", "--engine", "python"] + args)
    assert r.rc == 2 and b"Traceback" not in r.err and b"-j/--jobs" in r.err, r
    assert sorted(os.listdir(tmp_path)) == ["in.json"]
