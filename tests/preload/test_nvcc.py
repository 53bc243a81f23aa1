"""Programs built by nvcc (make cuda-programs) under the preload, against the
fake runtime: every <<<>>> launch is recorded at the layer nvcc 13 uses
(__cudaLaunchKernel, or __cudaLaunchKernel_ptsz with --default-stream
per-thread), with the demangled kernel name and its launch configuration.
Also the trace-reading and table code of scripts/dev/gpu-validate, on those
traces and on a synthetic one with GPU kernels (no GPU here)."""

import collections
import gzip
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

import tputil

SCRIPTS = os.path.join(tputil.ROOT, "scripts", "dev")

# What tests/programs/demo_gpu.cu launches per step, in order:
# (demangled name, grid, block, dynamic shared memory, on its own stream)
DEMO_LAUNCHES = [
    ("matmul(float const*, float const*, float*, int)", [64, 64, 1], [16, 16, 1], 0, False),
    ("bias_relu(float*, float const*, int)", [4096, 1, 1], [256, 1, 1], 0, False),
    ("matmul(float const*, float const*, float*, int)", [64, 64, 1], [16, 16, 1], 0, False),
    ("sgd(float*, float const*, float, int)", [4096, 1, 1], [256, 1, 1], 0, False),
    ("void demo::scale<float>(float*, float, int)", [512, 1, 1], [128, 1, 1], 512, True),
]

VARIANTS = {"shared": "__cudaLaunchKernel", "ptsz": "__cudaLaunchKernel_ptsz"}


def _binary(variant):
    path = tputil.program("demo_gpu_" + variant)
    if not os.path.isfile(path):
        pytest.skip("%s not built (needs nvcc: make cuda-programs)" % path)
    return path


def _module(name, filename):
    spec = importlib.util.spec_from_loader(
        name, importlib.machinery.SourceFileLoader(name, os.path.join(SCRIPTS, filename)))
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, SCRIPTS)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(SCRIPTS)
    return mod


