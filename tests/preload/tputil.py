"""Helpers for the preload tests: run a test program under LD_PRELOAD and read
the traces it leaves.

Every run happens in a fresh temporary directory with TRAINPROF_RUN_NAME=test
and TRAINPROF_SYS=none (overridable), so traces land in <cwd>/test/traces/ and
reports in <cwd>/test/reports/.  Traces are checked by parsing them, never by
comparing text.

TP_TEST_RUNNER, when set, is a command line that every program run() starts
is run through (`make check-arm64`: qemu-aarch64-static, for aarch64
programs and library built into TP_TEST_BUILD=build/arm64); the program
sees the same environment, LD_PRELOAD included (a static qemu has no loader
of its own to take it).  Tests that cannot work through such a runner skip
with need_native().
"""

import collections
import gzip
import json
import atexit
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

class Result(collections.namedtuple("Result", "rc stdout stderr traces")):
    """rc, stdout, stderr (bytes), traces (sorted paths); .cwd is the run's
    directory."""
    cwd = None

LAUNCH_APIS = frozenset((
    "cudaLaunchKernel", "cudaLaunchKernel_ptsz",
    "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz",
    "cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz",
    "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz",
))

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

# the start-up line each recording process writes at info level
# (collector/config/config.h tp_config_announce)
STARTUP_RE = re.compile(r"^trainprof: rank \d+: schedule \S+: .*; step signals \S+$")


def not_startup(lines):
    """The lines of "lines" other than start-up lines."""
    return [l for l in lines if not STARTUP_RE.match(l)]


def build_dir():
    """The build folder under test: $TP_TEST_BUILD or build (relative to the repo)."""
    b = os.environ.get("TP_TEST_BUILD", "build")
    return b if os.path.isabs(b) else os.path.join(ROOT, b)


def lib_path():
    return os.path.join(build_dir(), "libtrainprof.so")


def program(name):
    """Absolute path of a test program; an absolute path is returned as is."""
    if os.path.isabs(name):
        return name
    return os.path.join(build_dir(), "programs", name)


def runner():
    """The TP_TEST_RUNNER command line as a list ([] when unset)."""
    return shlex.split(os.environ.get("TP_TEST_RUNNER", ""))


def need_native(why):
    """Skip the calling test, saying why, when programs run through
    TP_TEST_RUNNER (an emulator): for tests that start programs without
    run(), or need what user-mode emulation lacks (ptrace, perf counters,
    valgrind, exec of a foreign binary without binfmt)."""
    if runner():
        import pytest
        pytest.skip("not under TP_TEST_RUNNER=%s: %s" % (os.environ["TP_TEST_RUNNER"], why))


def _is_x86_64_elf(path):
    """Whether "path" is an x86-64 ELF object (e_machine 62)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 62


def preload_value():
    """The LD_PRELOAD value: the ASan runtime first when TP_TEST_ASAN is set."""
    parts = []
    asan = os.environ.get("TP_TEST_ASAN")
    if asan:
        parts.append(asan)
    parts.append(lib_path())
    return " ".join(parts)


def base_env(env=None, preload=True):
    """The environment of a run: ours minus any TRAINPROF_*/NVTX/LD_PRELOAD
    inherited from the caller, the test defaults, then `env` (a value of None
    removes a variable)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("TRAINPROF_") and k not in
         ("LD_PRELOAD", "NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH", "INTEL_LIBITTNOTIFY64",
          "RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")}
    e["TRAINPROF_RUN_NAME"] = "test"
    e["TRAINPROF_SYS"] = "none"
    if preload:
        e["LD_PRELOAD"] = preload_value()
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


_tmp_root = None


def new_dir():
    """A fresh directory for one run, under a root removed when this Python
    process exits (kept when TP_TEST_KEEP is set, for inspection)."""
    global _tmp_root
    if _tmp_root is None:
        _tmp_root = tempfile.mkdtemp(prefix="tp-test-")
        if not os.environ.get("TP_TEST_KEEP"):
            atexit.register(shutil.rmtree, _tmp_root, True)
    # resolved: the library prints the paths it writes as getcwd() gives them
    return os.path.realpath(tempfile.mkdtemp(dir=_tmp_root))


def tmp_host():
    """This host's name as the library writes it into temporary names
    (README, "Files trainprof creates")."""
    import socket
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()[:32]) or "_"


