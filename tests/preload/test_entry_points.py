"""Driver functions obtained through the runtime (cudaGetDriverEntryPoint,
cudaGetDriverEntryPointByVersion and their _ptsz forms), as PyTorch gets
cuMemCreate, cuMemMap and the rest: what they hand out for a function we
wrap is our wrapper, recorded when called, whether the runtime answers
through the driver's cuGetProcAddress it was given (the fake runtime's
default, already our lookup wrapper: handed on, not wrapped twice) or from a
channel our driver-level interposition cannot see (FAKE_CUDART_ENTRY=private).
Statuses pass through; flags pick the per-thread variant as the runtime
documents (tests/programs/entry_points.c)."""

import collections
import re

import tputil


def _run(env):
    plain = tputil.run("entry_points", env=env, preload=False)
    r = tputil.run("entry_points", env=dict(env, TRAINPROF_SCHEDULE="all"))
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    where = dict(re.findall(r"^(.+) pointer in: (.*)$", r.stderr.decode(), re.M))
    assert len(r.traces) == 1, r.traces
    driver = collections.Counter(ev["name"] for ev in tputil.events(
        tputil.load_trace(r.traces[0]), ph="X", cat="cuda_driver"))
    return r.stdout.decode(), where, driver


def _check(out, where, driver):
    for label in ("cuMemCreate", "cuMemRelease", "cuLaunchKernel", "cuLaunchKernel per-thread",
                  "cuLaunchKernel _ptsz default"):
        assert where[label].endswith("libtrainprof.so"), (label, where)
    assert where["unknown"] == "-" and where["too old"] == "-"
    # cudaSuccess with a NULL pointer and the driver's status: symbol not
    # found (1), version not sufficient (2)
    assert "unknown: rc=0 status=1 null=1" in out
    assert "too old: rc=0 status=2 null=1" in out
    # cudaEnableDefault is legacy for the plain entry point and per-thread
    # for its _ptsz form; cudaEnablePerThreadDefaultStream is per-thread
    assert driver["cuLaunchKernel"] == 1 and driver["cuLaunchKernel_ptsz"] == 2, driver
    assert driver["cuMemCreate"] == 1 and driver["cuMemRelease"] == 1, driver


def test_runtime_answering_through_our_lookup():
    out, where, driver = _run({})
    _check(out, where, driver)
    # the runtime's pointer is the wrapper a driver lookup gets: not wrapped again
    assert "cuMemCreate the same as a driver lookup: yes" in out
    assert where["cuMemsetD8"].endswith("libtrainprof.so")
    assert driver["cuMemsetD8_v2"] == 1, driver


def test_runtime_answering_from_elsewhere():
    out, where, driver = _run({"FAKE_CUDART_ENTRY": "private"})
    _check(out, where, driver)
    # an unexported pointer from the unversioned entry point (the runtime's
    # own version picks it, unknown here) is handed out untouched
    assert where["cuMemsetD8"].endswith("libcuda.so.1"), where
    assert "cuMemsetD8_v2" not in driver


def test_disabled_hands_out_the_runtimes_pointers():
    for env in ({"TRAINPROF_ENABLED": "0"}, {"FAKE_CUDART_ENTRY": "private", "TRAINPROF_ENABLED": "0"}):
        r = tputil.run("entry_points", env=env)
        assert r.rc == 0, r.stderr
        where = dict(re.findall(r"^(.+) pointer in: (.*)$", r.stderr.decode(), re.M))
        assert where["cuMemCreate"].endswith("libcuda.so.1"), (env, where)
        assert r.traces == []
