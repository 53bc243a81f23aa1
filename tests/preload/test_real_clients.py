"""Real software that nobody here wrote, under the preload.

Our fakes agree with our own code; these tests run what users run: the PyPI
PyTorch wheel (a CUDA build that runs on the CPU here, with its own
libcudart, cuBLAS, cuDNN, NCCL and libcupti, and no NVIDIA driver on the
machine) and the real CUDA libraries of /usr/local/cuda and of that wheel.
Each case runs with and without the library and compares stdout, exit status
and the files left behind.

- lookups: dlopen(RTLD_LOCAL) + dlsym of every function we wrap, in every
  real CUDA library, from C (tests/programs/dlsym_local.c) and from ctypes,
  enabled and disabled (this once recursed until the stack overflowed, even
  with TRAINPROF_ENABLED=0);
- CUDA calls that fail (no driver; also CUDA_VISIBLE_DEVICES=""): the
  process stays inert, no thread, no file, no line;
- torch's NVTX operator ranges (emit_nvtx's profiler state) on a CPU loop:
  inert (it used to load torch's libcupti, which recursed without a driver);
- `trainprof run` on a CPU training loop: a trace of the recorded steps and
  nothing else, no CUPTI probing without a driver;
- a DataLoader with two workers (the workers stay inert), forked and
  spawned (persistent across epochs);
- a 2-rank DistributedDataParallel job on gloo under torchrun: a trace
  per rank, each naming its rank;
- torch.compile of a small model on the CPU.

torch comes from tests/requirements-torch.txt (make check installs it into
the test venv).  Without torch the module fails, unless TP_TEST_NO_TORCH=1
says to skip it.
"""

import functools
import glob
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import tputil

if os.environ.get("TP_TEST_NO_TORCH") == "1":
    pytest.skip("TP_TEST_NO_TORCH=1", allow_module_level=True)

_TORCH = importlib.util.find_spec("torch")
assert _TORCH is not None, "torch is not installed in this venv (tests/requirements-torch.txt)"

CLIENT = os.path.join(tputil.ROOT, "tests", "programs", "torch_client.py")
TRAINPROF = os.path.join(tputil.ROOT, "scripts", "trainprof")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
WHEEL_NVIDIA = os.path.join(os.path.dirname(os.path.dirname(_TORCH.origin)), "nvidia")


def dlsym_local():
    return tputil.program("dlsym_local")


def count_lib():
    return os.path.join(tputil.build_dir(), "fakes", "libdlopen_count.so")


# ---- the libraries and the names we wrap in each ----------------------------