def files_under(root):
    """Every file under root, relative and sorted, links marked " -> link"."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out.append(os.path.relpath(p, root) + (" -> link" if os.path.islink(p) else ""))
    return sorted(out)


def find_traces(cwd, run_name="test"):
    d = os.path.join(cwd, run_name, "traces")
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if not f.endswith(".tmp"))


def def_entries(*names):
    """name -> line of every entry point of the X-macro files collector/record/apis/<names>
    (TP_FN, TP_LIB_FN, TP_DRV_FN lines), in file order."""
    out = {}
    for n in names:
        with open(os.path.join(ROOT, "collector", "record", "apis", n)) as f:
            for line in f:
                m = re.match(r"^TP_\w*FN\(\s*[^,]+,\s*(\w+)\s*,", line)
                if m:
                    out[m.group(1)] = line
    return out


def run(prog, args=(), env=None, preload=True, cwd=None, timeout=60, stdin=None):
    """Run build/programs/<prog> (or an absolute path) with `args`.

    preload=False runs the program without the library (same environment
    otherwise).  cwd defaults to a fresh directory from new_dir().  Returns Result(rc, stdout, stderr,
    traces): stdout/stderr as bytes, traces the sorted paths of files in
    <cwd>/<run_name>/traces/; .cwd is the directory it ran in.
    """
    if cwd is None:
        cwd = new_dir()
    if runner() and _is_x86_64_elf(program(prog)):
        # the test venv's Python (torch's client) is the host's: our aarch64
        # library cannot be preloaded into it
        need_native("runs %s, an x86-64 program, with the library preloaded" % prog)
    e = base_env(env, preload)
    p = subprocess.run(runner() + [program(prog)] + [str(a) for a in args], cwd=cwd, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL if stdin is None else stdin,
                       timeout=timeout)
    run_name = e.get("TRAINPROF_RUN_NAME", "test")
    res = Result(p.returncode, p.stdout, p.stderr, find_traces(cwd, run_name))
    res.cwd = cwd
    return res


def run_beside_plain(prog, env, args=()):
    """Run "prog" without and with the library: both succeed, stdout is the
    same, one trace is written.  Returns (the preloaded Result, its trace)."""
    plain = run(prog, args, preload=False)
    r = run(prog, args, env=env)
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    assert len(r.traces) == 1, r.traces
    return r, load_trace(r.traces[0])


def read_raw(path):
    """The text of a trace, gunzipped if it is gzip (by magic, not by name)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def load_trace(path):
    """Parse a trace (gzip or plain JSON) into a dict, keeping key order."""
    return json.loads(read_raw(path), object_pairs_hook=collections.OrderedDict)


def events(trace, ph=None, cat=None, name=None):
    """Events of a parsed trace, filtered by ph, cat and name when given."""
    out = []
    for ev in trace.get("traceEvents", []):
        if ph is not None and ev.get("ph") != ph:
            continue
        if cat is not None and ev.get("cat") != cat:
            continue
        if name is not None and ev.get("name") != name:
            continue
        out.append(ev)
    return out


def steps(trace):
    """Sorted ProfilerStep numbers of a parsed trace."""
    out = []
    for ev in events(trace, ph="X"):
        m = STEP_RE.match(ev.get("name", ""))
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def launches(trace):
    """cuda_runtime X events of the launch entry points."""
    return [ev for ev in events(trace, ph="X", cat="cuda_runtime")
            if ev.get("name") in LAUNCH_APIS]


def launches_per_step(trace):
    """{step: number of launch events inside that ProfilerStep's interval}
    (same pid; any thread)."""
    st = [(int(STEP_RE.match(ev["name"]).group(1)), ev)
          for ev in events(trace, ph="X") if STEP_RE.match(ev.get("name", ""))]
    out = {n: 0 for n, _ in st}
    for la in launches(trace):
        for n, ev in st:
            if ev["pid"] == la["pid"] and ev["ts"] <= la["ts"] and \
                    la["ts"] + la["dur"] <= ev["ts"] + ev["dur"] + 1e-3:
                out[n] += 1
                break
    return out


def trace_batch(path):
    """The {batch} number in a default-named trace file, rank{r}.{batch:08d}.pt.trace.json.gz."""
    m = re.match(r"^rank(\d+)\.(\d+)\.pt\.trace\.json(\.gz)?$", os.path.basename(path))
    return int(m.group(2)) if m else None


# ---- an independent implementation of torch.profiler.schedule ------------

NONE, WARMUP, RECORD, RECORD_AND_SAVE = "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"


