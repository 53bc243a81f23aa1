"""scripts/trainprof: `run` preloads the library, maps options to
TRAINPROF_* variables and, for Python commands, installs the optimizer-step
hook (scripts/trainprof_cli/pyhook/sitecustomize.py)."""

import os
import subprocess
import sys
import tempfile

import tputil

SCRIPT = os.path.join(tputil.ROOT, "scripts", "trainprof")
PYHOOK = os.path.join(tputil.CLI_PKG, "pyhook")
PLAIN_LINE = b"nvtx_ranges: 5 steps, checksum 2611200\n"


def cli(args, env=None, cwd=None, timeout=60):
    """Run scripts/trainprof with a clean environment: no TRAINPROF_*, and
    LD_PRELOAD holding only the ASan runtime when the tests run sanitized."""
    e = tputil.base_env(env, preload=False)
    asan = os.environ.get("TP_TEST_ASAN")
    if asan:
        e["LD_PRELOAD"] = asan
    if cwd is None:
        cwd = tempfile.mkdtemp(prefix="tp-cli-")
    p = subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], cwd=cwd, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p, cwd


def test_executable():
    assert os.access(SCRIPT, os.X_OK)
    with open(SCRIPT, "rb") as f:
        assert f.readline().startswith(b"#!/usr/bin/env -S python3 ")    # isolated: test_run_edges


def test_help():
    p, _ = cli(["--help"])
    assert p.returncode == 0
    out = p.stdout.decode()
    for word in ("run", "summary", "merge"):
        assert word in out
    assert p.stderr == b""


def test_run_help_documents_options():
    p, _ = cli(["run", "--help"])
    assert p.returncode == 0
    out = p.stdout.decode()
    for opt, var in (("--schedule", "TRAINPROF_SCHEDULE"), ("--step-on", "TRAINPROF_STEP_ON"),
                     ("--out", "TRAINPROF_FOLDER"), ("--run-name", "TRAINPROF_RUN_NAME"),
                     ("--handlers", "TRAINPROF_HANDLERS"), ("--ranks", "TRAINPROF_RANKS"),
                     ("--record-shapes", "TRAINPROF_RECORD_SHAPES"),
                     ("--with-stack", "TRAINPROF_WITH_STACK"), ("--log", "TRAINPROF_LOG"),
                     ("--hang", "TRAINPROF_HANG_S")):
        assert opt in out and var in out, opt


def test_unknown_command_and_missing_command():
    p, _ = cli(["frobnicate"])
    assert p.returncode == 2 and p.stderr.startswith(b"trainprof: error:")
    p, _ = cli(["run"])
    assert p.returncode == 2


def dry_run(args):
    p, _ = cli(["run", "--dry-run"] + args)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode().splitlines()
    env = dict(l.split("=", 1) for l in lines[:-1])
    return env, lines[-1]


def test_dry_run_maps_options():
    env, cmd = dry_run(["--lib", tputil.lib_path(), "--schedule", "all", "--step-on", "api",
                        "--out", "tr/{rank}", "--run-name", "r1", "--record-shapes",
                        "--with-stack", "--no-gzip", "--log", "debug", "--ranks", "0-3",
                        "--", "./train", "--lr", "0.1"])
    assert env["TRAINPROF_SCHEDULE"] == "all"
    assert env["TRAINPROF_STEP_ON"] == "api"
    assert env["TRAINPROF_FOLDER"] == "tr/{rank}"
    assert env["TRAINPROF_RUN_NAME"] == "r1"
    assert env["TRAINPROF_RECORD_SHAPES"] == "1"
    assert env["TRAINPROF_WITH_STACK"] == "1"
    assert env["TRAINPROF_GZIP"] == "0"
    assert env["TRAINPROF_LOG"] == "debug"
    assert env["TRAINPROF_RANKS"] == "0-3"
    assert "TRAINPROF_HANDLERS" not in env          # untouched unless given
    assert os.path.realpath(tputil.lib_path()) in env["LD_PRELOAD"].split(":")
    assert "PYTHONPATH" not in env                  # not a Python command
    assert cmd == "exec ./train --lr 0.1"


def test_dry_run_finds_checkout_library():
    if not os.path.isfile(os.path.join(tputil.ROOT, "build", "libtrainprof.so")):
        p, _ = cli(["run", "--dry-run", "--", "true"])
        assert p.returncode == 2 and b"libtrainprof.so" in p.stderr
        return
    env, _ = dry_run(["--", "true"])
    lib = os.path.realpath(os.path.join(tputil.ROOT, "build", "libtrainprof.so"))
    assert lib in env["LD_PRELOAD"].split(":")


