"""NVTX through injection (preload/nvtx.c; README "Steps", nvtx:GLOB).

build/programs/nvtx_ranges annotates a 5-step loop with the toolkit's NVTX3
header only; each step is an NVTX range named `step`.  The library must make
itself the NVTX injection library, record every NVTX form as user_annotation
events, count steps from the `step` range with the default
TRAINPROF_STEP_ON=api,nvtx:step, and leave NVTX_INJECTION64_PATH alone when
another tool set it or when profiling is off.
"""

import os

import pytest

import tputil

PROG = "nvtx_ranges"
NSTEPS = 5
SCHED = "warmup=1,active=2"       # step 0 warms up, 1-2 record, saved with batch 3
EPS = 1e-3                        # ts/dur carry at most 3 decimals (µs)

# name -> domain ("" = the default domain) of the ranges made in every step
RANGES = {
    "outer": "",
    "inner": "",
    "ex_ascii": "",
    "registered_forward": "tp_test_domain",     # NVTX_MESSAGE_TYPE_REGISTERED
    "domain_ascii": "tp_test_domain",
    "wide_\u00e9t\u00e9": "",                   # nvtxRangePushW, as UTF-8
    "cross_thread": "",                         # started and ended on two threads
    "domain_start_end": "tp_test_domain",
}
MARKS = {"mark_here": "", "domain_mark": "tp_test_domain"}


def _plain_stdout():
    r = tputil.run(PROG, ["--steps", NSTEPS], preload=False)
    assert r.rc == 0, r.stderr
    return r.stdout


def _one_trace(r):
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert len(r.traces) == 1, (r.traces, r.stderr.decode(errors="replace"))
    return tputil.load_trace(r.traces[0])


def _domain(ev):
    return (ev.get("args") or {}).get("domain") or ""


def _inside(child, parent):
    return (parent["ts"] - EPS <= child["ts"] and
            child["ts"] + child.get("dur", 0) <= parent["ts"] + parent["dur"] + EPS)


def _step_events(trace):
    return {int(tputil.STEP_RE.match(ev["name"]).group(1)): ev
            for ev in tputil.events(trace, ph="X")
            if tputil.STEP_RE.match(ev.get("name", ""))}


@pytest.fixture(scope="module")
def recorded():
    r = tputil.run(PROG, ["--steps", NSTEPS], env={"TRAINPROF_SCHEDULE": SCHED})
    return r, _one_trace(r)


def test_program_output_unchanged(recorded):
    r, _ = recorded
    assert r.stdout == _plain_stdout()
    assert r.stdout == b"nvtx_ranges: 5 steps, checksum 2611200\n"


def test_steps_from_nvtx_step_range(recorded):
    r, trace = recorded
    assert tputil.trace_batch(r.traces[0]) == 3
    assert tputil.steps(trace) == [1, 2]


def test_ranges_recorded_as_user_annotation(recorded):
    _, trace = recorded
    for name, domain in RANGES.items():
        evs = tputil.events(trace, ph="X", name=name)
        assert len(evs) == 2, (name, evs)            # one per recorded step
        for ev in evs:
            assert ev["cat"] == "user_annotation", ev
            assert ev["dur"] >= 0, ev
            assert _domain(ev) == domain, ev


def test_registered_string_resolved(recorded):
    _, trace = recorded
    names = {ev.get("name") for ev in tputil.events(trace, cat="user_annotation")}
    assert "registered_forward" in names
    # nothing unnamed: every message type resolved to text
    assert "" not in names


def test_ranges_inside_their_step_and_nested(recorded):
    _, trace = recorded
    steps = _step_events(trace)
    for n in (1, 2):
        step = steps[n]
        mine = {name: [ev for ev in tputil.events(trace, ph="X", name=name)
                       if ev["pid"] == step["pid"] and _inside(ev, step)]
                for name in RANGES}
        for name, evs in mine.items():
            assert len(evs) == 1, ("step %d" % n, name, evs)
        outer, inner = mine["outer"][0], mine["inner"][0]
        assert inner["tid"] == outer["tid"] == step["tid"]
        assert _inside(inner, outer)
        reg, dom = mine["registered_forward"][0], mine["domain_ascii"][0]
        assert _inside(dom, reg)
        # siblings do not overlap
        assert outer["ts"] + outer["dur"] <= mine["ex_ascii"][0]["ts"] + EPS