def schedule_fn(step, wait=0, warmup=1, active=4, repeat=1, skip_first=0):
    if step < skip_first:
        return NONE
    step -= skip_first
    n = wait + warmup + active
    if repeat > 0 and step / n >= repeat:
        return NONE
    m = step % n
    if m < wait:
        return NONE
    if m < wait + warmup:
        return WARMUP
    return RECORD if m < n - 1 else RECORD_AND_SAVE


def parse_schedule(text):
    """TRAINPROF_SCHEDULE text -> kwargs for schedule_fn, or None for `all`."""
    kw = dict(wait=0, warmup=1, active=4, repeat=1, skip_first=0)
    if text is None or text == "":
        return kw
    if text.strip() == "all":
        return None
    for item in text.split(","):
        k, v = item.split("=")
        kw[k.strip()] = int(v)
    return kw


def expected_windows(schedule_text, nsteps):
    """[(batch, [step numbers], partial)] that the schedule saves over a run of
    `nsteps` steps that then exits normally.  A window still open at exit
    (the step after the last signal is a recording one) is saved then, with
    batch = nsteps and partial = True.  Choose runs whose last recorded step
    is complete: an exit-time window made only of the unfinished step is not
    modelled."""
    kw = parse_schedule(schedule_text)
    if kw is None:
        return [(nsteps, list(range(nsteps)), True)] if nsteps else []
    out, cur = [], []
    for s in range(nsteps):
        a = schedule_fn(s, **kw)
        if a in (RECORD, RECORD_AND_SAVE):
            cur.append(s)
        if a == RECORD_AND_SAVE:
            out.append((s + 1, cur, False))
            cur = []
    if cur:
        assert schedule_fn(nsteps, **kw) in (RECORD, RECORD_AND_SAVE)
        out.append((nsteps, cur, True))
    return out


def exit_step_records(schedule_text, nsteps):
    """Whether the unfinished step after the last signal is a recording one."""
    kw = parse_schedule(schedule_text)
    return kw is None or schedule_fn(nsteps, **kw) in (RECORD, RECORD_AND_SAVE)


def cpu_ops_by_step(trace):
    """{step: [cpu_op events inside it, in time order]}; asserts that every
    cpu_op lies in exactly one ProfilerStep."""
    st = [(int(STEP_RE.match(ev["name"]).group(1)), ev)
          for ev in events(trace, ph="X") if STEP_RE.match(ev.get("name", ""))]
    out = {n: [] for n, _ in st}
    for ev in sorted(events(trace, ph="X", cat="cpu_op"), key=lambda e: e["ts"]):
        inside = [n for n, s in st if s["ts"] <= ev["ts"] and
                  ev["ts"] + ev["dur"] <= s["ts"] + s["dur"] + 1e-3]
        assert len(inside) == 1, ev
        out[inside[0]].append(ev)
    return out


# ---- the trainprof command (scripts/trainprof and its package) ----------------

SCRIPTS = os.path.join(ROOT, "scripts")
CLI = os.path.join(SCRIPTS, "trainprof")
CLI_PKG = os.path.join(SCRIPTS, "trainprof_cli")


def cli_modules():
    """{name: path} of the command's modules in scripts/trainprof_cli: its
    .py files and its subpackages (merge/__init__.py), the package's own
    __init__.py and the pyhook (not a module of the package) left out."""
    out = {}
    for name in sorted(os.listdir(CLI_PKG)):
        path = os.path.join(CLI_PKG, name)
        if name.endswith(".py") and name != "__init__.py":
            out[name[:-3]] = path
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            out[name] = os.path.join(path, "__init__.py")
    return out


def cli_module(name):
    """A fresh copy of the command's module `name` (files, summary, merge,
    trigger), loaded by path as trainprof_<name>, so that a test that lowers
    its limits changes no other test's copy; the trainprof_cli.files that
    the modules import is shared."""
    import importlib.util
    import sys
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    spec = importlib.util.spec_from_file_location("trainprof_" + name, cli_modules()[name])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# A stand-in for PyTorch with just the optimizer step hook the Python hook
# (scripts/trainprof_cli/pyhook) registers: enough for the command's tests
# of step counting without the 5 GB wheel.
FAKE_TORCH_OPTIM = {
    "torch/__init__.py": "from . import optim\n",
    "torch/optim/__init__.py": "from .optimizer import Optimizer\n",
    "torch/optim/optimizer.py": textwrap.dedent("""\
        _hooks = []
        def register_optimizer_step_post_hook(hook):
            _hooks.append(hook)
        class Optimizer:
            def step(self):
                for h in _hooks:
                    h(self, (), {})
        """),
}


def write_tree(root, files):
    """Write {relative path: text} under "root"."""
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
