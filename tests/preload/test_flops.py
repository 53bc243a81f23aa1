"""Per-step library FLOPs (issue 3): the trace's trainprof.steps and the
FLOPs / TFLOP/s counters agree with the GEMM and convolution events."""

import pytest

import tputil


def _step_spans(trace):
    return {int(ev["name"].split("#")[1]): (ev["ts"], ev["ts"] + ev["dur"])
            for ev in tputil.events(trace, ph="X", cat="user_annotation")
            if ev["name"].startswith("ProfilerStep#")}


@pytest.mark.parametrize("prog", ["gemm_calls", "conv_calls"])
def test_step_flops_match_the_library_events(prog):
    r = tputil.run(prog, env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1
    trace = tputil.load_trace(r.traces[0])
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    assert ops and any(ev["args"].get("flops") for ev in ops)
    spans = _step_spans(trace)
    want = {i: 0 for i in spans}
    for ev in ops:
        for i, (t0, t1) in spans.items():
            if t0 <= ev["ts"] < t1:
                want[i] += ev["args"].get("flops", 0)
    meta = trace["trainprof"]
    got = {s["step"]: s["flops"] for s in meta["steps"]}
    assert got == want
    assert meta["flops"] == sum(ev["args"].get("flops", 0) for ev in ops)
    assert sum(want.values()) > 0
    for s in meta["steps"]:
        wall_ns = s["wall_ms"] * 1e6
        assert s["tflops_per_s"] == pytest.approx(s["flops"] / wall_ns / 1e3, rel=1e-3, abs=1e-9)
    # one FLOPs counter sample at each step's start, with the step's FLOPs
    samples = {ev["ts"]: ev["args"]["FLOPs"] for ev in tputil.events(trace, ph="C", name="FLOPs")}
    for i, (t0, _) in spans.items():
        assert samples.get(t0) == want[i], (i, t0)


def test_no_library_calls_means_zero_flops():
    r = tputil.run("train_loop", ["--steps=8"])
    trace = tputil.load_trace(r.traces[0])
    meta = trace["trainprof"]
    assert meta["flops"] == 0
    assert [s["flops"] for s in meta["steps"]] == [0, 0, 0, 0]
    assert [s["step"] for s in meta["steps"]] == [1, 2, 3, 4]
