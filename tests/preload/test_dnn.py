"""cuDNN beyond the convolutions (collector/record/apis/cudnn.def): the handle,
dropout state setup, RNNs, batch normalization, pooling, spatial
transformers, CTC loss and benchmark mode's algorithm searches.  Each call of
tests/programs/dnn_calls.c (real cuDNN descriptors, the fake executing calls
of tests/fakes/cudnn_exec.c) is one cpu_op event under its own name; RNN
FLOPs are computed here from the sizes the program prints; the searches keep
their convolution's shape but count no FLOPs, in the trace and the summary."""

import collections
import pathlib
import re

import tputil

PROG = "dnn_calls"
CALL_RE = re.compile(r"^([A-Za-z_0-9]+) -> (-?\d+)$")
RNN_RE = re.compile(r"^rnn (\w+): cell=(\d) bidirectional=(\d) skip_input=(\d) input=(\d+) "
                    r"hidden=(\d+) proj=(\d+) layers=(\d+) seq=(\d+) batch=(\d+) lens=([\d,]+)$")
DIMS_RE = re.compile(r"^(?:bn \w+: type=\d+|pool:|spatial:|ctc:) \w+=\[([\d,]+)\]$")
FIND_RE = re.compile(r"^find: x=\[([\d,]+)\] w=\[([\d,]+)\] y=\[([\d,]+)\]$")

# data type and math of each RNN case of dnn_calls.c: (precision, torch type name)
RNN_TYPES = {"lstm1": ("tf32", "float"), "gru_bi": ("fp16", "c10::Half"),
             "lstm_proj": ("fp32", "float"), "tanh_skip": ("fp64", "double")}
BN_TYPES = {"0": "float", "2": "c10::Half"}   # cudnnDataType_t FLOAT, HALF
GATES = {0: 1, 1: 1, 2: 4, 3: 3}              # RNN_RELU, RNN_TANH, LSTM, GRU
NO_PAYLOAD = {"cudnnCreate", "cudnnSetDropoutDescriptor", "cudnnSpatialTfGridGeneratorForward",
              "cudnnSpatialTfGridGeneratorBackward"}
RNN_CALLS = {"cudnnRNNForward", "cudnnRNNBackwardData_v8", "cudnnRNNBackwardWeights_v8"}
FIND_CALLS = {"cudnnFindConvolutionForwardAlgorithmEx",
              "cudnnFindConvolutionBackwardDataAlgorithmEx",
              "cudnnFindConvolutionBackwardFilterAlgorithmEx"}


def rnn_flops(cell, bidirectional, skip_input, inp, hidden, proj, layers, seq, lens):
    """One pass: per layer, direction and computed time step, the input GEMM
    (2*G*H*in), the recurrent GEMM (2*G*H*P) and the LSTM projection
    (2*P*H when P < H); backward data and backward weights count the same."""
    g, d = GATES[cell], 2 if bidirectional else 1
    tokens = sum(min(n, seq) for n in lens)
    per_step = 0
    for layer in range(layers):
        width = 0 if layer == 0 and skip_input else inp if layer == 0 else proj * d
        per_step += 2 * g * hidden * width + 2 * g * hidden * proj
        if proj < hidden:
            per_step += 2 * proj * hidden
    return d * tokens * per_step


def test_hand_computed_rnn_flops():
    # one LSTM layer, 3 sequences of 5: 15 steps of (4*20*10 + 4*20*20) MACs
    assert rnn_flops(2, 0, 0, 10, 20, 20, 1, 5, [5, 5, 5]) == 2 * 15 * (800 + 1600)
    # bidirectional 2-layer GRU, 15 steps: layer 0 3*16*(8+16), layer 1 3*16*(32+16)
    assert rnn_flops(3, 1, 0, 8, 16, 16, 2, 6, [6, 5, 3, 1]) == \
        2 * 2 * 15 * (3 * 16 * 24 + 3 * 16 * 48)
    # LSTM with projection 32 -> 8: the recurrent GEMM reads 8, plus 8*32
    assert rnn_flops(2, 0, 0, 12, 32, 8, 2, 4, [4, 4]) == \
        2 * 8 * ((4 * 32 * 12 + 4 * 32 * 8 + 8 * 32) + (4 * 32 * 8 + 4 * 32 * 8 + 8 * 32))
    # skip input: no layer-0 input GEMM; sequence lengths 3 and 2
    assert rnn_flops(1, 0, 1, 16, 16, 16, 2, 3, [3, 2]) == 2 * 5 * (256 + 512)


def _calls(stdout):
    """[(call name, context line before it)] in program order."""
    out, ctx = [], None
    for line in stdout.decode().splitlines():
        m = CALL_RE.match(line)
        if m:
            assert m.group(2) == "0", line
            out.append((m.group(1), ctx))
        else:
            ctx = line
    return out


def _run(shapes=True):
    env = {"TRAINPROF_SCHEDULE": "all"}
    if shapes:
        env["TRAINPROF_RECORD_SHAPES"] = "1"
    return tputil.run_beside_plain(PROG, env)