@pytest.fixture(scope="module")
def report():
    return _module("gpu_validate_report", "gpu_validate_report.py")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_launch_recorded_with_its_configuration(variant):
    exe = _binary(variant)
    plain = tputil.run(exe, ["6"], preload=False)
    r = tputil.run(exe, ["6"], env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=3"})
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    assert r.stdout.decode().splitlines()[0] == "demo_gpu: %d launches per step" % len(DEMO_LAUNCHES)
    assert len(r.traces) == 1 and tputil.trace_batch(r.traces[0]) == 5
    trace = tputil.load_trace(r.traces[0])
    assert trace["trainprof"]["step_signal"] == "nvtx:step"
    assert tputil.steps(trace) == [2, 3, 4]
    assert tputil.launches_per_step(trace) == {2: 5, 3: 5, 4: 5}

    launches = sorted(tputil.launches(trace), key=lambda e: e["ts"])
    assert {e["name"] for e in launches} == {VARIANTS[variant]}
    assert len(launches) == 3 * len(DEMO_LAUNCHES)
    corr = [e["args"]["correlation"] for e in launches]
    assert len(set(corr)) == len(corr)
    for i, ev in enumerate(launches):
        name, grid, block, smem, side = DEMO_LAUNCHES[i % len(DEMO_LAUNCHES)]
        a = ev["args"]
        assert (a["kernel"], a["grid"], a["block"], a["shared memory"]) == \
            (name, grid, block, smem), ev
        assert (a["cuda stream"] != 0) == side, ev


def test_schedule_all_records_every_step():
    exe = _binary("shared")
    r = tputil.run(exe, ["4"], env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    trace = tputil.load_trace(r.traces[0])
    assert tputil.steps(trace) == [0, 1, 2, 3]
    assert tputil.launches_per_step(trace) == {s: len(DEMO_LAUNCHES) for s in range(4)}
    names = collections.Counter(e["args"]["kernel"] for e in tputil.launches(trace))
    assert names == collections.Counter(4 * [n for n, *_ in DEMO_LAUNCHES])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fake_runtime_defines_every_imported_symbol(variant):
    # eager binding fails at load if the fake lacks a symbol the program imports
    exe = _binary(variant)
    r = tputil.run(exe, ["1"], env={"LD_BIND_NOW": "1", "TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    assert b"no version information" not in r.stderr, r.stderr


def test_disabled_library_passes_through():
    exe = _binary("shared")
    plain = tputil.run(exe, ["2"], preload=False)
    r = tputil.run(exe, ["2"], env={"TRAINPROF_ENABLED": "0"})
    assert r.rc == 0 and r.stdout == plain.stdout and r.traces == [] and r.stderr == b""


def test_libs_gpu_compiles_and_links_the_libraries():
    path = tputil.program("libs_gpu")
    if not os.path.isfile(path):
        pytest.skip("libs_gpu not built (needs nvcc: make cuda-programs)")
    out = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    for lib in ("libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9"):
        assert "[%s]" % lib in out, out


# ---- scripts/dev/gpu_validate_report.py ------------------------------------------

def test_report_on_a_fake_run(report):
    exe = _binary("ptsz")
    r = tputil.run(exe, ["12"], env={"TRAINPROF_SCHEDULE": "wait=2,warmup=1,active=3"})
    assert r.rc == 0, r.stderr
    a = report.analyze(report.load_trace(r.traces[0]))
    assert a["steps"] == [3, 4, 5]
    assert a["host_launches"] == 15
    assert a["launch_layers"] == {"__cudaLaunchKernel_ptsz": 15}
    assert a["launch_names"] == dict(collections.Counter(3 * [n for n, *_ in DEMO_LAUNCHES]))
    assert a["step_signal"] == "nvtx:step"
    assert a["flops_per_step"] == {3: 0, 4: 0, 5: 0}
    # the fake runtime has no GPU: whatever kernels a fake CUPTI may deliver
    # must be linked to these launches
    assert a["kernels_linked"] == a["kernels"]
    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu_validate_report.py")] + r.traces,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "steps recorded:        3,4,5" in p.stdout
    assert 'host launches:         15 {"__cudaLaunchKernel_ptsz": 15}' in p.stdout
    assert "     6  matmul(float const*, float const*, float*, int)" in p.stdout


def _x(name, cat, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _synthetic():
    """Two recorded steps: per step two launches with kernels (one named
    mangled on the GPU side), a cuBLAS GEMM, a cuDNN call; step 2 also has a
    launch whose kernel never came and a kernel with a foreign correlation."""
    ev = []
    for s, t0 in ((1, 0.0), (2, 100.0)):
        ev.append(_x("ProfilerStep#%d" % s, "user_annotation", t0, 90.0))
        # Kineto repeats step spans on the GPU tracks: not steps of their own
        ev.append(_x("ProfilerStep#%d" % s, "gpu_user_annotation", t0 + 4, 90.0, pid=0, tid=7))
        c = 10 * s
        ev.append(_x("cudaLaunchKernel", "cuda_runtime", t0 + 1, 1, correlation=c,
                     kernel="ns::k(float*)", grid=[1, 1, 1], block=[32, 1, 1]))
        ev.append(_x("_ZN2ns1kEPf", "kernel", t0 + 5, 3, pid=0, tid=7, correlation=c))
        ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": c, "pid": 1, "tid": 1,
                   "ts": t0 + 1})
        ev.append(_x("cublasGemmEx", "cpu_op", t0 + 10, 20, flops=1000))
        ev.append(_x("cuLaunchKernel", "cuda_driver", t0 + 12, 1, correlation=c + 1,
                     kernel="gemm_kernel"))
        ev.append(_x("gemm_kernel", "kernel", t0 + 15, 5, pid=0, tid=7, correlation=c + 1))
        ev.append(_x("cudnnConvolutionForward", "cpu_op", t0 + 40, 10, flops=500))
        ev.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": t0 + 50, "s": "t",
                   "args": {"Total Reserved": 4096 * s, "Total Allocated": 100}})
    ev.append(_x("cudaLaunchKernel", "cuda_runtime", 160, 1, correlation=99, kernel="lost"))
    ev.append(_x("stray", "kernel", 170, 1, pid=0, tid=7, correlation=12345))
    ev.append(_x("cudaMemcpyAsync", "cuda_runtime", 180, 1, correlation=98))
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake H100"}],
            "trainprof": {"coverage": {"kernels": 5, "linked": 4}, "step_signal": "api"},
            "traceEvents": ev}


