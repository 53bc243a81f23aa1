"""cuDNN backend API (preload/cudnn_backend.c): each cudnnBackendExecute is
one cpu_op event carrying the sum of the FLOPs of its plan's operation graph,
computed here by hand from the shapes of tests/programs/backend_calls.c,
whose descriptors are the real cuDNN's (plans built before the window) and
whose execute is the fake tests/fakes/cudnn_exec.c."""

import math

import tputil

PROG = "backend_calls"
SCHEDULE = "wait=0,warmup=1,active=4"


def conv_flops(n, c, k, g, h, w, r, s, pad, stride):
    """(flops of one pass, m, n, k, batch): 2 numel(y) prod(w[1:])."""
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - s) // stride + 1
    kk = (c // g) * r * s
    return 2 * n * k * p * q * kk, n, k, kk, p * q


# backend_calls.c: CONV (fwd + bwd-data + bwd-filter), CONV2 (fwd), matmul
CONV = conv_flops(2, 8, 16, 2, 16, 16, 3, 3, 1, 1)
CONV2 = conv_flops(4, 4, 8, 1, 12, 12, 5, 5, 0, 1)
MM_B, MM_M, MM_N, MM_K = 3, 32, 40, 64
MM = (2 * MM_B * MM_M * MM_N * MM_K, MM_M, MM_N, MM_K, MM_B)

PLANS = {
    "conv": (3 * CONV[0],) + CONV[1:],
    "conv2": CONV2,
    "matmul": MM,
}
# what each recorded step executes (step 0 is the warm-up)
STEPS = {1: ["conv"], 2: ["matmul", "conv"], 3: ["conv2", "matmul"], 4: ["conv2"]}


def test_hand_computed_examples():
    # N=2, C=8, groups 2, 16x16, K=16, 3x3 pad 1: y [2,16,16,16], C/g = 4
    assert CONV[0] == 2 * (2 * 16 * 16 * 16) * 4 * 9
    # N=4, C=4, 12x12, K=8, 5x5 no pad: y [4,8,8,8]
    assert CONV2[0] == 2 * (4 * 8 * 8 * 8) * 4 * 25
    assert MM[0] == 2 * 3 * 32 * 40 * 64
    assert len({PLANS[p][0] for p in PLANS}) == 3


def _run(shapes):
    env = {"TRAINPROF_SCHEDULE": SCHEDULE}
    if shapes:
        env["TRAINPROF_RECORD_SHAPES"] = "1"
    plain = tputil.run(PROG, preload=False)
    r = tputil.run(PROG, env=env)
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    assert len(r.traces) == 1, r.traces
    return r, tputil.load_trace(r.traces[0])


def test_execute_carries_the_plans_flops_per_step():
    r, trace = _run(shapes=True)
    assert tputil.steps(trace) == [1, 2, 3, 4]
    by_step = tputil.cpu_ops_by_step(trace)
    for step, plans in STEPS.items():
        evs = by_step[step]
        assert [ev["name"] for ev in evs] == ["cudnnBackendExecute"] * len(plans), (step, evs)
        for plan, ev in zip(plans, evs):
            flops, m, n, k, batch = PLANS[plan]
            a = ev["args"]
            # plans were built before the window; conv2 after conv's chain was
            # destroyed (its addresses mostly reused: no stale FLOPs)
            assert a["flops"] == flops, (step, plan, a, r.stderr)
            assert a["precision"] == "tf32", a
            assert (a["m"], a["n"], a["k"], a["batch"]) == (m, n, k, batch), (plan, a)
            assert a["Input type"] == ["float", "float"], a
            assert "status" not in a


def test_flops_total_and_reuse_reported():
    r, trace = _run(shapes=False)
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    assert len(ops) == sum(len(v) for v in STEPS.values())
    assert sum(ev["args"]["flops"] for ev in ops) == sum(
        PLANS[p][0] for v in STEPS.values() for p in v)
    # the program says how many of the destroyed plan's descriptor addresses
    # the second plan got back; the stale-FLOPs check above bites when some
    # were (glibc reuses them; ASan's quarantine does not)
    assert b"conv2 reused" in r.stderr, r.stderr
    la = [ev for ev in tputil.launches(trace) if ev["args"].get("kernel") == "cudnn_fake_conv"]
    assert len(la) == len(ops)
