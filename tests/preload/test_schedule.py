"""Schedules x step signals: exactly the right trace files, with exactly the
right ProfilerStep#N and exactly the right launches in each step.

Expectations come from tputil.schedule_fn, an independent implementation of
torch.profiler.schedule, not from the library.
"""

import os

import pytest

import tputil

LAUNCHES = 3              # cudaLaunchKernel per step; +1 __cudaLaunchKernel (adam)
PER_STEP = LAUNCHES + 1

KERNELS = {
    "matmul_fwd(float*, float*, float*, int)",
    "relu_fwd(float*, int)",
    "mlir::kernels::matmul_bwd(float const*, float const*, float*, int)",
    "void layers::softmax<float>(float*, int)",
    "torch::optim::adam_step(float*, int)",
}
ADAM = "torch::optim::adam_step(float*, int)"

# (TRAINPROF_SCHEDULE or None for the default, steps the program runs)
SCHEDULES = [
    (None, 8),                                            # Composer default: save at 5
    ("wait=1,warmup=1,active=2,repeat=2", 10),            # two windows, then nothing
    ("skip_first=3,wait=0,warmup=1,active=2,repeat=1", 8),
    ("warmup=0,active=1,repeat=3", 5),                    # a window per step
    ("warmup=1,active=4", 3),                             # exit mid-window: partial save
    ("wait=1,warmup=1,active=3,repeat=0", 13),            # repeat forever, partial at exit
    ("all", 4),
]

# (id, program --mode, TRAINPROF_STEP_ON or None for the default,
#  signal named in the metadata, launches per step)
SIGNALS = [
    ("api", "api", "api", "api", PER_STEP),
    ("default-both", "both", None, "nvtx:step", PER_STEP),
    ("nvtx", "nvtx", "nvtx:step", "nvtx:step", PER_STEP),
    ("call-sync", "none", "call:cudaStreamSynchronize", "call:cudaStreamSynchronize", PER_STEP),
    ("call-memcpy-2", "none", "call:cudaMemcpy/2", "call:cudaMemcpy/2", PER_STEP),
    ("launch-adam", "none", "launch:*adam*/1", "launch:*adam*/1", PER_STEP),
]


def _check_run(schedule, nsteps, mode, step_on, signal_text, per_step, steps_per_signal=1, extra_env=None):
    env = dict(extra_env or {})
    if schedule is not None:
        env["TRAINPROF_SCHEDULE"] = schedule
    if step_on is not None:
        env["TRAINPROF_STEP_ON"] = step_on
    r = tputil.run("train_loop", ["--steps=%d" % nsteps, "--launches=%d" % LAUNCHES,
                                  "--mode=" + mode], env=env)
    assert r.rc == 0, r.stderr.decode(errors="replace")
    for line in r.stderr.decode(errors="replace").splitlines():
        assert line.startswith("trainprof: "), line

    signals = nsteps // steps_per_signal
    expected = tputil.expected_windows(schedule, signals)
    names = [os.path.basename(p) for p in r.traces]
    assert names == sorted("rank0.%08d.pt.trace.json.gz" % b for b, _, _ in expected), \
        (names, expected, r.stderr.decode(errors="replace"))
    by_batch = {tputil.trace_batch(p): p for p in r.traces}

    for batch, exp_steps, partial in expected:
        trace = tputil.load_trace(by_batch[batch])
        got = tputil.steps(trace)
        # A window saved at exit may also show the unfinished step after the
        # last signal; it holds no launches (the program makes none after it).
        if partial and got == exp_steps + [signals]:
            exp_shown = exp_steps + [signals]
        else:
            exp_shown = exp_steps
        assert got == exp_shown, (batch, got, exp_steps)

        meta = trace["trainprof"]
        assert meta["step_signal"] == signal_text
        assert meta["steps_recorded"] == len(got)
        assert meta["dropped_events"] == 0
        if schedule != "all":
            # With `all` the save at exit is the window's planned end, not a
            # cut: "partial" as computed above does not apply.
            assert meta["partial"] is partial, (batch, meta["partial"])

        per = tputil.launches_per_step(trace)
        want = {s: per_step for s in exp_steps}
        if exp_shown != exp_steps:
            want[signals] = 0
        assert per == want, (batch, per, want)
        launches = tputil.launches(trace)
        assert len(launches) == sum(want.values()), "launch events outside any step"
        assert {la["args"]["kernel"] for la in launches} <= KERNELS
        adam = [la for la in launches if la["name"] == "__cudaLaunchKernel"]
        assert len(adam) == len(exp_steps) * steps_per_signal
        assert all(la["args"]["kernel"] == ADAM for la in adam)
        corr = [la["args"]["correlation"] for la in launches]
        assert len(set(corr)) == len(corr)