def exported(path):
    """Names of the functions a shared object defines (dynamic symbols)."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, check=True).stdout.decode()
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("T", "W", "i"):
            names.add(parts[2].split("@")[0])
    return names


_ours = None


def ours():
    """The functions libtrainprof.so exports, less our own API."""
    global _ours
    if _ours is None:
        _ours = {n for n in exported(tputil.lib_path())
                 if not n.startswith("trainprof_") and not n.startswith("nvtx")
                 and n not in ("dlsym", "InitializeInjectionNvtx2", "_init", "_fini")}
    return _ours


@functools.lru_cache(maxsize=None)
def wrapped_in(path):
    return sorted(exported(path) & ours())


def real_libraries():
    """(id, path) of every real CUDA library here that defines a function we
    wrap: CUDA's own (and its driver stub) and the torch wheel's."""
    names = ("libcudart.so.[0-9]*", "libcublas.so.[0-9]*", "libcublasLt.so.[0-9]*",
             "libcudnn*.so.[0-9]", "libnccl.so.[0-9]*")
    pats = [os.path.join(CUDA_HOME, "lib64", n) for n in names]
    pats.append(os.path.join(CUDA_HOME, "lib64", "stubs", "libcuda.so"))
    pats += [os.path.join(WHEEL_NVIDIA, "*", "lib", n) for n in names]
    seen, out = set(), []
    for pat in pats:
        for path in sorted(glob.glob(pat)):
            real = os.path.realpath(path)
            if real in seen or not os.path.isfile(real):
                continue
            seen.add(real)
            if not wrapped_in(path):
                continue        # cuDNN's engine libraries, for one
            origin = "wheel" if path.startswith(WHEEL_NVIDIA) else "cuda"
            out.append(("%s:%s" % (origin, os.path.basename(path)), path))
    return out


LIBS = real_libraries()


def test_real_libraries_found():
    """The wheel brings cudart, cuBLAS(Lt), cuDNN and NCCL: all must be found,
    or the lookup tests below would test nothing."""
    ids = {i for i, _ in LIBS}
    for want in ("libcudart.so", "libcublas.so", "libcublasLt.so", "libcudnn.so", "libnccl.so"):
        assert any(i.startswith("wheel:" + want) for i in ids), (want, sorted(ids))


# ---- lookups in RTLD_LOCAL libraries ------------------------------------------

def run_env(enabled):
    return tputil.base_env({"TRAINPROF_ENABLED": "1" if enabled else "0"})


def check_lookups(path, pairs, enabled):
    """pairs: [(name, object file)].  Disabled, every pointer is the library's
    own; enabled, our wrapper (for cuDNN's sub-libraries the real one is also
    right: the shim looks their functions up and must get them)."""
    me = os.path.realpath(tputil.lib_path())
    lib = os.path.realpath(path)
    assert pairs, "no lookups reported"
    for name, obj in pairs:
        assert obj not in ("-", "?"), (name, obj)
        where = os.path.realpath(obj)
        if not enabled:
            assert where == lib, (name, where)
        elif "libcudnn_" in os.path.basename(lib):
            assert where in (me, lib), (name, where)
        else:
            assert where == me, (name, where)


@pytest.mark.parametrize("enabled", [1, 0], ids=["enabled", "disabled"])
@pytest.mark.parametrize("lib", [p for _, p in LIBS], ids=[i for i, _ in LIBS])
def test_c_lookup_rtld_local(lib, enabled):
    names = wrapped_in(lib)
    p = subprocess.run([dlsym_local(), lib], input="\n".join(names).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=run_env(enabled), cwd=tputil.new_dir(), timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    lines = [l.split("\t") for l in p.stdout.decode().splitlines()]
    pairs = [(l[0], l[1]) for l in lines if l[0] != "threads"]
    assert sorted(n for n, _ in pairs) == names
    check_lookups(lib, pairs, enabled)
    assert p.stderr == b""


CTYPES_LOOKUP = r"""
import ctypes, os, sys
class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
dladdr = ctypes.CDLL(None).dladdr
dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
lib = ctypes.CDLL(sys.argv[1])          # RTLD_LOCAL, as ctypes always does
for name in sys.stdin.read().split():
    fn = getattr(lib, name)
    info = DlInfo()
    addr = ctypes.cast(fn, ctypes.c_void_p).value
    ok = dladdr(addr, ctypes.byref(info))
    print("%s\t%s" % (name, info.fname.decode() if ok and info.fname else "?"))
"""


@pytest.mark.parametrize("enabled", [1, 0], ids=["enabled", "disabled"])
@pytest.mark.parametrize("lib", [p for _, p in LIBS], ids=[i for i, _ in LIBS])
def test_ctypes_lookup(lib, enabled):
    names = wrapped_in(lib)
    p = subprocess.run([sys.executable, "-c", CTYPES_LOOKUP, lib], input=" ".join(names).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=run_env(enabled), cwd=tputil.new_dir(), timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    pairs = [tuple(l.split("\t")) for l in p.stdout.decode().splitlines()]
    assert sorted(n for n, _ in pairs) == names
    check_lookups(lib, pairs, enabled)


def test_issue_ctypes_one_liner():
    """The reproducer from the issue, verbatim in spirit, for every wrapped
    library of the wheel: exit 0 with and without TRAINPROF_ENABLED=0."""
    for _, lib in LIBS:
        names = wrapped_in(lib)
        if not names or not lib.startswith(WHEEL_NVIDIA):
            continue
        code = "import ctypes; ctypes.CDLL(%r).%s" % (lib, names[0])
        for enabled in (1, 0):
            p = subprocess.run([sys.executable, "-c", code], env=run_env(enabled),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            assert p.returncode == 0, (lib, enabled, p.returncode, p.stderr[-1000:])


# ---- workloads: with and without the library ------------------------------------

def listing(d):
    """Every file under d, relative."""
    out = []
    for root, _, files in os.walk(d):
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f), d))
    return sorted(out)


def client(mode, preload=True, via_cli=False, env=None, spy=False, timeout=300, launcher=(),
           run_args=()):
    """Run torch_client.py MODE in a fresh folder: (CompletedProcess, folder,
    seconds).  via_cli runs it through `trainprof run` (which puts our
    library first in LD_PRELOAD, after a sanitizer runtime), with the
    options run_args; spy preloads the dlopen counter after our library."""
    cwd = tputil.new_dir()
    direct = preload and not via_cli
    e = tputil.base_env(dict({"TRAINPROF_SYS": None, "PYTHONDONTWRITEBYTECODE": "1",
                              "TORCHINDUCTOR_CACHE_DIR": os.path.join(cwd, ".inductor"),
                              "TRITON_CACHE_DIR": os.path.join(cwd, ".triton")}, **(env or {})),
                        preload=direct)
    pre = [tputil.preload_value()] if direct else []
    if via_cli and os.environ.get("TP_TEST_ASAN"):
        pre.append(os.environ["TP_TEST_ASAN"])
    if spy:
        pre.append(count_lib())
    if pre:
        e["LD_PRELOAD"] = " ".join(pre)
    cmd = [sys.executable] + list(launcher) + [CLIENT, mode]
    if via_cli:
        cmd = [sys.executable, TRAINPROF, "run", "--lib", tputil.lib_path()] + list(run_args) + ["--"] + cmd
    t = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p, cwd, time.monotonic() - t


def client_threads(stderr):
    """[(tag, pid, [thread names])] from the client's stderr."""
    out = []
    for line in stderr.decode(errors="replace").splitlines():
        m = re.match(r"^client-threads (\w+) (\d+) (.*)$", line)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3).split(",")))
    return out


