"""`trainprof run`'s own edges (scripts/trainprof): the run name it gives
its job (one folder per invocation, shared by all ranks), its interpreter
(the user's sitecustomize runs in the job only), a closed stdout, exec
failures (126/127), signals and exit, and the one line that says why a job
recorded nothing (the library stays silent in a process that never
started; the handlers say why a window got no stacks or memory file).

The command is run as a user runs it: the script itself, through its #!."""

import glob
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile

import pytest

import tputil

SCRIPT = os.path.join(tputil.ROOT, "scripts", "trainprof")
CLIENT = os.path.join(tputil.ROOT, "tests", "programs", "torch_client.py")
PLAIN_LINE = b"nvtx_ranges: 5 steps, checksum 2611200\n"
LOOP = "s = 0\nfor i in range(10000):\n    s += i\nprint(s)\n"


def env_of(env=None):
    """tputil's environment without its run name (the command names runs),
    LD_PRELOAD holding only the ASan runtime when the tests run sanitized."""
    e = tputil.base_env(dict({"TRAINPROF_RUN_NAME": None}, **(env or {})), preload=False)
    if os.environ.get("TP_TEST_ASAN"):
        e["LD_PRELOAD"] = os.environ["TP_TEST_ASAN"]
    return e


def tp(args, env=None, cwd=None, timeout=120, **kw):
    """Run the command through its #! (not `python scripts/trainprof`)."""
    if cwd is None:
        cwd = tputil.new_dir()
    p = subprocess.run([SCRIPT] + [str(a) for a in args], cwd=cwd, env=env_of(env),
                       stdout=kw.pop("stdout", subprocess.PIPE), stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout, **kw)
    return p, cwd


def run_args(*more):
    return ["run", "--lib", tputil.lib_path()] + list(more)


def ours(stderr):
    return [l for l in stderr.decode(errors="replace").splitlines()
            if l.startswith("trainprof") and not tputil.STARTUP_RE.match(l)]


def run_folders(cwd):
    return sorted(d for d in os.listdir(cwd) if os.path.isdir(os.path.join(cwd, d, "traces")))


# ---- item 3: a run folder per `trainprof run`, shared by the job's ranks ----

