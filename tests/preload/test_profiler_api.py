"""Profiler-API windows: with
TRAINPROF_SCHEDULE=profiler-api, cudaProfilerStart/cuProfilerStart opens a
window and cudaProfilerStop/cuProfilerStop closes it, as nsys's
--capture-range=cudaProfilerApi does; steps are still counted by the step
signal.  tests/programs/profiler_api.c makes its profiler calls in the
middle of their step and gives launch i of step s the grid x 1000 * (s + 1) + i,
so that a trace says exactly which launches it holds.

The steps that overlap a window are listed (torch.profiler's start() and
stop() do the same with ProfilerStep#N), cut to the window; {batch} is one
past the last step listed, at exit the steps completed.  The fake CUPTI
(TRAINPROF_CUPTI_PATH) delivers device records: every launch of a window is
linked to its kernel (coverage 1), because Start waits for CUPTI."""

import os
import re

import pytest

import tputil

LAUNCHES = 4          # per step; the profiler calls come after LAUNCHES // 2


def fake_cupti():
    return os.path.join(tputil.build_dir(), "fakes", "libcupti.so")


def env(**extra):
    e = {"TRAINPROF_SCHEDULE": "profiler-api", "TRAINPROF_LOG": "debug",
         "TRAINPROF_CUPTI_PATH": fake_cupti()}
    e.update(extra)
    return e


def run(calls, steps=8, driver=False, **extra):
    args = ["--steps=%d" % steps, "--launches=%d" % LAUNCHES] + (["--driver"] if driver else [])
    args += calls
    plain = tputil.run("profiler_api", args, preload=False)
    r = tputil.run("profiler_api", args, env=env(**extra))
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    return r


