"""Host call stacks (TRAINPROF_WITH_STACK=1) and the stacks handler, with
tests/programs/stack_calls (main -> train_step -> forward -> launch_matmul ->
cudaLaunchKernel; main -> train_step -> backward -> copy_grads -> cudaMemcpy;
main -> train_step -> cudaStreamSynchronize) against the fakes, and the fake
CUPTI for the GPU-time file."""

import os
import re

import pytest

import tputil

FOLDED = re.compile(r"^[^;\n]+(;[^;\n]+)* [0-9]+$")
SCHEDULE = "wait=1,warmup=1,active=3"
STEPS = 6


def run(env=None, **kw):
    e = {"TRAINPROF_SCHEDULE": SCHEDULE, "TRAINPROF_WITH_STACK": "1",
         "FAKE_CUDA_LAUNCH_NS": "20000", "STACK_STEPS": STEPS,
         # steps of 5 ms, so that tp-flush has enabled CUPTI during warmup
         "STACK_SLEEP_US": 5000}
    e.update(env or {})
    res = tputil.run("stack_calls", env=e, **kw)
    assert res.rc == 0, res.stderr
    return res


def reports(res):
    d = os.path.join(res.cwd, "test", "reports")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def folded(res, name):
    """{stack tuple: value} of a folded file, every line checked."""
    path = os.path.join(res.cwd, "test", "reports", name)
    out = {}
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines == sorted(lines)
    for line in lines:
        assert FOLDED.match(line), line
        stack, value = line.rsplit(" ", 1)
        frames = tuple(stack.split(";"))
        assert frames not in out
        out[frames] = int(value)
        assert out[frames] > 0
    return out


def suffix_after(frames, first):
    """The frames from `first` on (root side cut off: _start, libc)."""
    assert first in frames, frames
    return frames[frames.index(first):]


def test_host_stacks_named_callers():
    res = run()
    assert reports(res) == ["rank0.00000005.pt.trace.stacks.gpu.txt", "rank0.00000005.pt.trace.stacks.txt",
                            "rank0.00000005.pt.trace.summary.json", "rank0.00000005.pt.trace.summary.txt"]
    host = folded(res, "rank0.00000005.pt.trace.stacks.txt")
    by_tail = {suffix_after(k, "main"): v for k, v in host.items()}
    required = {
        ("main", "train_step", "forward", "launch_matmul", "cudaLaunchKernel"),
        ("main", "train_step", "backward", "copy_grads", "cudaMemcpy"),
    }
    sync = ("main", "train_step", "cudaStreamSynchronize")   # may round to 0 us
    assert required <= set(by_tail) <= required | {sync}, by_tail
    # root first: main before train_step, and main is not the root
    for k in host:
        assert k.index("main") < k.index("train_step") and k.index("main") > 0, k
    # 3 recorded steps x 2 launches of >= 20 us each (FAKE_CUDA_LAUNCH_NS)
    launch = by_tail[("main", "train_step", "forward", "launch_matmul", "cudaLaunchKernel")]
    assert 120 <= launch < 120 + 6 * 1000, launch
    # no frame of ours: the stack ends at the caller of the intercepted call
    for k in host:
        assert not any("tp_" in f or "libtrainprof" in f for f in k), k
    # the trace agrees: same launches
    t = tputil.load_trace(res.traces[0])
    assert len(tputil.launches(t)) == 3 * 2
    assert tputil.steps(t) == [2, 3, 4]


def test_host_time_matches_trace():
    res = run()
    host = folded(res, "rank0.00000005.pt.trace.stacks.txt")
    t = tputil.load_trace(res.traces[0])
    for name in ("cudaLaunchKernel", "cudaMemcpy"):
        dur_us = sum(e["dur"] for e in tputil.events(t, ph="X", name=name))
        v = sum(v for k, v in host.items() if k[-1] == name)
        assert abs(v - dur_us) <= 1, (name, v, dur_us)


