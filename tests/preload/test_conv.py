"""Legacy cuDNN convolutions (collector/record/apis/cudnn.def): each call is one cpu_op
event with the FLOPs, precision and implicit-GEMM shape computed here by hand
from the cases of tests/programs/conv_calls.c, whose descriptors are the real
cuDNN's and whose executing calls are the fake tests/fakes/cudnn_exec.c."""

import math

import tputil

PROG = "conv_calls"
CALLS = ("cudnnConvolutionForward", "cudnnConvolutionBiasActivationForward",
         "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter")
SCHEDULE = "wait=0,warmup=1,active=5"

# name, torch "Input type" name, precision, N, C, K, groups, input, filter, pad, stride, dilation
CASES = [
    ("basic", "float", "tf32", 2, 8, 16, 1, (16, 16), (3, 3), (1, 1), (1, 1), (1, 1)),
    ("grouped", "c10::Half", "fp16", 2, 8, 16, 4, (16, 16), (3, 3), (1, 1), (1, 1), (1, 1)),
    ("strided", "float", "fp32", 2, 8, 16, 1, (16, 16), (3, 3), (1, 1), (2, 2), (1, 1)),
    ("conv3d", "c10::BFloat16", "bf16", 1, 4, 8, 2, (8, 8, 8), (3, 3, 3), (0, 0, 0), (2, 2, 2),
     (1, 1, 1)),
    ("depthwise", "double", "fp64", 1, 6, 6, 6, (12, 10), (3, 3), (2, 2), (1, 1), (2, 2)),
]


def expected(case):
    """(flops, m, n, k, batch) of every pass of a case."""
    _, _, _, n, c, k, g, inp, filt, pad, stride, dil = case
    out = [(i + 2 * p - d * (f - 1) - 1) // s + 1
           for i, f, p, s, d in zip(inp, filt, pad, stride, dil)]
    kk = (c // g) * math.prod(filt)
    batch = math.prod(out)
    # 2 * numel(y or dy) * prod(w.dims[1:])
    return 2 * (n * k * batch) * kk, n, k, kk, batch


def test_hand_computed_examples():
    # the brief's example: N=2, C=8, H=W=16, K=16, 3x3, stride 1, pad 1
    assert expected(CASES[0])[0] == 2 * (2 * 16 * 16 * 16) * 8 * 9
    # grouped: C/groups = 2 input channels per filter
    assert expected(CASES[1])[0] == 2 * (2 * 16 * 16 * 16) * 2 * 9
    # strided: the output is 8x8
    assert expected(CASES[2])[0] == 2 * (2 * 16 * 8 * 8) * 8 * 9
    # 3-D, groups 2, stride 2, no padding: 3x3x3 out
    assert expected(CASES[3])[0] == 2 * (1 * 8 * 27) * 2 * 27
    # depthwise, dilation 2, pad 2: same-size output
    assert expected(CASES[4])[0] == 2 * (1 * 6 * 12 * 10) * 1 * 9


def _run(shapes):
    env = {"TRAINPROF_SCHEDULE": SCHEDULE}
    if shapes:
        env["TRAINPROF_RECORD_SHAPES"] = "1"
    return tputil.run_beside_plain(PROG, env)[1]


def test_each_call_once_with_flops_precision_and_shapes():
    trace = _run(shapes=True)
    assert tputil.steps(trace) == [1, 2, 3, 4, 5]
    by_step = tputil.cpu_ops_by_step(trace)
    # step 0 (warm-up) and the call after the last step are not recorded
    assert sum(len(v) for v in by_step.values()) == len(CASES) * len(CALLS)
    for i, case in enumerate(CASES):
        evs = by_step[i + 1]
        assert [ev["name"] for ev in evs] == list(CALLS), (case[0], evs)
        flops, m, n, k, batch = expected(case)
        for ev in evs:
            a = ev["args"]
            assert a["flops"] == flops, (case[0], ev["name"], a)
            assert a["precision"] == case[2], (case[0], ev["name"], a)
            assert (a["m"], a["n"], a["k"], a["batch"]) == (m, n, k, batch), (case[0], a)
            assert a["Input type"] == [case[1], case[1]], a
            assert a["Input Dims"] == [[m, k], [k, n]], a
            assert "status" not in a


def test_flops_without_shapes_and_launches_inside_recorded():
    trace = _run(shapes=False)
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    assert len(ops) == len(CASES) * len(CALLS)
    total = sum(ev["args"]["flops"] for ev in ops)
    assert total == len(CALLS) * sum(expected(c)[0] for c in CASES)
    for ev in ops:
        assert "m" not in ev["args"] and "Input Dims" not in ev["args"], ev
    # the fake launches one kernel per call: recorded too, on its own
    la = [ev for ev in tputil.launches(trace) if ev["args"].get("kernel") == "cudnn_fake_conv"]
    assert len(la) == len(ops)
    for ev in ops:
        inner = [x for x in la if ev["ts"] <= x["ts"] and x["ts"] + x["dur"] <= ev["ts"] + ev["dur"] + 1e-3]
        assert len(inner) == 1, ev