def grids(trace):
    """(step, index) of every launch event of the trace, in time order."""
    out = []
    for ev in sorted(tputil.launches(trace), key=lambda e: e["ts"]):
        x = ev["args"]["grid"][0]
        out.append((x // 1000 - 1, x % 1000))
    return out


def between(start, stop, steps=None):
    """The launches made after a Start in step "start" and before a Stop in
    step "stop" (None: at exit, after "steps" steps)."""
    out = []
    last = stop if stop is not None else steps - 1
    for s in range(start, last + 1):
        for i in range(LAUNCHES):
            if (s, i) <= (start, LAUNCHES // 2 - 1):
                continue
            if stop is not None and (s, i) >= (stop, LAUNCHES // 2):
                continue
            out.append((s, i))
    return out


def check_window(path, start, stop, batch, steps=None, partial=None):
    trace = tputil.load_trace(path)
    meta = trace["trainprof"]
    assert re.match(r"^rank0\.%08d(-\d+)?\.pt\.trace\.json\.gz$" % batch, os.path.basename(path)), path
    listed = list(range(start, (stop if stop is not None else steps - 1) + 1))
    assert tputil.steps(trace) == listed
    assert [s["step"] for s in meta["steps"]] == listed
    assert (meta["first_step"], meta["last_step"]) == (listed[0], listed[-1])
    assert grids(trace) == between(start, stop, steps)
    assert meta["partial"] is (partial is not None)
    assert meta["partial_reason"] == partial
    # the profiler calls bound the window: neither is one of its events
    names = {ev["name"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime")}
    assert not names & {"cudaProfilerStart", "cudaProfilerStop", "cuProfilerStart", "cuProfilerStop"}
    # ProfilerStep events are cut to the window (its start is the ts of the
    # metadata events), and every launch of a listed step lies in its step's
    t0 = min(ev["ts"] for ev in tputil.events(trace, ph="M") if "ts" in ev)
    assert all(ev["ts"] >= t0 for ev in tputil.events(trace, ph="X")
               if tputil.STEP_RE.match(ev["name"])), t0
    per_step = tputil.launches_per_step(trace)
    want = {}
    for s, _ in between(start, stop, steps):
        want[s] = want.get(s, 0) + 1
    assert per_step == {s: want.get(s, 0) for s in listed}
    cov = meta["coverage"]
    n = len(between(start, stop, steps))
    assert cov["launches_seen_by_wrappers"] == n
    assert cov["kernels_seen_by_cupti"] == n and cov["kernels_linked_to_launches"] == n
    assert cov["ratio"] == 1
    return trace


@pytest.mark.skipif(not os.path.exists(fake_cupti()), reason="fake libcupti not built")
@pytest.mark.parametrize("driver", [False, True], ids=["runtime", "driver"])
def test_one_trace_per_start_stop_pair(driver):
    r = run(["start@1", "stop@3", "start@5", "stop@6"], driver=driver)
    assert [tputil.trace_batch(p) for p in r.traces] == [4, 7], r.traces
    check_window(r.traces[0], 1, 3, 4)
    check_window(r.traces[1], 5, 6, 7)
    # the runtime's Start reaches the driver's inside it (the fake runtime
    # does as the real one): one Start, one Stop, nothing "ignored"
    assert b"ignored" not in r.stderr, r.stderr


def test_unpaired_calls_are_ignored():
    r = run(["stop@0", "start@2", "start@2", "stop@4", "stop@4"], steps=6)
    assert len(r.traces) == 1, r.traces
    trace = tputil.load_trace(r.traces[0])
    assert tputil.trace_batch(r.traces[0]) == 5
    assert tputil.steps(trace) == [2, 3, 4]
    assert grids(trace) == between(2, 4)
    # the second Start is a call of the window like any other
    assert [ev["name"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime")
            if "Profiler" in ev["name"]] == ["cudaProfilerStart"]
    err = r.stderr.decode()
    assert err.count("trainprof: debug: profiler API stop in step 0 ignored: not recording") == 1, err
    assert err.count("trainprof: debug: profiler API start in step 2 ignored: already recording") == 1, err
    assert err.count("trainprof: debug: profiler API stop in step 4 ignored: not recording") == 1, err
    assert err.count("ignored") == 3, err


def test_start_without_stop_is_saved_at_exit_as_partial():
    r = run(["start@5"], steps=8)
    assert len(r.traces) == 1, r.traces
    check_window(r.traces[0], 5, None, 8, steps=8, partial="exit")


def test_pairs_inside_one_step():
    # two windows inside step 2, with no launch between Start and Stop: each
    # lists step 2 (cut to the window); the second {batch} repeats and the
    # file takes output.c's suffix
    r = run(["start@2", "stop@2", "start@2", "stop@2"], steps=4)
    names = sorted(os.path.basename(p) for p in r.traces)
    assert names == ["rank0.00000003-1.pt.trace.json.gz", "rank0.00000003.pt.trace.json.gz"], names
    for p in r.traces:
        trace = tputil.load_trace(p)
        assert tputil.steps(trace) == [2]
        assert grids(trace) == []
        assert trace["trainprof"]["partial"] is False


def test_without_profiler_api_schedule_the_calls_open_no_window():
    # the default schedule (warmup step 0, steps 1-4 recorded): the calls
    # are recorded as events of its window and change nothing
    r = run(["start@1", "stop@3"], steps=8, TRAINPROF_SCHEDULE=None)
    assert [tputil.trace_batch(p) for p in r.traces] == [5], r.traces
    trace = tputil.load_trace(r.traces[0])
    assert tputil.steps(trace) == [1, 2, 3, 4]
    names = [ev["name"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime")
             if "Profiler" in ev["name"]]
    assert names == ["cudaProfilerStart", "cudaProfilerStop"]


def test_window_after_a_stop_in_the_last_step_is_kept_at_exit():
    # Stop and Start again in the last step: the window cut at exit has the
    # {batch} of the one before (4), yet the program asked for it: saved
    # (under the suffix), not dropped as a schedule's teardown calls are
    r = run(["start@1", "stop@3", "start@3"], steps=4)
    names = [os.path.basename(p) for p in r.traces]
    assert names == ["rank0.00000004-1.pt.trace.json.gz", "rank0.00000004.pt.trace.json.gz"], names
    check_window(r.traces[1], 1, 3, 4)
    check_window(r.traces[0], 3, None, 4, steps=4, partial="exit")