@pytest.mark.parametrize("schedule,nsteps", SCHEDULES,
                         ids=[s or "default" for s, _ in SCHEDULES])
@pytest.mark.parametrize("sig_id,mode,step_on,signal_text,per_step", SIGNALS,
                         ids=[s[0] for s in SIGNALS])
def test_schedule_and_signal(schedule, nsteps, sig_id, mode, step_on, signal_text, per_step):
    _check_run(schedule, nsteps, mode, step_on, signal_text, per_step)


def test_api_not_listed_ends_no_step():
    """TRAINPROF_STEP_ON=nvtx:step and a program that calls only
    trainprof_step(): its calls activate the library but end no step (api
    is not listed), so no window records and the warning at exit says no
    step signal came."""
    r = tputil.run("train_loop", ["--steps=8", "--mode=api"],
                   env={"TRAINPROF_STEP_ON": "nvtx:step",
                        "TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2"})
    assert r.rc == 0, r.stderr
    assert r.traces == [], r.traces
    assert b"no step signal seen" in r.stderr and b"TRAINPROF_STEP_ON=nvtx:step" in r.stderr, r.stderr


def test_launch_signal_every_second():
    """launch:GLOB/N counts every Nth matching launch: two iterations per step."""
    _check_run("wait=1,warmup=1,active=2,repeat=1", 10, "none", "launch:*adam*/2",
               "launch:*adam*/2", 2 * PER_STEP, steps_per_signal=2)


@pytest.mark.parametrize("schedule,nsteps", [SCHEDULES[1], SCHEDULES[5]])
@pytest.mark.parametrize("every", [1, 2])
def test_launch_signal_through_the_driver(schedule, nsteps, every):
    """FAKE_CUDART_LOOKUP=1: each runtime launch reaches the driver's
    cuLaunchKernel through the wrapper cuGetProcAddress handed out, as the
    real runtime's do.  Between windows the launches of kernels that hit no
    signal pass through the entry stubs (preload/wrap.h) without counting;
    the runtime launch and the driver launch inside it are one launch."""
    _check_run(schedule, nsteps, "none", "launch:*adam*/%d" % every, "launch:*adam*/%d" % every,
               every * PER_STEP, steps_per_signal=every, extra_env={"FAKE_CUDART_LOOKUP": "1"})


def test_launch_signal_counts_driver_launches():
    """Launches through the driver only (triton_like: 3 cuLaunchKernelEx, the
    kernel second in its arguments, then 1 cuLaunchKernel, first): with
    launch:GLOB/4 every step ends after its cuLaunchKernel, so a launch
    missed or counted twice shifts the order inside the recorded step."""
    r = tputil.run("triton_like", env={"TRITON_STEPS": "6", "TRAINPROF_STEP_ON": "launch:triton_poi*/4",
                                       "TRAINPROF_SCHEDULE": "wait=2,warmup=1,active=2,repeat=1"})
    assert r.rc == 0, r.stderr.decode(errors="replace")
    assert len(r.traces) == 1, r.traces
    trace = tputil.load_trace(r.traces[0])
    assert tputil.steps(trace) == [3, 4]
    launches = sorted((ev for ev in tputil.events(trace, ph="X")
                       if ev.get("name") in ("cuLaunchKernelEx", "cuLaunchKernel")), key=lambda ev: ev["ts"])
    for ev in tputil.events(trace, ph="X"):
        m = tputil.STEP_RE.match(ev.get("name", ""))
        if m:
            names = [la["name"] for la in launches
                     if ev["ts"] <= la["ts"] and la["ts"] + la["dur"] <= ev["ts"] + ev["dur"] + 1e-3]
            assert names == ["cuLaunchKernelEx"] * 3 + ["cuLaunchKernel"], (m.group(1), names)


def test_steps_are_not_counted_twice_by_default():
    """With the default `api,nvtx:step` and a program that gives both signals,
    9 iterations are 9 steps, not 18."""
    r = tputil.run("train_loop", ["--steps=9", "--mode=both"],
                   env={"TRAINPROF_SCHEDULE": "warmup=1,active=2,repeat=0"})
    assert r.rc == 0
    # steps 0..8, cycle of 3: saves after steps 2, 5, 8 -> batches 3, 6, 9
    # (counted twice, it would be 3, 6, ..., 18)
    assert [tputil.trace_batch(p) for p in r.traces] == [3, 6, 9]