def test_dry_run_python_hook():
    for cmd in (["python3", "train.py"], ["torchrun", "--nproc-per-node", "2", "t.py"],
                ["./train.py"], ["/usr/bin/python3.11", "-m", "x"]):
        env, _ = dry_run(["--lib", tputil.lib_path(), "--"] + cmd)
        assert env["PYTHONPATH"].split(os.pathsep)[0] == os.path.realpath(PYHOOK), cmd
    env, _ = dry_run(["--lib", tputil.lib_path(), "--python-hook", "off", "--", "python3"])
    assert "PYTHONPATH" not in env


def test_run_writes_trace():
    prog = tputil.program("nvtx_ranges")
    p, cwd = cli(["run", "--lib", tputil.lib_path(), "--schedule", "all",
                  "--run-name", "cli", "--", prog])
    assert p.returncode == 0, p.stderr
    assert p.stdout == PLAIN_LINE
    traces = tputil.find_traces(cwd, "cli")
    assert len(traces) == 1, (os.listdir(cwd), p.stderr)
    trace = tputil.load_trace(traces[0])
    assert tputil.steps(trace) == list(range(5))


def test_run_out_option():
    prog = tputil.program("nvtx_ranges")
    p, cwd = cli(["run", "--lib", tputil.lib_path(), "--schedule", "all",
                  "--out", "mytraces", "--", prog])
    assert p.returncode == 0, p.stderr
    d = os.path.join(cwd, "mytraces")
    assert os.path.isdir(d) and any(f.endswith(".json.gz") for f in os.listdir(d))


def test_run_exit_status_and_missing_command():
    p, _ = cli(["run", "--lib", tputil.lib_path(), "--", "sh", "-c", "exit 7"])
    assert p.returncode == 7
    p, _ = cli(["run", "--lib", tputil.lib_path(), "--", "/nonexistent/prog"])
    assert p.returncode == 127 and p.stderr.startswith(b"trainprof: error:")


FAKE_TORCH = tputil.FAKE_TORCH_OPTIM


_write_tree = tputil.write_tree


def test_python_hook_counts_optimizer_steps():
    # A fake torch exposing register_optimizer_step_post_hook: three
    # optimizer steps must become three api steps in the trace.
    cwd = tempfile.mkdtemp(prefix="tp-cli-py-")
    _write_tree(os.path.join(cwd, "site"), FAKE_TORCH)
    script = "import torch\nopt = torch.optim.Optimizer()\nfor _ in range(3):\n    opt.step()\nprint('done')\n"
    p, _ = cli(["run", "--lib", tputil.lib_path(), "--schedule", "all", "--run-name", "py",
                "--", sys.executable, "-c", script],
               env={"PYTHONPATH": os.path.join(cwd, "site")}, cwd=cwd)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"done\n"
    traces = tputil.find_traces(cwd, "py")
    assert len(traces) == 1, (p.stderr, os.listdir(cwd))
    assert tputil.steps(tputil.load_trace(traces[0])) == [0, 1, 2]


def _python(code, pythonpath, env=None):
    e = tputil.base_env(env, preload=False)
    e["PYTHONPATH"] = os.pathsep.join(pythonpath)
    return subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60)


def test_sitecustomize_chains_and_stays_silent():
    d = tempfile.mkdtemp(prefix="tp-site-")
    _write_tree(d, {"other/sitecustomize.py": "import os\nos.environ['TP_OTHER_SITE'] = '1'\n"})
    p = _python("import os; print(os.environ.get('TP_OTHER_SITE'))",
                [PYHOOK, os.path.join(d, "other")])
    assert p.returncode == 0 and p.stdout == b"1\n" and p.stderr == b""
    # a broken sitecustomize behind ours, and no library: silent, no effect
    _write_tree(d, {"broken/sitecustomize.py": "raise RuntimeError('boom')\n"})
    _write_tree(os.path.join(d, "site"), FAKE_TORCH)
    p = _python("import torch\ntorch.optim.Optimizer().step()\nprint('ok')",
                [PYHOOK, os.path.join(d, "site"), os.path.join(d, "broken")])
    assert p.returncode == 0 and p.stdout == b"ok\n" and p.stderr == b"", p.stderr


def test_sitecustomize_does_not_import_torch():
    d = tempfile.mkdtemp(prefix="tp-site-")
    _write_tree(os.path.join(d, "site"), FAKE_TORCH)
    p = _python("import sys; print('torch' in sys.modules)", [PYHOOK, os.path.join(d, "site")])
    assert p.returncode == 0 and p.stdout == b"False\n"