def test_report_on_a_synthetic_trace(report, tmp_path):
    path = tmp_path / "t.json.gz"
    with gzip.open(str(path), "wt") as f:
        json.dump(_synthetic(), f)
    a = report.analyze(report.load_trace(str(path)))
    assert a["steps"] == [1, 2]
    assert a["host_launches"] == 5
    assert a["launch_layers"] == {"cudaLaunchKernel": 3, "cuLaunchKernel": 2}
    assert a["kernels"] == 5 and a["kernels_linked"] == 4
    assert a["launches_with_kernel"] == 4
    assert a["kernels_per_step"] == {1: 2, 2: 2}
    if shutil.which("c++filt"):
        assert a["names_agree"] == a["names_compared"] == 4
        assert a["kernel_names"]["ns::k(float*)"] == 2
    assert a["flows"] == 2
    assert a["flops_per_step"] == {1: 1500, 2: 1500}
    assert a["gemm_flops_per_step"] == {1: 1000, 2: 1000}
    assert a["mem_peak"] == 8192
    assert a["coverage"] == {"kernels": 5, "linked": 4} and a["devices"] == ["Fake H100"]
    assert not report.fully_covered(a)
    good = dict(a, kernels_linked=5, launches_with_kernel=5)
    assert report.fully_covered(good)
    assert not report.fully_covered(dict(good, kernels=0, kernels_linked=0))
    text = report.describe("t", a)
    assert "kernels linked:        4/5 (launches with a kernel 4/5, ac2g flows 2)" in text
    assert "GEMM FLOPs/step:       1k" in text and "memory peak:           8.19kB" in text


def test_table_fixed_columns_and_markdown(report):
    rows = [["a", "1|2"], ["longer name", "3"]]
    plain = report.table(["figure", "value"], rows).splitlines()
    assert plain[0] == "figure       value" and plain[1] == "-----------  -----"
    assert plain[2] == "a            1|2"
    md = report.table(["figure", "value"], rows, markdown=True).splitlines()
    assert md == ["| figure | value |", "|---|---|", "| a | 1\\|2 |", "| longer name | 3 |"]


def test_torch_comparison_table_from_synthetic_results():
    g = _module("gpu_validate_torch", "gpu_validate_torch.py")
    win = g.window_steps()
    assert win == list(range(12, 22)) and g.schedule_text().startswith("skip_first=10,")
    analysis = {"steps": win, "kernels": 300, "kernel_names": {"a": 1, "b": 1, "c": 1},
                "gemm_flops_per_step": {s: 2e12 for s in win}, "mem_peak": None}
    res = {
        "plain": {"ok": True, "step_times_ms": [20.0] * 40, "loss": 0.5,
                  "max_memory_reserved": 2 ** 31, "device": "NVIDIA H100", "torch": "2.9"},
        "torch": {"ok": True, "step_times_ms": [22.0] * 40, "loss": 0.5, "mm_flops_window": 2e13,
                  "analysis": dict(analysis, kernel_names={"a": 1, "b": 1, "d": 1, "e": 1})},
        "trainprof": {"ok": True, "step_times_ms": [20.2] * 40, "loss": 0.5,
                      "analysis": analysis},
    }
    rows = {r[0]: r for r in g.build_rows(res, 40)}
    assert rows["kernels / recorded step"][2:4] == ["30", "30"]
    assert rows["kernel name agreement"][2:4] == ["50.0% of torch's in ours",
                                                  "66.7% of ours in torch's"]
    assert rows["GEMM FLOPs / step"][2:] == ["2T", "2T", "ratio trainprof/torch 1.000"]
    rec = rows["step time, recording (steps 12-21)"]
    assert rec[1] == "20.00 ms [20.00-20.00]" and rec[2].endswith("+10.0%") and \
        rec[3].endswith("+1.0%")
    assert "step time, after window (steps 24-39)" in rows
    assert rows["memory peak"][3] == "n/a"
    md = g.render(res, 40, markdown=True)
    assert md.startswith("GPU validation (scripts/dev/gpu-validate): NVIDIA H100, torch 2.9")
    assert "| figure | plain | torch.profiler | trainprof | note |" in md
    failed = dict(res, trainprof={"ok": False, "error": "exit status 1; last output: x | y"})
    text = g.render(failed, 40)
    assert "trainprof run failed" in text and "GEMM FLOPs / step" in text


def test_gpu_validate_without_a_gpu():
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU driver is installed: gpu-validate would really run")
    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu-validate")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "gpu-validate: no GPU found; nothing run\n"