def test_two_runs_from_one_shell_get_two_folders():
    """Two `trainprof run` from one shell: before, both jobs' run name was
    <program>-<start time of the shell>, one folder, the second trace with a
    -1 suffix."""
    cwd = tputil.new_dir()
    one = " ".join([SCRIPT] + run_args("--schedule", "all", "--", tputil.program("nvtx_ranges")))
    p = subprocess.run(["sh", "-c", one + " && " + one], cwd=cwd, env=env_of(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == PLAIN_LINE * 2
    folders = run_folders(cwd)
    assert len(folders) == 2, (folders, tputil.files_under(cwd))
    for d in folders:
        assert re.match(r"^nvtx_ranges-\d{8}-\d{6}-\d+$", d), d
        traces = os.listdir(os.path.join(cwd, d, "traces"))
        assert len(traces) == 1 and "-1" not in traces[0], traces


def test_dry_run_names_the_run_unless_given():
    p, _ = tp(run_args("--dry-run", "--", "./train", "x"))
    lines = dict(l.split("=", 1) for l in p.stdout.decode().splitlines()[:-1])
    assert re.match(r"^train-\d{8}-\d{6}-\d+$", lines["TRAINPROF_RUN_NAME"]), lines
    # the user's name, a launcher's job id, a rank of a launcher that started
    # one command per rank, torchrun's own --rdzv-id: the library's rule
    for env, cmd in (({"TRAINPROF_RUN_NAME": "mine"}, ["./train"]),
                     ({"SLURM_JOB_ID": "77"}, ["./train"]),
                     ({"TORCHELASTIC_RUN_ID": "abc"}, ["./train"]),
                     ({"RANK": "1"}, ["./train"]),
                     ({}, ["torchrun", "--rdzv-id", "job7", "t.py"]),
                     ({}, ["python3", "-m", "torch.distributed.run", "--rdzv_id=job7", "t.py"])):
        p, _ = tp(run_args("--dry-run", "--") + cmd, env=env)
        assert b"TRAINPROF_RUN_NAME=" not in p.stdout, (env, cmd, p.stdout)


@pytest.mark.skipif(os.environ.get("TP_TEST_NO_TORCH") == "1" or
                    importlib.util.find_spec("torch") is None, reason="no torch")
def test_torchrun_two_ranks_share_the_commands_folder():
    """`trainprof run torchrun --nproc-per-node 2`: both ranks' traces in
    one folder, the one this invocation named (before: torchrun's own
    --standalone id)."""
    cwd = tputil.new_dir()
    e = env_of({"OMP_NUM_THREADS": "1", "TRAINPROF_SYS": None, "PYTHONDONTWRITEBYTECODE": "1"})
    cmd = [SCRIPT] + run_args("--", sys.executable, "-m", "torch.distributed.run", "--standalone",
                              "--nproc-per-node", "2", CLIENT, "ddp")
    p = subprocess.Popen(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    assert out.count(b"loss") == 10
    traces = sorted(glob.glob(os.path.join(cwd, "*", "traces", "*")))
    assert [os.path.basename(t).split(".")[0] for t in traces] == ["rank0", "rank1"], traces
    folders = {os.path.basename(os.path.dirname(os.path.dirname(t))) for t in traces}
    assert len(folders) == 1, folders
    assert re.match(r"^python[\d.]*-\d{8}-\d{6}-%d$" % p.pid, folders.pop())


# ---- item 6a: the user's sitecustomize runs once, in the job ----

def test_users_sitecustomize_runs_in_the_job_only():
    d = tempfile.mkdtemp(prefix="tp-site-")
    log = os.path.join(d, "ran")
    with open(os.path.join(d, "sitecustomize.py"), "w") as f:
        f.write("import os, sys\nwith open(%r, 'a') as f:\n    f.write('%%d %%s\\n' %% "
                "(os.getpid(), os.path.basename(sys.argv[0] or '-')))\n" % log)
    p, _ = tp(run_args("--", sys.executable, "-c", "print('job')"), env={"PYTHONPATH": d})
    assert p.returncode == 0 and p.stdout == b"job\n", p.stderr
    with open(log) as f:
        ran = f.read().splitlines()
    assert len(ran) == 1 and ran[0].endswith(" -c"), ran       # the job's, chained by our hook


def test_the_command_runs_isolated():
    with open(SCRIPT, "rb") as f:
        first = f.readline()
    assert first.startswith(b"#!/usr/bin/env -S python3 ") and b"-I" in first and b"-S" in first


# ---- item 6b: a closed stdout ----

def closed_pipe_run(args, env=None, cwd=None):
    """Run with stdout a pipe whose reader has gone."""
    r, w = os.pipe()
    os.close(r)
    try:
        return tp(args, env=env, cwd=cwd, stdout=w)[0]
    finally:
        os.close(w)


def test_closed_stdout_ends_quietly_in_every_command():
    cwd = tputil.new_dir()
    made = tputil.run("nvtx_ranges", env={"TRAINPROF_SCHEDULE": "all"}, cwd=cwd)
    assert made.rc == 0 and made.traces
    watched = tputil.run("nvtx_ranges", env={"TRAINPROF_SCHEDULE": "none",
                                             "TRAINPROF_RUN_NAME": "st"}, cwd=cwd)
    assert watched.rc == 0 and os.listdir(os.path.join(cwd, "st", "status"))
    folder = os.path.join(cwd, "test")
    for args in (run_args("--dry-run", "--", "./train", "x"), ["--help"], ["--version"],
                 ["run", "--help"], ["summary", folder], ["summary", "--help"],
                 ["status", os.path.join(cwd, "st")], ["hang", "--help"], ["merge", "--help"],
                 ["trigger", "--help"]):
        p = closed_pipe_run(args, cwd=cwd)
        assert p.stderr == b"", (args, p.stderr[-2000:])
        assert p.returncode in (0, -signal.SIGPIPE), (args, p.returncode)      # as cat ends


def test_job_gets_sigpipe_default_action():
    """Python ignores SIGPIPE and exec keeps what is ignored: the job ran
    with SIGPIPE (and SIGXFSZ) ignored, so `yes | head` in it failed
    with EPIPE instead of ending quietly."""
    p, _ = tp(run_args("--", "sh", "-c", "grep SigIgn /proc/self/status"))
    assert p.returncode == 0, p.stderr
    ign = int(p.stdout.split()[1], 16)
    assert not ign & (1 << (signal.SIGPIPE - 1)), p.stdout
    assert not ign & (1 << (signal.SIGXFSZ - 1)), p.stdout


def test_closed_stderr_keeps_the_jobs_status():
    """The line said after the job, into a stderr whose reader has gone,
    must not turn the job's status into SIGPIPE's."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([SCRIPT] + run_args("--", "sh", "-c", "exit 5"), cwd=tputil.new_dir(),
                           env=env_of(), stdout=subprocess.PIPE, stderr=w, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 5


# ---- item 6c: exec failures ----

def test_not_executable_126_not_found_127():
    d = tputil.new_dir()
    prog = os.path.join(d, "train.sh")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(prog, 0o644)
    p, _ = tp(run_args("--", prog))
    assert p.returncode == 126, p.stderr
    assert ours(p.stderr) == [l for l in p.stderr.decode().splitlines()]
    assert len(ours(p.stderr)) == 1 and "Permission denied" in ours(p.stderr)[0]
    p, _ = tp(run_args("--", d))                        # a folder: 126, as in sh
    assert p.returncode == 126, p.stderr
    p, _ = tp(run_args("--", os.path.join(d, "missing")))
    assert p.returncode == 127 and len(ours(p.stderr)) == 1, p.stderr
    p, _ = tp(run_args("--", "no-such-command-tp27"))
    assert p.returncode == 127 and len(ours(p.stderr)) == 1, p.stderr


# ---- signals and exit: the job's own ----

def test_exit_and_signals_are_the_jobs():
    p, _ = tp(run_args("--", "sh", "-c", "echo out; exit 7"))
    assert p.returncode == 7 and p.stdout == b"out\n"
    p, _ = tp(run_args("--", "sh", "-c", "kill -TERM $$"))
    assert p.returncode == -signal.SIGTERM, p.stderr
    # a signal sent to the command reaches the job, which dies of it
    cwd = tputil.new_dir()
    q = subprocess.Popen([SCRIPT] + run_args("--", "sh", "-c",
                                             "trap 'echo got-term; exit 9' TERM; "
                                             "echo ready; while :; do sleep 0.05; done"),
                         cwd=cwd, env=env_of(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert q.stdout.readline() == b"ready\n"
    q.send_signal(signal.SIGTERM)
    out, err = q.communicate(timeout=30)
    assert q.returncode == 9 and out == b"got-term\n", (q.returncode, out, err)


# ---- item 6d: a CPU job says why no file was written ----

def test_cpu_job_says_why_nothing_was_written():
    """A plain Python loop (no CUDA call, no step) with every handler, at
    --log debug: the library never starts, so it says nothing; the command
    says it after the job, once, naming the handlers."""
    p, cwd = tp(run_args("--with-stack", "--handlers", "chrome,summary,stacks,memory",
                         "--log", "debug", "--", sys.executable, "-c", LOOP))
    assert p.returncode == 0 and p.stdout == b"49995000\n", p.stderr
    lines = ours(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "handlers chrome,summary,stacks,memory" in lines[0]
    assert "no process of the job made a CUDA call" in lines[0]
    assert tputil.files_under(cwd) == []
    # quiet means quiet
    p, _ = tp(run_args("--log", "quiet", "--", sys.executable, "-c", LOOP))
    assert p.returncode == 0 and p.stderr == b""


FAKE_TORCH = tputil.FAKE_TORCH_OPTIM


def fake_torch():
    d = tempfile.mkdtemp(prefix="tp-faketorch-")
    tputil.write_tree(d, FAKE_TORCH)
    return d


def test_cpu_steps_say_why_no_stacks_or_memory_file():
    """Optimizer steps on the CPU (the hook's trainprof_step() starts the
    library, no CUDA call): the trace is written, and the stacks and memory
    handlers each say once why they wrote no file."""
    script = "import torch\nopt = torch.optim.Optimizer()\nfor _ in range(6):\n    opt.step()\n"
    p, cwd = tp(run_args("--schedule", "all", "--with-stack",
                         "--handlers", "chrome,summary,stacks,memory",
                         "--", sys.executable, "-c", script), env={"PYTHONPATH": fake_torch()})
    assert p.returncode == 0, p.stderr
    assert len(glob.glob(os.path.join(cwd, "*", "traces", "*"))) == 1, tputil.files_under(cwd)
    lines = ours(p.stderr)
    stacks = [l for l in lines if l.startswith("trainprof: stacks: no stacks file for ")]
    memory = [l for l in lines if l.startswith("trainprof: memory: no memory report for ")]
    assert len(stacks) == 1 and "no intercepted call" in stacks[0], p.stderr
    assert len(memory) == 1 and "no device allocation" in memory[0], p.stderr
    assert not [l for l in lines if "nothing recorded" in l]
    # "stacks" listed without --with-stack: says that it is off
    p, _ = tp(run_args("--schedule", "all", "--handlers", "chrome,stacks",
                       "--", sys.executable, "-c", script), env={"PYTHONPATH": fake_torch()})
    stacks = [l for l in ours(p.stderr) if "stacks: no stacks file" in l]
    assert len(stacks) == 1 and "TRAINPROF_WITH_STACK is off" in stacks[0], p.stderr


# ---- item 6e: the Python hook did not load ----

def test_python_isolated_says_the_hook_did_not_load():
    script = "import torch\nopt = torch.optim.Optimizer()\nfor _ in range(6):\n    opt.step()\n" \
             "print('done')\nraise SystemExit(3)\n"
    ft = fake_torch()
    # -I ignores PYTHONPATH (so the hook), -I also the fake torch: put it on sys.path by hand
    code = "import sys; sys.path.insert(0, %r)\n" % ft + script
    plain = subprocess.run([sys.executable, "-I", "-c", code], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env_of(), timeout=60)
    p, cwd = tp(run_args("--", sys.executable, "-I", "-c", code))
    assert (p.returncode, p.stdout) == (plain.returncode, plain.stdout) == (3, b"done\n")
    lines = ours(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "the Python hook" in lines[0] and "loaded in no process" in lines[0]
    assert "-I" in lines[0]
    assert tputil.files_under(cwd) == []


def test_wrapper_script_says_to_turn_the_hook_on():
    d = tputil.new_dir()
    wrap = os.path.join(d, "train.sh")
    with open(wrap, "w") as f:
        f.write('#!/bin/bash\nexec "%s" -c "$@"\n' % sys.executable)
    os.chmod(wrap, 0o755)
    script = "import torch\nopt = torch.optim.Optimizer()\nfor _ in range(6):\n    opt.step()\n" \
             "print('done')\n"
    env = {"PYTHONPATH": fake_torch()}
    p, cwd = tp(run_args("--", wrap, script), env=env, cwd=d)
    assert p.returncode == 0 and p.stdout == b"done\n", p.stderr
    lines = ours(p.stderr)
    assert len(lines) == 1 and "--python-hook on" in lines[0] and "train.sh" in lines[0], p.stderr
    # and with it on, the steps are recorded and nothing more is said
    p, cwd = tp(run_args("--python-hook", "on", "--schedule", "all", "--", wrap, script),
                env=env, cwd=tputil.new_dir())
    assert p.returncode == 0 and p.stdout == b"done\n", p.stderr
    assert len(glob.glob(os.path.join(cwd, "*", "traces", "*"))) == 1, tputil.files_under(cwd)
    assert not [l for l in ours(p.stderr) if "nothing recorded" in l], p.stderr