def _expected_rnn(ctx):
    m = RNN_RE.match(ctx)
    assert m, ctx
    name = m.group(1)
    cell, bi, skip, inp, hid, proj, layers, seq, batch = (int(x) for x in m.groups()[1:10])
    lens = [int(x) for x in m.group(11).split(",")]
    d = 2 if bi else 1
    dims = [[seq, batch, inp], [layers * d, batch, proj]]
    return rnn_flops(cell, bi, skip, inp, hid, proj, layers, seq, lens), RNN_TYPES[name], dims


def test_each_call_once_under_its_own_name_with_flops_and_shapes():
    r, trace = _run()
    calls = _calls(r.stdout)
    ops = sorted(tputil.events(trace, ph="X", cat="cpu_op"), key=lambda e: e["ts"])
    assert [ev["name"] for ev in ops] == [c for c, _ in calls]
    want = RNN_CALLS | FIND_CALLS | NO_PAYLOAD | {
        "cudnnBatchNormalizationForwardTrainingEx", "cudnnBatchNormalizationForwardInference",
        "cudnnBatchNormalizationBackwardEx", "cudnnPoolingForward",
        "cudnnSpatialTfSamplerForward", "cudnnSpatialTfSamplerBackward", "cudnnCTCLoss",
        "cudnnCTCLoss_v8"}
    assert {c for c, _ in calls} == want
    rnn_total = 0
    for ev, (name, ctx) in zip(ops, calls):
        a = ev["args"]
        assert "status" not in a, ev
        if name in RNN_CALLS:
            flops, (prec, tname), dims = _expected_rnn(ctx)
            assert a["flops"] == flops, (name, ctx, a)
            assert a["precision"] == prec, (name, ctx, a)
            assert a["Input Dims"] == dims, (name, ctx, a)
            assert a["Input type"] == [tname, tname], (name, a)
            rnn_total += flops
        elif name in FIND_CALLS:
            m = FIND_RE.match(ctx)
            x, w, y = ([int(v) for v in g.split(",")] for g in m.groups())
            k, spatial = w[1] * w[2] * w[3], y[2] * y[3]
            # the convolution it times, as cudnnConvolutionForward would show it ...
            assert (a["m"], a["n"], a["k"], a["batch"]) == (y[0], y[1], k, spatial), a
            assert a["Input Dims"] == [[y[0], k], [k, y[1]]], a
            assert a["precision"] == "tf32", a
            # ... but none of its 2*numel(y)*C*R*S FLOPs: tuning, not training
            assert a["flops"] == 0, a
        elif name in NO_PAYLOAD:
            assert "flops" not in a and "Input Dims" not in a, (name, a)
        else:
            m = DIMS_RE.match(ctx)
            assert m, ctx
            dims = [int(v) for v in m.group(1).split(",")]
            tname = BN_TYPES[ctx.split("type=")[1].split()[0]] if ctx.startswith("bn ") \
                else "float"
            assert "flops" not in a, (name, a)
            assert a["Input Dims"] == [dims], (name, ctx, a)
            assert a["Input type"] == [tname], (name, a)
    assert rnn_total > 0
    # the run's FLOPs are the RNN passes' alone
    assert trace["trainprof"]["flops"] == rnn_total


def test_searches_add_no_flops_to_the_summary():
    r, trace = _run(shapes=False)
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    rnn_total = sum(ev["args"]["flops"] for ev in ops if ev["name"] in RNN_CALLS)
    assert rnn_total > 0
    for ev in ops:
        assert "Input Dims" not in ev["args"] and "m" not in ev["args"], ev
        if ev["name"] in FIND_CALLS:
            assert ev["args"]["flops"] == 0, ev
    assert trace["trainprof"]["flops"] == rnn_total
    reports = sorted(pathlib.Path(r.cwd, "test", "reports").glob("*.summary.txt"))
    assert len(reports) == 1
    text = reports[0].read_text()
    total = [l for l in text.splitlines() if l.startswith("Library FLOPs total:")]
    assert total == [f"Library FLOPs total: {rnn_total / 1e9:.3f} GFLOP"]
    rows = {l.split()[0]: l.split() for l in text.splitlines()
            if l.split() and l.split()[0] in FIND_CALLS | RNN_CALLS}
    assert set(rows) == FIND_CALLS | RNN_CALLS, text
    for name in FIND_CALLS:
        assert rows[name][4:6] == ["--", "--"], rows[name]
    for name in RNN_CALLS:
        assert rows[name][4] != "--", rows[name]


def test_launches_inside_are_recorded():
    _, trace = _run(shapes=False)
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    la = [ev for ev in tputil.launches(trace) if ev["args"].get("kernel") == "cudnn_fake_op"]
    inner = collections.Counter()
    for ev in ops:
        inner[ev["name"]] += sum(1 for x in la if ev["ts"] <= x["ts"] and
                                 x["ts"] + x["dur"] <= ev["ts"] + ev["dur"] + 1e-3)
    calls = collections.Counter(ev["name"] for ev in ops)
    # every executing call launches one kernel (a search one per algorithm
    # it reports: one), dropout setup one for the states; cudnnCreate none
    assert inner == calls - collections.Counter({"cudnnCreate": 1}), (inner, calls)
    assert len(la) == sum(inner.values())