# A stand-in for PyTorch, just enough for gpu_validate_torch.py's loop, so
# that its three runs, the preloaded trainprof run (the library activates at
# trainprof_step()) and the table are exercised without torch or a GPU.
FAKE_TORCH = {
    "__init__.py": '''
import contextlib
__version__ = "0.0-fake"
bfloat16 = "bfloat16"

class Tensor:
    def __getattr__(self, name):
        return lambda *a, **k: self
    def __iter__(self):
        return iter((Tensor(), Tensor(), Tensor()))
    def __getitem__(self, i):
        return self
    def __add__(self, o):
        return self
    __radd__ = __add__
    def item(self):
        return 0.25

def manual_seed(s):
    pass

def device(d):
    return d

class Generator:
    def __init__(self, device=None):
        pass
    def manual_seed(self, s):
        return self

def randn(*shape, **kw):
    return Tensor()

def autocast(*a, **k):
    return contextlib.nullcontext()

from . import cuda, nn, optim, profiler  # noqa: E402
''',
    "cuda.py": '''
def is_available(): return True
def synchronize(): pass
def max_memory_reserved(): return 1 << 30
def get_device_name(i): return "Fake GPU"
''',
    "nn/__init__.py": '''
from .. import Tensor
from . import functional

class Module:
    def __init__(self, *a, **k):
        pass
    def __call__(self, *a, **k):
        return self.forward(*a, **k) if type(self).forward is not Module.forward else Tensor()
    def forward(self, *a, **k):
        return Tensor()
    def to(self, dev):
        return self
    def parameters(self):
        return []

Linear = LayerNorm = Conv2d = Module

class ModuleList(Module, list):
    def __init__(self, it):
        list.__init__(self, it)
''',
    "nn/functional.py": '''
from .. import Tensor
def _t(*a, **k): return Tensor()
scaled_dot_product_attention = gelu = relu = mse_loss = _t
''',
    "optim.py": '''
class AdamW:
    def __init__(self, params, lr=0): pass
    def zero_grad(self, set_to_none=True): pass
    def step(self): pass
''',
    "profiler.py": '''
import json

class ProfilerActivity:
    CPU, CUDA = "cpu", "cuda"

def schedule(skip_first=0, wait=0, warmup=1, active=1, repeat=1):
    return (skip_first, wait, warmup, active)

class _Avg:
    def __init__(self, key, flops):
        self.key, self.flops = key, flops

class profile:
    def __init__(self, activities=None, schedule=None, on_trace_ready=None, **kw):
        self.sched, self.ready, self.n = schedule, on_trace_ready, 0
    def __enter__(self):
        return self
    def __exit__(self, *a):
        return False
    def step(self):
        skip, wait, warmup, active = self.sched
        self.n += 1
        if self.n == skip + wait + warmup + active:
            self.ready(self)
    def key_averages(self):
        return [_Avg("aten::mm", 3e12), _Avg("aten::addmm", 1e12), _Avg("aten::matmul", 0)]
    def export_chrome_trace(self, path):
        skip, wait, warmup, active = self.sched
        ev = []
        for i, s in enumerate(range(skip + wait + warmup, skip + wait + warmup + active)):
            t = 1000.0 * i
            ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % s,
                       "pid": 1, "tid": 1, "ts": t, "dur": 900})
            for j in range(3):
                c = 10 * s + j
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": t + j, "dur": 1, "args": {"correlation": c}})
                ev.append({"ph": "X", "cat": "kernel", "name": "_Z4gemmv" if j else "elementwise",
                           "pid": 0, "tid": 7, "ts": t + 10 + j, "dur": 1,
                           "args": {"correlation": c}})
        with open(path, "w") as f:
            json.dump({"traceEvents": ev}, f)
''',
}


@pytest.mark.skipif(bool(os.environ.get("TP_TEST_ASAN")),
                    reason="the script preloads the library alone; an ASan build needs its runtime first")
def test_torch_comparison_end_to_end_on_a_stand_in_torch(tmp_path):
    for rel, text in FAKE_TORCH.items():
        p = tmp_path / "torch" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    env = tputil.base_env(preload=False)
    env["PYTHONPATH"] = str(tmp_path)
    out = tmp_path / "table.md"
    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu_validate_torch.py"),
                        "--lib", tputil.lib_path(), "--workdir", str(tmp_path / "work"),
                        "--out", str(out), "--steps", "30", "--timeout", "60"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    assert p.returncode == 0, (p.stdout, p.stderr)
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines()}
    assert rows["kernels / recorded step"].split()[5:7] == ["3", "0"], p.stdout
    assert "GEMM FLOPs / step" in rows and "400G" in rows["GEMM FLOPs / step"], p.stdout
    assert "step time, recording (steps 12-21)" in rows
    assert "step time, after window (steps 24-29)" in rows
    assert "run failed" not in p.stdout
    traces = os.listdir(str(tmp_path / "work" / "trainprof" / "traces"))
    assert len(traces) == 1 and tputil.trace_batch(traces[0]) == 22
    md = out.read_text()
    assert md.startswith("GPU validation (scripts/dev/gpu-validate): Fake GPU, torch 0.0-fake, 30 steps")
    assert "| kernels / recorded step | - | 3 | 0 |" in md