def our_lines(stderr):
    return [l for l in stderr.decode(errors="replace").splitlines() if l.startswith("trainprof")]


def ours_started(stderr):
    return [t for _, _, names in client_threads(stderr) for t in names if t.startswith("tp-")]


def user_files(cwd):
    return [f for f in listing(cwd) if not f.startswith((".inductor", ".triton"))]


_plain = {}


def plain(mode):
    """The run without the library, once per mode."""
    if mode not in _plain:
        p, cwd, secs = client(mode, preload=False)
        assert p.returncode == 0, p.stderr[-3000:]
        assert user_files(cwd) == []
        _plain[mode] = (p, secs)
    return _plain[mode]


@pytest.mark.parametrize("env", [{}, {"CUDA_VISIBLE_DEVICES": ""}], ids=["default", "no-visible-devices"])
def test_failing_cuda_calls_leave_process_inert(env):
    """No driver: torch's device query, a torch allocation on "cuda" and
    cudaMalloc/cudaDeviceSynchronize through ctypes all fail (35).  A failed
    call does not activate: no helper thread, no file, no line of ours."""
    base, _ = plain("cuda")
    assert b"cudaMalloc: 35" in base.stdout, base.stdout
    p, cwd, _ = client("cuda", env=env)
    assert p.returncode == base.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    assert ours_started(p.stderr) == []
    assert our_lines(p.stderr) == []
    assert user_files(cwd) == []


def test_failing_calls_from_c_leave_process_inert():
    """The same from C, through the real runtime opened RTLD_LOCAL: our
    wrapper is handed out, it calls the real cudaMalloc, returns its 35, and
    nothing starts."""
    for _, lib in LIBS:
        if "libcudart.so" not in lib:
            continue
        outs = []
        for preload in (True, False):
            e = tputil.base_env(preload=preload)
            p = subprocess.run([dlsym_local(), lib, "call"], input=b"cudaMalloc\n",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                               cwd=tputil.new_dir(), timeout=60)
            assert p.returncode == 0, p.stderr
            lines = dict(l.split("\t", 1) for l in p.stdout.decode().splitlines())
            assert lines["threads"] == "dlsym_local", (preload, lines["threads"])
            assert p.stderr == b""
            outs.append(lines["cudaMalloc"])
            if preload:
                lookup = [l for l in p.stdout.decode().splitlines() if l.startswith("cudaMalloc\t/")]
                assert os.path.realpath(lookup[0].split("\t")[1]) == os.path.realpath(tputil.lib_path())
        assert outs[0] == outs[1] == "35", (lib, outs)


def failed_driver_probes(stderr):
    m = re.search(rb"dlopen_count: libcuda failed (\d+) noload_failed (\d+)", stderr)
    assert m, stderr[-2000:]
    return int(m.group(1)), int(m.group(2))