def test_gpu_stacks_under_launch():
    res = run()
    t = tputil.load_trace(res.traces[0])
    kernels = tputil.events(t, ph="X", cat="kernel")
    assert kernels, "the fake CUPTI gave no kernels"
    gpu = folded(res, "rank0.00000005.pt.trace.stacks.gpu.txt")
    by_tail = {suffix_after(k, "main"): v for k, v in gpu.items()}
    kname = kernels[0]["name"]
    key = ("main", "train_step", "forward", "launch_matmul", "cudaLaunchKernel", kname)
    assert key in by_tail, by_tail
    kernel_us = sum(e["dur"] for e in kernels)
    assert abs(by_tail[key] - kernel_us) <= 1, (by_tail[key], kernel_us)
    copies = tputil.events(t, ph="X", cat="gpu_memcpy")
    if copies:
        assert ("main", "train_step", "backward", "copy_grads", "cudaMemcpy") in by_tail


def test_without_stacks_no_files_same_trace_shape():
    on = run()
    off = run({"TRAINPROF_WITH_STACK": None})
    assert reports(off) == ["rank0.00000005.pt.trace.summary.json", "rank0.00000005.pt.trace.summary.txt"]
    assert on.stdout == off.stdout
    a, b = tputil.load_trace(on.traces[0]), tputil.load_trace(off.traces[0])
    names = lambda t: sorted((e.get("ph"), e.get("cat"), e.get("name")) for e in t["traceEvents"])
    assert names(a) == names(b)
    # the log line counts events, not stack records
    count = lambda r: re.search(rb"\((\d+) events", r.stderr).group(1)
    assert count(on) == count(off)


def test_depth_limits_frames():
    res = run({"TRAINPROF_STACK_DEPTH": "2"})
    host = folded(res, "rank0.00000005.pt.trace.stacks.txt")
    assert ("launch_matmul", "cudaLaunchKernel") in {k[-2:] for k in host}
    for k in host:
        assert len(k) == 3, k      # 2 frames + the call
    assert ("forward", "launch_matmul", "cudaLaunchKernel") in host


def test_handler_listed_without_stacks_writes_nothing():
    res = run({"TRAINPROF_WITH_STACK": None, "TRAINPROF_HANDLERS": "chrome,summary,stacks"})
    assert reports(res) == ["rank0.00000005.pt.trace.summary.json", "rank0.00000005.pt.trace.summary.txt"]


def test_keep_deletes_stack_reports():
    res = run({"TRAINPROF_SCHEDULE": "wait=0,warmup=0,active=1,repeat=3", "TRAINPROF_KEEP": "1"})
    r = reports(res)
    stems = {x.split(".pt.trace")[0] for x in r}
    assert len(stems) == 1 and len(res.traces) == 1, (r, res.traces)


def test_library_self_time_and_nested_launch():
    """gemm_calls (fake cuBLAS): cublasSgemm_v2 launches a kernel inside; the
    launch's stack passes through libcublas's own function (not through our wrapper), and
    the GEMM's own line weighs its self time."""
    res = tputil.run("gemm_calls", env={"TRAINPROF_SCHEDULE": "all", "TRAINPROF_WITH_STACK": "1",
                                        "FAKE_CUDA_LAUNCH_NS": "30000"})
    assert res.rc == 0, res.stderr
    host = folded(res, [r for r in reports(res) if r.endswith(".stacks.txt")][0])
    for k in host:
        assert not any("libtrainprof" in f for f in k), k
    nested = [k for k in host if k[-1] == "cudaLaunchKernel" and "cublasSgemm_v2" in k]
    assert nested, host
    k = nested[0]
    # the frame inside the fake cuBLAS is its static helper, named from .symtab
    assert k.index("cublasSgemm_v2") < len(k) - 2 and k[k.index("cublasSgemm_v2") + 1] == "fake_gemm"
    t = tputil.load_trace(res.traces[0])
    gemms = tputil.events(t, ph="X", name="cublasSgemm_v2")
    assert gemms
    launches = tputil.launches(t)
    inner = sum(la["dur"] for la in launches for g in gemms
                if la["tid"] == g["tid"] and g["ts"] <= la["ts"] and la["ts"] + la["dur"] <= g["ts"] + g["dur"])
    assert inner >= 30 * len(gemms)           # each launch spent >= 30 us
    self_us = sum(g["dur"] for g in gemms) - inner
    got = sum(v for k, v in host.items() if k[-1] == "cublasSgemm_v2")
    assert abs(got - self_us) <= 1, (got, self_us)
    assert sum(v for k, v in host.items() if k in nested) == pytest.approx(inner, abs=1)
