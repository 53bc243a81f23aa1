"""Per-step library FLOPs: the trace's trainprof.steps and the
FLOPs / TFLOP/s counters agree with the GEMM and convolution events."""

import pathlib

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


def test_summary_flops_equal_the_trace():
    r = tputil.run("gemm_calls", env={"TRAINPROF_PEAK_TFLOPS": "100"})
    assert r.rc == 0, r.stderr
    trace = tputil.load_trace(r.traces[0])
    meta = trace["trainprof"]
    reports = sorted(pathlib.Path(r.cwd, "test", "reports").glob("*.summary.txt"))
    assert len(reports) == 1
    text = reports[0].read_text()
    rows = {}
    in_steps = False
    for line in text.splitlines():
        if line.startswith("Per-step wall time"):
            in_steps = True
        elif in_steps and line.startswith("Mean step"):
            in_steps = False
        elif in_steps and line[:1].isdigit():
            cols = line.split()
            rows[int(cols[0])] = float(cols[2])
    assert rows == {s["step"]: round(s["flops"] / 1e9, 3) for s in meta["steps"]}
    total = [l for l in text.splitlines() if l.startswith("Library FLOPs total:")]
    lib_flops = sum(ev["args"].get("flops", 0) for ev in tputil.events(trace, ph="X", cat="cpu_op"))
    assert total == [f"Library FLOPs total: {lib_flops / 1e9:.3f} GFLOP"]
    assert "of 100.0 TFLOP/s (TRAINPROF_PEAK_TFLOPS)" in text
    for name in {ev["name"] for ev in tputil.events(trace, ph="X", cat="cpu_op")}:
        assert name in text