def test_nvtx_ranges_on_cpu_stay_inert():
    """torch's NVTX operator ranges on a CPU loop: NVTX never activates the
    profiler, so nothing starts, CUPTI is never touched (it recursed to a
    stack overflow without a driver), and no dlopen of libcuda is added."""
    base, base_s = plain("nvtx")
    p, cwd, secs = client("nvtx", spy=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    assert ours_started(p.stderr) == []
    assert our_lines(p.stderr) == []
    assert user_files(cwd) == []
    q, _, _ = client("nvtx", preload=False, spy=True)
    assert failed_driver_probes(p.stderr) == failed_driver_probes(q.stderr)
    sys.stderr.write("nvtx loop: %.2f s with the library, %.2f s without\n" % (secs, base_s))


def check_cli_trace(cwd, first_step=1, last_step=4):
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    assert not any(f.endswith(".tmp") for f in listing(cwd))
    t = tputil.load_trace(traces[0])
    assert tputil.steps(t) == list(range(first_step, last_step + 1))
    assert t["trainprof"]["step_signal"] == "api"
    return t


def test_trainprof_run_cpu_training_loop():
    """`trainprof run` on a CPU loop: same stdout and status; one trace of
    steps 1-4 (the default schedule) and its summary, nothing else; CUPTI not
    started (no driver) and no warning; our failed probes of libcuda stay
    few (each is retried only after the loader added objects)."""
    base, _ = plain("train")
    p, cwd, _ = client("train", via_cli=True, spy=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    t = check_cli_trace(cwd)
    assert t["trainprof"]["gpu_activity"].startswith("not started"), t["trainprof"]
    # no CUPTI thread where there is no driver: only tp-flush and the sampler,
    # and tp-gzip when the spy looked while a trace was being compressed (it
    # lives for one file's write)
    main = [names for tag, _, names in client_threads(p.stderr) if tag == "main"]
    assert len(main) == 1, main
    ours = sorted(n for n in main[0] if n.startswith("tp-") and n != "tp-gzip")
    assert ours == ["tp-flush", "tp-sys"], main
    files = user_files(cwd)
    assert all(f.split(os.sep)[1] in ("traces", "reports") for f in files), files
    assert [l for l in our_lines(p.stderr) if "warning" in l or "error" in l] == []
    q, _, _ = client("train", preload=False, spy=True)
    with_lib, without = failed_driver_probes(p.stderr), failed_driver_probes(q.stderr)
    assert with_lib[0] == without[0]               # we never dlopen libcuda to load it
    assert with_lib[1] - without[1] <= 20, (with_lib, without)


def test_dataloader_workers_inert():
    """DataLoader with num_workers=2 under `trainprof run`: same stdout; the
    workers start no thread of ours and write nothing; one trace (the main
    process's)."""
    base, _ = plain("dataloader")
    p, cwd, _ = client("dataloader", via_cli=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    th = client_threads(p.stderr)
    workers = [t for t in th if t[0] == "worker"]
    assert len(workers) == 2, th
    for _, pid, names in workers:
        assert not [n for n in names if n.startswith("tp-")], (pid, names)
    check_cli_trace(cwd)


def test_dataloader_spawned_workers_inert():
    """DataLoader workers started by spawn (fresh interpreters that import
    the hook and load the library, but never use CUDA), kept across two
    epochs: same stdout; no thread of ours in a worker; one trace."""
    base, _ = plain("spawn")
    p, cwd, _ = client("spawn", via_cli=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    workers = [t for t in client_threads(p.stderr) if t[0] == "worker"]
    assert len(workers) == 2, client_threads(p.stderr)
    for _, pid, names in workers:
        assert not [n for n in names if n.startswith("tp-")], (pid, names)
    check_cli_trace(cwd)


TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def test_torchrun_gloo_two_ranks():
    """A 2-rank DDP job on gloo under torchrun, through `trainprof run`:
    same stdout and status as without it; one trace per rank, each with
    its rank in the name and in distributedInfo, steps 1-4; the torchrun
    agent (no CUDA) writes nothing."""
    env = {"OMP_NUM_THREADS": "1"}
    base, _, _ = client("ddp", preload=False, env=env, launcher=TORCHRUN)
    assert base.returncode == 0, base.stderr[-3000:]
    p, cwd, _ = client("ddp", via_cli=True, env=env, launcher=TORCHRUN)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout and p.stdout.count(b"loss") == 10
    traces = sorted(glob.glob(os.path.join(cwd, "*", "traces", "*")))
    assert [os.path.basename(t).split(".")[0] for t in traces] == ["rank0", "rank1"], listing(cwd)
    for rank, path in enumerate(traces):
        t = tputil.load_trace(path)
        assert t["distributedInfo"]["rank"] == rank
        assert t["distributedInfo"]["world_size"] == 2
        assert t["distributedInfo"]["backend"] == "gloo"    # the hook's report, not "nccl"
        assert tputil.steps(t) == [1, 2, 3, 4]
    assert [l for l in our_lines(p.stderr) if "error" in l] == []


def test_torch_compile_on_cpu():
    """torch.compile (inductor compiles C++ in subprocesses) under `trainprof
    run`: same result as without the library."""
    base, base_s = plain("compile")
    assert b"compiled matches eager: True" in base.stdout
    if base_s > 60:
        pytest.skip("torch.compile took %.0f s here without the library (over a minute)" % base_s)
    p, cwd, secs = client("compile", via_cli=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    assert [l for l in our_lines(p.stderr) if "error" in l] == []
    sys.stderr.write("torch.compile: %.1f s with the library, %.1f s without\n" % (secs, base_s))


@pytest.mark.parametrize("via_cli", [False, True], ids=["preload", "trainprof-run"])
def test_ctrl_c_saves_the_window_caught_or_not(via_cli):
    """SIGINT in step 2 of a window, as Ctrl-C delivers it: CPython raises
    KeyboardInterrupt.  Uncaught, it ends by resetting SIGINT to its default
    and killing itself with it (no C exit handler runs), and the exit status
    says SIGINT; caught, the program exits normally.  Both save the window
    (steps 1-2, partial: "SIGINT", then "exit"), and the exit status and
    stdout are the program's own."""
    for mode, reason in (("sigint", "SIGINT"), ("sigint-caught", "exit")):
        cwd = tputil.new_dir()
        e = tputil.base_env({"TRAINPROF_SYS": None, "PYTHONDONTWRITEBYTECODE": "1"},
                            preload=not via_cli)
        cmd = [sys.executable, CLIENT, mode]
        if via_cli:
            cmd = [sys.executable, TRAINPROF, "run", "--lib", tputil.lib_path(), "--"] + cmd
            if os.environ.get("TP_TEST_ASAN"):
                e["LD_PRELOAD"] = os.environ["TP_TEST_ASAN"]
        runs = []
        for preload in (True, False):
            env = dict(e) if preload else tputil.base_env({}, preload=False)
            c = cmd if preload or not via_cli else [sys.executable, CLIENT, mode]
            # a test run in the background may hand its children SIGINT
            # ignored, and CPython then installs no handler of its own
            runs.append(subprocess.run(c, cwd=cwd if preload else tputil.new_dir(), env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       stdin=subprocess.DEVNULL, timeout=300,
                                       preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                        signal.SIG_DFL)))
        p, plain = runs
        assert p.returncode == plain.returncode and p.stdout == plain.stdout, \
            (mode, p.returncode, p.stderr)
        assert plain.returncode == (-signal.SIGINT if mode == "sigint" else 0), plain.stderr
        traces = tputil.find_traces(cwd)
        assert len(traces) == 1, (mode, traces, p.stderr)
        t = tputil.load_trace(traces[0])["trainprof"]
        assert t["partial"] is True and t["partial_reason"] == reason, (mode, t)
        assert (t["first_step"], t["last_step"]) == (1, 2), (mode, t)


@pytest.mark.parametrize("mode", ["mpspawn", "lightning"])
def test_ranks_learned_from_the_process_group(mode):
    """torch.multiprocessing.spawn and Lightning's "ddp" start their ranks
    with no RANK variable (Lightning gives rank 1 LOCAL_RANK and WORLD_SIZE,
    rank 0 nothing): both processes were rank 0, the second's files
    rank0.N-1.  The process group each creates says its rank: the files are
    rank0 and rank1, each summary.json says its rank of 2, and `trainprof
    summary` shows one window per rank."""
    p, cwd, _ = client(mode, via_cli=True, timeout=300)
    assert p.returncode == 0, p.stderr
    traces = sorted(os.path.basename(t) for t in tputil.find_traces(cwd))
    assert traces == ["rank0.00000005.pt.trace.json.gz", "rank1.00000005.pt.trace.json.gz"], \
        (traces, p.stderr)
    found = sorted(glob.glob(os.path.join(cwd, "*", "reports", "rank*.summary.json")))
    assert len(found) == 2, found
    for rank, path in enumerate(found):
        with open(path) as f:
            s = json.load(f)
        assert (s["rank"], s["world_size"]) == (rank, 2), (path, s["rank"], s["world_size"])
        t = tputil.load_trace(os.path.join(os.path.dirname(os.path.dirname(path)), "traces",
                                           traces[rank]))
        assert t["distributedInfo"]["rank"] == rank and t["distributedInfo"]["world_size"] == 2
    run = os.path.dirname(os.path.dirname(found[0]))
    r = subprocess.run([sys.executable, TRAINPROF, "summary", run], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=tputil.base_env(preload=False), timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 0 and "2 ranks (world size 2)" in out and "2 windows" in out, out