def test_marks_are_instants(recorded):
    _, trace = recorded
    steps = _step_events(trace)
    for name, domain in MARKS.items():
        evs = tputil.events(trace, ph="i", name=name)
        assert len(evs) == 2, (name, evs)
        for ev in evs:
            assert _domain(ev) == domain, ev
            assert any(_inside(ev, s) for s in steps.values()), ev
        assert not tputil.events(trace, ph="X", name=name)


def test_cross_thread_range(recorded):
    _, trace = recorded
    evs = tputil.events(trace, ph="X", name="cross_thread")
    assert len(evs) == 2
    for ev in evs:
        assert ev["cat"] == "user_annotation"
        assert ev["dur"] > 0


def test_api_steps_not_counted_twice():
    # trainprof_step() after each `step` range: the first signal that fires
    # (nvtx) is used from then on, so no step counts twice.
    r = tputil.run(PROG, ["--steps", NSTEPS, "--api-steps"],
                   env={"TRAINPROF_SCHEDULE": "all"})
    trace = _one_trace(r)
    assert tputil.steps(trace) == list(range(NSTEPS))
    assert tputil.trace_batch(r.traces[0]) == NSTEPS


@pytest.mark.parametrize("form", ["push-pop", "start-end"])
def test_step_range_begun_before_activation_is_step_0(form):
    """The first `step` range is pushed before the first CUDA call, as
    `with nvtx.range("step"):` around a whole iteration does.  NVTX ranges
    do not activate the library, the cudaMalloc inside the range does; the
    range's end then ends step 0, so that ProfilerStep#N holds the
    program's iteration N (each iteration marks "iteration N")."""
    args = ["--steps", 7, "--cuda-in-step"] + (["--start-end"] if form == "start-end" else [])
    plain = tputil.run(PROG, args, preload=False)
    r = tputil.run(PROG, args, env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=3"})
    trace = _one_trace(r)
    assert r.stdout == plain.stdout
    steps = _step_events(trace)
    assert sorted(steps) == [2, 3, 4], sorted(steps)
    assert tputil.trace_batch(r.traces[0]) == 5
    for n, s in steps.items():
        marks = [ev["name"] for ev in tputil.events(trace, ph="i")
                 if ev["name"].startswith("iteration ") and _inside(ev, s)]
        assert marks == ["iteration %d" % n], (n, marks)
    # the pop of the range begun before activation was not an unmatched one
    assert trace["trainprof"]["unmatched_range_pops"] == 0


def test_sets_injection_path_to_itself():
    r = tputil.run(PROG, ["--steps", 1, "--print-env"])
    assert r.rc == 0
    want = "NVTX_INJECTION64_PATH=%s" % os.path.realpath(tputil.lib_path())
    assert want in r.stderr.decode(), r.stderr


def test_preset_injection_path_kept():
    other = "/nonexistent/libothertool.so"
    r = tputil.run(PROG, ["--steps", NSTEPS, "--api-steps", "--print-env"],
                   env={"TRAINPROF_SCHEDULE": SCHED, "NVTX_INJECTION64_PATH": other})
    assert ("NVTX_INJECTION64_PATH=%s" % other) in r.stderr.decode(), r.stderr
    assert r.stdout == _plain_stdout()
    trace = _one_trace(r)
    # NVTX went to the other tool (here: nowhere); steps came from the api
    assert tputil.steps(trace) == [1, 2]
    names = {ev.get("name") for ev in tputil.events(trace, cat="user_annotation")}
    assert all(tputil.STEP_RE.match(n or "") for n in names), names
    assert not tputil.events(trace, ph="i", name="mark_here")


@pytest.mark.parametrize("env", [
    {"TRAINPROF_ENABLED": "0"},
    {"TRAINPROF_RANKS": "1", "RANK": "0", "WORLD_SIZE": "2"},
], ids=["disabled", "rank-excluded"])
def test_not_set_when_not_profiling(env):
    r = tputil.run(PROG, ["--steps", NSTEPS, "--print-env"], env=env)
    assert r.rc == 0, r.stderr
    assert b"NVTX_INJECTION64_PATH=(unset)" in r.stderr, r.stderr
    assert r.stdout == _plain_stdout()
    assert r.traces == []


def test_disabled_library_as_injection_is_inert():
    # A child that inherited the variable but runs with TRAINPROF_ENABLED=0
    # (the exec handler's children) loads us through NVTX alone.
    r = tputil.run(PROG, ["--steps", NSTEPS], preload=False,
                   env={"TRAINPROF_ENABLED": "0",
                        "NVTX_INJECTION64_PATH": os.path.realpath(tputil.lib_path())})
    assert r.rc == 0, r.stderr
    assert r.stdout == _plain_stdout()
    assert r.stderr == b""
    assert r.traces == []
