"""cuDNN backend API (preload/cudnn_backend.c): each cudnnBackendExecute is
one cpu_op event carrying the sum of the FLOPs of its plan's operation graph,
computed here by hand from the shapes of tests/programs/backend_calls.c,
whose descriptors are the real cuDNN's (plans built before the window) and
whose execute is the fake tests/fakes/cudnn_exec.c; and the attention and
fused plans of tests/programs/sdpa_calls.c, built the same way, against
torch.utils.flop_counter."""

import pytest

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
    return tputil.run_beside_plain(PROG, env)


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


# ---- attention and fused graphs against torch.utils.flop_counter ----------
#
# tests/programs/sdpa_calls.c builds each plan below with the real cuDNN's
# descriptors (as cudnn-frontend would for PyTorch's cuDNN SDPA: one fused
# SDPA op, or the matmul + pointwise graph it may build instead) and executes
# each once in step 1.  The reference is what FlopCounterMode reports for the
# matching aten op on meta tensors: torch's MFU numbers.  Both count the full
# s_q x s_kv score matrix when the attention is causal ("We aren't accounting
# for causal attention", flop_counter.py) and ignore dropout; GQA/MQA counts
# the query heads (K/V heads are broadcast).

SDPA_PROG = "sdpa_calls"
PAGE = 64   # sdpa_calls.c: K/V page block size
ATTN = [
    # kind, (b, hq, hk, sq, sk, dq, dv), flags: c causal, d dropout,
    # p padding (seq lengths), r ragged offsets, g paged K/V
    ("fwd", (2, 8, 8, 128, 256, 64, 64), ""),
    ("fwd", (2, 8, 2, 128, 256, 64, 32), ""),        # GQA, d_q != d_v
    ("fwd", (1, 16, 1, 64, 192, 128, 128), ""),      # MQA
    ("fwd", (2, 8, 8, 128, 256, 64, 64), "p"),
    ("fwd", (2, 8, 2, 100, 256, 64, 64), "g"),       # paged: 4 pages of 64
    ("fwd", (4, 4, 4, 96, 96, 64, 64), "pr"),
    ("bwd", (2, 8, 8, 128, 256, 64, 64), ""),
    ("bwd", (2, 8, 2, 128, 256, 64, 32), "p"),
    ("cfwd", (2, 8, 8, 128, 256, 64, 64), ""),
    ("cfwd", (2, 8, 8, 128, 256, 64, 64), "c"),
    ("cfwd", (2, 8, 2, 128, 256, 64, 32), "cd"),
    ("cfwd", (4, 4, 1, 96, 96, 64, 64), "cdpr"),
    ("cbwd", (2, 8, 8, 128, 256, 64, 64), ""),
    ("cbwd", (2, 8, 8, 128, 256, 64, 64), "c"),
    ("cbwd", (2, 8, 2, 128, 256, 64, 32), "cd"),
    ("cbwd", (4, 4, 1, 96, 96, 64, 64), "cdpr"),     # 35 ops: dQ's matmul last
]
FUSED = [
    ("convbiasrelu", (2, 8, 16, 16, 16, 3, 3)),      # n, c, h, w, k, r, s (pad r//2)
    ("matmulbias", (3, 32, 40, 64)),                 # batch, m, n, k
    ("layernorm", (64, 256)),                        # rows, features
]


def _plan_arg(kind, shape, flags=""):
    return "%s:%s%s" % (kind, ",".join(map(str, shape)), ":" + flags if flags else "")


def torch_attention_flops(kind, shape, flags):
    """FlopCounterMode's count for PyTorch's cuDNN attention op (forward or
    backward) on meta tensors of the logical shapes."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    aten = torch.ops.aten
    b, hq, hk, sq, sk, dq, dv = shape
    causal, dropout = "c" in flags, (0.1 if "d" in flags else 0.0)

    def t(*s):
        return torch.empty(*s, device="meta", dtype=torch.bfloat16)

    q, k, v = t(b, hq, sq, dq), t(b, hk, sk, dq), t(b, hk, sk, dv)
    with FlopCounterMode(display=False) as fwd:
        out = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, dropout, causal, False)
    if kind in ("fwd", "cfwd"):
        return fwd.get_total_flops()
    o, lse, cq, ck, _, _, seed, off, _ = out
    with FlopCounterMode(display=False) as bwd:
        aten._scaled_dot_product_cudnn_attention_backward(
            torch.empty_like(o), q, k, v, o, lse, seed, off, t(0), cq, ck, sq, sk, dropout, causal)
    return bwd.get_total_flops()


def torch_fused_flops(kind, shape):
    """FlopCounterMode's count for the eager PyTorch ops the fused graph does."""
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    def t(*s):
        return torch.empty(*s, device="meta", dtype=torch.bfloat16)

    with FlopCounterMode(display=False) as m:
        if kind == "convbiasrelu":
            n, c, h, w, k, r, s = shape
            F.relu(F.conv2d(t(n, c, h, w), t(k, c, r, s), t(k), padding=(r // 2, s // 2)))
        elif kind == "matmulbias":
            bt, mm, nn, kk = shape
            torch.baddbmm(t(1, 1, nn), t(bt, mm, kk), t(bt, kk, nn))
        else:
            rows, feats = shape
            F.layer_norm(t(rows, feats), (feats,), t(feats), t(feats))
    return m.get_total_flops()


def test_attention_and_fused_graphs_match_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    # PyTorch's varlen/nested cuDNN attention (ragged offsets, paged K/V)
    # runs aten._cudnn_attention_forward, for which flop_counter has no
    # formula; its own rule when sequence lengths are unknown (fake offsets,
    # _offsets_to_lengths) is the padded maximum, which is what the plans'
    # descriptors give us too (the lengths live on the device)
    assert torch.ops.aten._cudnn_attention_forward not in FlopCounterMode(display=False).flop_registry
    plans = [_plan_arg(*a) for a in ATTN] + [_plan_arg(k, s) for k, s in FUSED]
    want = [torch_attention_flops(*a) for a in ATTN] + [torch_fused_flops(*f) for f in FUSED]
    assert all(w > 0 for w in want[:len(ATTN)]) and want[-1] == 0, want
    plain = tputil.run(SDPA_PROG, args=plans, preload=False)
    r = tputil.run(SDPA_PROG, args=plans, env={"TRAINPROF_SCHEDULE": "wait=0,warmup=1,active=1",
                                               "TRAINPROF_RECORD_SHAPES": "1"})
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    assert len(r.traces) == 1, r.traces
    evs = tputil.cpu_ops_by_step(tputil.load_trace(r.traces[0]))[1]
    assert [ev["name"] for ev in evs] == ["cudnnBackendExecute"] * len(plans)
    got = [ev["args"]["flops"] for ev in evs]
    bad = [(p, g, w) for p, g, w in zip(plans, got, want) if g != w]
    assert not bad, "plan, ours, flop_counter: %s" % bad
    for (kind, shape, flags), ev in zip(ATTN, evs):
        a = ev["args"]
        assert a["precision"] == "bf16", (kind, a)
        if kind in ("fwd", "bwd"):   # the fused op: m, n, k, batch = s_q, s_kv, d_q, b h_q
            b, hq, hk, sq, sk, dq, dv = shape
            assert (a["m"], a["n"], a["k"], a["batch"]) == (sq, sk, dq, b * hq), (kind, flags, a)
