"""A CUDA runtime linked into the program (nvcc's default -cudart static,
cuBLAS, cuDNN): its calls cannot be intercepted, but the driver calls it
makes through cuGetProcAddress pointers are.  CUPTI 13.0 on an H100 gave
one API record for such a pair, the runtime call's, spanning the driver
call (it starts 1-3 us before it), and the kernel under that record's
correlation id; the driver call got no record of its own.  The fake CUPTI
does the same for nested calls (tests/fakes/cupti.c), and
tests/programs/static_rt.c is such a program: the join must link each
kernel to the driver launch inside the runtime record (collector/drain/
join.c, find_api's enclosing rule)."""

import os

import pytest

import tputil

STEPS = 6
LAUNCHES = 3
SCHEDULE = "wait=1,warmup=1,active=3"
ACTIVE = 3

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(tputil.build_dir(), "fakes", "libcupti.so")),
    reason="fake libcupti not built")


def run_static(threads=1, env=None):
    e = {"STATIC_STEPS": STEPS, "STATIC_LAUNCHES": LAUNCHES, "STATIC_THREADS": threads,
         "STATIC_SLEEP_US": 5000}
    e.update(env or {})
    plain = tputil.run("static_rt", env=e, preload=False)
    res = tputil.run("static_rt", env=dict(e, TRAINPROF_SCHEDULE=SCHEDULE))
    assert plain.rc == 0 and res.rc == 0, res.stderr
    assert res.stdout == plain.stdout
    assert len(res.traces) == 1, (res.traces, res.stderr)
    return tputil.load_trace(res.traces[0])


def host_by_corr(trace):
    return {e["args"]["correlation"]: e for e in tputil.events(trace, ph="X")
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}


def check_linked(t, threads):
    kernels = tputil.events(t, ph="X", cat="kernel")
    assert len(kernels) == ACTIVE * LAUNCHES * threads, len(kernels)
    by_corr = host_by_corr(t)
    for k in kernels:
        launch = by_corr.get(k["args"]["correlation"])
        assert launch is not None, k
        assert launch["cat"] == "cuda_driver" and launch["name"] == "cuLaunchKernel", launch
        assert launch["args"]["kernel"] == k["name"], (launch, k)
        # the grid tells the thread and the launch (static_rt.c)
        assert launch["args"]["grid"] == k["args"]["grid"], (launch, k)
        assert k["ts"] >= launch["ts"]
    # each kernel its own launch
    assert len({k["args"]["correlation"] for k in kernels}) == len(kernels)
    cov = t["trainprof"]["coverage"]
    assert cov["kernels_seen_by_cupti"] == len(kernels)
    assert cov["kernels_linked_to_launches"] == len(kernels)
    assert cov["ratio"] == 1.0, cov
    # the memsets: the runtime's cudaMemsetAsync record around each
    # cuMemsetD8Async joins it, and its device record links to it
    sets = [e for e in tputil.events(t, ph="X", cat="gpu_memset")]
    assert len(sets) == ACTIVE * threads, [e.get("cat") for e in tputil.events(t, ph="X")]
    for s in sets:
        call = by_corr.get(s["args"]["correlation"])
        assert call is not None and call["name"].startswith("cuMemsetD8Async"), (s, call)
    return kernels


def test_driver_launches_inside_a_linked_in_runtime_are_linked():
    """Without find_api's rule for a record around the call, no kernel
    links (no API record lies inside the driver calls)."""
    check_linked(run_static(), 1)


def test_other_threads_records_are_not_taken():
    """Thread 1's driver call cuLaunchHostFunc lasts while thread 0 makes
    its calls of the step (static_rt.c STATIC_HOSTFN=1): thread 0's runtime
    records lie inside it, and thread 1 is joined first (the newest
    thread's buffer comes first).  They are thread 0's, for its driver
    calls inside them: a call takes another thread's record only where
    CUPTI's thread ids are none of ours.  Before: 3 of 18 kernels (one a
    step) linked to thread 1's cuLaunchHostFunc, in 5 runs of 5.  Then
    four threads launching at once (before: 1 to 4 of 36 kernels linked
    to another thread's launch or to none, in 1 to 9 runs of 10)."""
    check_linked(run_static(threads=2, env={"STATIC_HOSTFN": 1}), 2)
    check_linked(run_static(threads=4), 4)
