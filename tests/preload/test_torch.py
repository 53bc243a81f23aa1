"""The real PyTorch (the PyPI wheel, on the CPU) under `trainprof run`: how
steps are counted from its optimizers, and torch's operators (through its
NVTX and ITT profiler states).  The workloads are
tests/programs/torch_client.py's; the helpers are test_real_clients.py's."""

import collections
import json
import os
import glob
import re
import subprocess
import sys

import pytest

import tputil
from test_real_clients import CLIENT, client, plain, listing


def run_all(mode):
    """`trainprof run --schedule all` of MODE: (process, the one trace)."""
    p, cwd, _ = client(mode, via_cli=True, env={"TRAINPROF_SCHEDULE": "all"})
    assert p.returncode == 0, p.stderr[-3000:]
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    return p, tputil.load_trace(traces[0])


def test_two_optimizers_count_one_step_per_iteration():
    """A GAN-shaped loop (two optimizers, both stepping every iteration)
    counts one step per iteration, as a one-optimizer loop of as many
    iterations does: the first optimizer that steps owns the steps."""
    base, _ = plain("twoopt")
    p, two = run_all("twoopt")
    assert p.stdout == base.stdout
    q, one = run_all("train")
    # operators stay on to the end under TRAINPROF_SCHEDULE=all; the hook
    # turns them off at exit, or torch warns of a leaked callback
    assert b"Leaked callback" not in q.stderr + p.stderr
    steps_two, steps_one = tputil.steps(two), tputil.steps(one)
    assert len(steps_one) >= 9, steps_one
    assert steps_two == steps_one, (steps_two, steps_one)


def optimizer_steps_by_step(trace):
    """{N: [(optimizer class, inside)]} for our ProfilerStep#N (External id
    2^48 + N) in a trace: each of torch's Optimizer.step#CLASS.step
    annotations that begins in it, and whether it also ends in it."""
    st = [(int(ev["name"].split("#")[1]), ev) for ev in tputil.events(trace, ph="X")
          if ev.get("name", "").startswith("ProfilerStep#")
          and ev.get("args", {}).get("External id", 0) >= 1 << 48]
    out = {n: [] for n, _ in st}
    anns = sorted((ev for ev in tputil.events(trace, ph="X")
                   if ev.get("name", "").startswith("Optimizer.step#")), key=lambda e: e["ts"])
    for ev in anns:
        for n, s in st:
            if s["ts"] <= ev["ts"] < s["ts"] + s["dur"]:
                cls = ev["name"][len("Optimizer.step#"):].split(".")[0]
                out[n].append((cls, _inside(ev, s)))
    return out


def test_steps_end_after_the_iterations_last_optimizer():
    """A step ends when the iteration's last optimizer's step() returns,
    after torch's Optimizer.step# annotation around it: with one optimizer
    each recorded step holds one annotation, inside it; in the GAN-shaped
    loop (AdamW for D, then SGD for G) step N holds iteration N's D then G
    steps, both inside it, from step 2 on (step 1 also holds iteration 0's
    G, which stepped before the cycle was known)."""
    for mode, per_step in (("train", [("AdamW", True)]),
                           ("twoopt", [("AdamW", True), ("SGD", True)])):
        p, cwd, _ = client(mode, via_cli=True)
        assert p.returncode == 0, p.stderr[-3000:]
        traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
        assert len(traces) == 1, listing(cwd)
        got = optimizer_steps_by_step(tputil.load_trace(traces[0]))
        assert sorted(got) == [1, 2, 3, 4], got
        for n in (2, 3, 4):
            assert got[n] == per_step, (mode, n, got)
        assert got[1][-len(per_step):] == per_step, (mode, got)


# ---- torch's operators -------------------------------------------------------

EPS = 0.002   # µs: timestamps are written with three decimals


def _inside(ev, outer):
    return (outer["ts"] - EPS <= ev["ts"] and
            ev["ts"] + ev.get("dur", 0) <= outer["ts"] + outer["dur"] + EPS)


def test_operators_of_real_torch():
    """torch's NVTX operator ranges (the real wheel, its NVTX profiler state
    on) become Kineto's cpu_op events: named without torch's fields, with
    External id and Record function id (torch's op_id) and Sequence number;
    Optimizer.step#... is a user_annotation; every operator lies inside a
    ProfilerStep of the window (default schedule: steps 1-4)."""
    base, _ = plain("nvtx")
    p, cwd, _ = client("nvtx", via_cli=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    t = tputil.load_trace(traces[0])
    ops = [e for e in t["traceEvents"] if e.get("cat") == "cpu_op"]
    names = {e["name"] for e in ops}
    assert {"aten::addmm", "aten::linear", "aten::relu", "AddmmBackward0"} <= names, names
    assert not [n for n in names if ", op_id = " in n or ", seq = " in n]
    ids = [e["args"]["External id"] for e in ops]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == len(ids)                    # one id per operator
    assert all(e["args"]["Record function id"] == e["args"]["External id"] for e in ops)
    assert any("Sequence number" in e["args"] for e in ops if e["name"] == "aten::addmm")
    notes = {e["name"] for e in t["traceEvents"] if e.get("cat") == "user_annotation"}
    assert "Optimizer.step#AdamW.step" in notes, notes
    steps = [e for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    assert len(steps) == 4
    assert all(any(_inside(e, s) for s in steps) for e in ops)
    check_autograd_links(t)


WRAPPER = "autograd::engine::evaluate_function: "


def check_autograd_links(t):
    """Kineto's autograd fields: each evaluate_function wrapper has its
    node's Sequence number (none where the node has none: AccumulateGrad),
    and fwdbwd flows join each numbered backward node (the end, "bp": "e",
    at the node's ts) to a forward operator of the same number that
    started before it (the start at its ts), every numbered node once."""
    ev = t["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    at = {(e["tid"], e["ts"]): e for e in ops}
    nodes = []
    for w in (e for e in ops if e["name"].startswith(WRAPPER)):
        node = [e for e in ops if e["tid"] == w["tid"] and e["name"] == w["name"][len(WRAPPER):]
                and _inside(e, w)]
        assert len(node) == 1, (w, node)
        assert w["args"].get("Sequence number") == node[0]["args"].get("Sequence number"), w
        if "Sequence number" in node[0]["args"]:
            nodes.append(node[0])
    assert len(nodes) >= 5, len(nodes)
    flows = collections.defaultdict(dict)
    for e in ev:
        if e.get("cat") == "fwdbwd":
            assert e["name"] == "fwdbwd"
            assert (e["tid"], e["ts"]) in at, e
            assert e["ph"] in "sf" and (e["ph"] == "s") == ("bp" not in e), e
            assert e["id"] not in flows or e["ph"] not in flows[e["id"]], e
            flows[e["id"]][e["ph"]] = at[(e["tid"], e["ts"])]
    assert sorted(id(f["f"]) for f in flows.values()) == sorted(id(n) for n in nodes)
    for f in flows.values():
        fwd, bwd = f["s"], f["f"]
        assert fwd["args"]["Sequence number"] == bwd["args"]["Sequence number"], f
        assert fwd["ts"] < bwd["ts"] and not fwd["name"].startswith(WRAPPER), f


def test_operators_link_calls_and_kernels_on_the_fakes():
    """Ranges shaped like torch's around fake CUDA calls (nvtx_ranges
    --torch-ops) with the fake CUPTI: each call, and the device work it
    launched, carries the External id of the innermost operator open on its
    thread; calls outside any operator carry none."""
    r = tputil.run("nvtx_ranges", ["--steps", 6, "--torch-ops", "--sleep-us", 20000],
                   env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2"})
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, r.stderr
    t = tputil.load_trace(r.traces[0])
    ev = t["traceEvents"]
    ops = {e["args"]["External id"]: e for e in ev if e.get("cat") == "cpu_op"}
    assert sorted(e["name"] for e in ops.values()) == ["aten::addmm"] * 2 + ["aten::linear"] * 2
    for e in ops.values():
        if e["name"] == "aten::addmm":
            assert e["args"]["Input Dims"] == [[4], [8, 16], [16, 4]]
            assert "Sequence number" not in e["args"]
        else:
            assert e["args"]["Sequence number"] in (2, 3)
    launches = [e for e in ev if e.get("name") == "cudaLaunchKernel"]
    assert len(launches) == 2
    for l in launches:
        op = ops[l["args"]["External id"]]
        assert op["name"] == "aten::addmm" and _inside(l, op)
    copies = [e for e in ev if e.get("name") == "cudaMemcpy"]
    linked = [c for c in copies if c["args"].get("External id") in ops]
    assert len(linked) == 2 and len(copies) > len(linked)
    for c in linked:
        assert ops[c["args"]["External id"]]["name"] == "aten::linear"
    # the others, outside any operator, carry their step's External id
    steps = {e["args"]["External id"]: e for e in ev if e.get("name", "").startswith("ProfilerStep#")}
    assert len(steps) == 2 and all(i >= 1 << 48 for i in steps)
    for c in copies:
        if c not in linked:
            assert _inside(c, steps[c["args"]["External id"]])
    # the device side, through the launch's correlation
    by_corr = {e["args"]["correlation"]: e for e in launches + linked}
    dev = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy") and
           e["args"].get("correlation") in by_corr]
    assert len(dev) == 4, dev
    for d in dev:
        assert d["args"]["External id"] == by_corr[d["args"]["correlation"]]["args"]["External id"]


def _op_ranges_state(stderr):
    """{iteration: whether torch's operator ranges were on after its step}"""
    out = {}
    for line in stderr.decode(errors="replace").splitlines():
        if line.startswith("op-ranges "):
            _, i, on = line.split()
            out[int(i)] = on == "True"
    return out


def test_operator_ranges_only_while_profiling():
    """`trainprof run` of a plain loop (no emit_nvtx of its own): the hook
    turns torch's operator ranges on for the warmup and recording steps
    (default schedule: step 0 warms up, 1-4 record) and off at the step
    where the window ends, for good; the trace has the operators, each
    inside a step; with TRAINPROF_RECORD_SHAPES=1 they carry Input Dims."""
    base, _ = plain("train")
    p, cwd, _ = client("train", via_cli=True, env={"TRAINPROF_RECORD_SHAPES": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    # the ranges go off outside every open annotation: turned off inside
    # Optimizer.step#, torch's NVTX observer found no profiler state at the
    # annotation's end and printed an 18-line INTERNAL ASSERT
    assert b"RecordFunction callback" not in p.stderr and b"INTERNAL ASSERT" not in p.stderr, \
        p.stderr[-3000:]
    state = _op_ranges_state(p.stderr)
    assert state == {i: i < 4 for i in range(10)}, state
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    t = tputil.load_trace(traces[0])
    ops = [e for e in t["traceEvents"] if e.get("cat") == "cpu_op"]
    steps = [e for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    assert len(steps) == 4 and ops
    assert all(any(_inside(e, s) for s in steps) for e in ops)
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    assert addmm and all(e["args"]["Input Dims"][1] == [32, 64] or
                         e["args"]["Input Dims"][1] == [32, 128] for e in addmm), addmm[:2]
    # without the library nothing turns them on
    assert not any(_op_ranges_state(base.stderr).values())


def _summary_rows(path, heading):
    """[{column title: cell}] of the table under "heading" in a summary
    report, cut where its dashed rule puts the columns (names and input
    shapes hold spaces)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    i = lines.index(heading)
    spans = [m.span() for m in re.finditer(r"-+", lines[i + 1])]

    def cells(line):
        return [line[a:b].strip() for a, b in spans[:-1]] + [line[spans[-1][0]:].strip()]

    titles = cells(lines[i + 2])
    rows = []
    for line in lines[i + 4:]:
        if line.startswith("---"):
            break
        rows.append(dict(zip(titles, cells(line))))
    return rows


def _summary_table(path, heading):
    """{name: {column title: cell}} of the table under "heading"."""
    return {r["Name"]: r for r in _summary_rows(path, heading)}


def test_summary_operator_table_on_the_fakes():
    """The summary's operator table: calls, host time, self host time (less
    the operators called inside) and the device time of the work linked to
    each operator (the fake CUPTI's kernel and copy)."""
    r = tputil.run("nvtx_ranges", ["--steps", 6, "--torch-ops", "--sleep-us", 20000],
                   env={"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2"})
    assert r.rc == 0, r.stderr
    reports = glob.glob(os.path.join(r.cwd, "*", "reports", "*.summary.txt"))
    assert len(reports) == 1, listing(r.cwd)
    rows = _summary_table(reports[0], "Operators (PyTorch)")
    # the program's ranges, and the steps' row (nvtx_ranges has no annotation)
    assert sorted(rows) == ["ProfilerStep*", "aten::addmm", "aten::linear"], rows
    lin, add = rows["aten::linear"], rows["aten::addmm"]
    calls, total, self_, gpu = (lin[k] for k in ("Calls", "Host total (ms)", "Self host (ms)", "GPU (ms)"))
    a_calls, a_total, a_self, a_gpu = (add[k] for k in ("Calls", "Host total (ms)", "Self host (ms)",
                                                         "GPU (ms)"))
    assert calls == a_calls == "2"
    assert float(a_self) == float(a_total)                  # addmm calls no operator
    assert abs(float(self_) - (float(total) - float(a_total))) <= 0.002
    assert float(gpu) > 0 and float(a_gpu) > 0              # the copy; the kernel


def _torch_key_averages():
    """torch.profiler's key_averages(group_by_input_shape=True) of the same
    train loop (torch_client.py keyavg): {(name, input shapes): calls}."""
    p = subprocess.run([sys.executable, CLIENT, "keyavg"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(l) for l in p.stdout.decode().splitlines() if l.startswith("{")]
    return {(r["name"], r["input_shapes"]): r["calls"] for r in rows}


def test_summary_operator_tables_of_real_torch():
    """`trainprof run --record-shapes` of the train loop: the summary's
    operator table is key_averages().table()'s: torch's record_function
    annotations (AdamW's step and zero_grad) and the steps are rows, the
    Self host % column adds up to 100% and Host total % of the steps is
    about 100% (all the operators ran inside them); the table by input shape
    has the (name, shapes) keys torch's own key_averages(group_by_input_shape
    =True) has for the linears and their addmm, with a call per recorded
    step for each."""
    p, cwd, _ = client("train", via_cli=True, run_args=["--record-shapes"])
    assert p.returncode == 0, p.stderr[-3000:]
    reports = glob.glob(os.path.join(cwd, "*", "reports", "*.summary.txt"))
    assert len(reports) == 1, listing(cwd)
    text = open(reports[0], encoding="utf-8").read()
    assert "more rows left out" not in text.split("Operators by input shape")[0]
    rows = _summary_table(reports[0], "Operators (PyTorch)")
    steps = rows["ProfilerStep*"]
    n_steps = int(steps["Calls"])
    assert n_steps == 4, steps
    for name in ("Optimizer.step#AdamW.step", "Optimizer.zero_grad#AdamW.zero_grad"):
        assert int(rows[name]["Calls"]) == n_steps, rows[name]
    step = rows["Optimizer.step#AdamW.step"]
    # AdamW's step runs operators: its self time is less than its total
    assert float(step["Self host (ms)"]) < float(step["Host total (ms)"]), step
    pct = lambda c: float(c.rstrip("%"))
    shares = [pct(r["Self host %"]) for r in rows.values()]
    assert abs(sum(shares) - 100.0) <= 0.005 * len(shares) + 0.01, sum(shares)
    assert abs(pct(steps["Host total %"]) - 100.0) <= 0.02, steps
    # the shares are of the self time of all rows, which the line names
    all_ms = float(re.search(r"self host time of all rows, ([0-9.]+) ms", text).group(1))
    assert abs(sum(float(r["Self host (ms)"]) for r in rows.values()) - all_ms) <= 0.001 * len(rows)
    # by input shape, against torch's own grouping of the same loop
    ours = collections.defaultdict(int)
    for r in _summary_rows(reports[0], "Operators by input shape"):
        ours[(r["Name"], r["Input Shapes"])] += int(r["Calls"])
    theirs = _torch_key_averages()
    for name in ("aten::addmm", "aten::linear"):
        mine = {k: c for k, c in ours.items() if k[0] == name}
        torch_keys = {k: c for k, c in theirs.items() if k[0] == name}
        assert set(mine) == set(torch_keys) and len(mine) == 2, (mine, torch_keys)
        for k in mine:               # torch profiled all 10 iterations; we 4 steps
            assert mine[k] * 10 == torch_keys[k] * n_steps, (k, mine[k], torch_keys[k])
    assert ("Optimizer.step#AdamW.step", "[]") in ours and ("Optimizer.step#AdamW.step", "[]") in theirs
    # summary.json marks the rows' kinds and carries the by-shape rows
    sj = glob.glob(os.path.join(cwd, "*", "reports", "*.summary.json"))[0]
    d = json.load(open(sj))
    kinds = {r["name"]: r["kind"] for r in d["operators"]["top"]}
    assert kinds["ProfilerStep*"] == "step" and kinds["Optimizer.step#AdamW.step"] == "annotation"
    assert kinds["aten::addmm"] == "operator"
    top = d["operators_by_shape"]["top"]         # the 20 largest rows
    m = re.search(r"\n(\d+) more rows left out", text.split("Operators by input shape")[1])
    assert d["operators_by_shape"]["distinct"] == len(ours) + (int(m.group(1)) if m else 0)
    addmm = {(r["name"], r["input_shapes"]) for r in top if r["name"] == "aten::addmm"}
    assert addmm and addmm <= {k for k in theirs if k[0] == "aten::addmm"}, addmm


@pytest.mark.parametrize("shapes", [False, True], ids=["itt", "shapes"])
def test_readers_see_the_operators(shapes):
    """The TensorBoard plugin's operator view and HTA read the operators of
    a `trainprof run` of the real torch: the plugin's per-name calls and self
    host time agree with our summary's operator table; HTA's trace has them
    as cpu_op events in its iterations.  With shapes (torch's NVTX state:
    sequence numbers, fwdbwd flows) the plugin's view by input shape has
    aten::addmm's shapes, one row per layer, and HTA loads the trace with
    its flows."""
    import tempfile
    try:
        from torch_tb_profiler import consts
        from torch_tb_profiler.profiler.data import RunProfileData
        from torch_tb_profiler.profiler.run_generator import RunGenerator
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # pragma: no cover - depends on the environment
        import pytest
        pytest.skip("a trace reader cannot be imported: %r" % (e,))
    p, cwd, _ = client("train", via_cli=True, env={"TRAINPROF_RECORD_SHAPES": "1"} if shapes else {})
    assert p.returncode == 0, p.stderr[-3000:]
    path = glob.glob(os.path.join(cwd, "*", "traces", "*"))[0]
    assert ('"fwdbwd"' in tputil.read_raw(path)) == shapes
    m = consts.WORKER_PATTERN.match(os.path.basename(path))
    worker, span = m.group(1), m.group(2)[1:] if m.group(2) else None
    data = RunProfileData.parse(worker, span, path, tempfile.mkdtemp())
    profile = RunGenerator(worker, span, data).generate_run_profile()
    view = profile.operation_table_by_name["data"]
    tb = {r["name"]: r for r in view}
    if shapes:
        by_shape = [r for r in profile.operation_table_by_name_input["data"] if r["name"] == "aten::addmm"]
        # the MLP of torch_client.py: Linear(64, 128) and Linear(128, 10), batch 32
        assert sorted(r["input_shape"] for r in by_shape) == [
            "[[10], [32, 128], [128, 10], [], []]", "[[128], [32, 64], [64, 128], [], []]"], by_shape
    summary = glob.glob(os.path.join(cwd, "*", "reports", "*.summary.txt"))[0]
    ours = _summary_table(summary, "Operators (PyTorch)")
    for name in ("aten::addmm", "aten::relu", "aten::mm"):
        calls, self_ms = ours[name]["Calls"], ours[name]["Self host (ms)"]
        assert tb[name]["calls"] == int(calls), (name, tb[name], ours[name])
        assert abs(tb[name]["host_self_duration"] / 1000.0 - float(self_ms)) <= 0.002 * int(calls) + 0.002
    hta_dir = tempfile.mkdtemp()
    os.symlink(path, os.path.join(hta_dir, os.path.basename(path)))
    t = TraceAnalysis(trace_dir=hta_dir, include_last_profiler_step=True).t
    df = t.get_trace(0)
    names = t.symbol_table.get_sym_table()
    ops = df[df["name"].map(lambda i: names[i]) == "aten::addmm"]
    assert len(ops) == int(ours["aten::addmm"]["Calls"])
    assert set(int(i) for i in ops["iteration"]) == {1, 2, 3, 4}


# ---- ITT: the cheaper way to the same operators --------------------------------

ITT_IDS = (1 << 44, 1 << 48)     # preload/itt.c's External ids


def _train_ops(env):
    """`trainprof run` of the plain loop: (process, trace, ops, steps)."""
    p, cwd, _ = client("train", via_cli=True, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    t = tputil.load_trace(traces[0])
    ev = t["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    steps = [e for e in ev if e.get("name", "").startswith("ProfilerStep#")]
    return p, t, ops, steps


def test_operators_through_itt():
    """Without shapes the hook announces torch's operators through ITT, the
    library being torch's ITT collector: the same operators, name for name
    and count for count, as torch's NVTX state gives for the same loop (with
    shapes, which only NVTX carries), each inside a step, with External ids
    of the library's ITT range and no sequence numbers (ITT carries none)."""
    base, _ = plain("train")
    p, _t, ops, steps = _train_ops({})
    assert p.stdout == base.stdout
    assert b"Leaked callback" not in p.stderr and not our_lines_warn(p.stderr)
    assert len(steps) == 4 and ops
    assert all(ITT_IDS[0] <= e["args"]["External id"] < ITT_IDS[1] for e in ops)
    assert len({e["args"]["External id"] for e in ops}) == len(ops)
    assert not [e for e in ops if "Sequence number" in e["args"] or "Input Dims" in e["args"]]
    assert all(any(_inside(e, s) for s in steps) for e in ops)
    q, _tn, nvtx_ops, _ = _train_ops({"TRAINPROF_RECORD_SHAPES": "1"})
    assert all(e["args"]["External id"] < ITT_IDS[0] for e in nvtx_ops)
    assert collections.Counter(e["name"] for e in ops) == \
        collections.Counter(e["name"] for e in nvtx_ops)


def test_itt_of_another_tool_keeps_nvtx():
    """INTEL_LIBITTNOTIFY64 naming another tool's collector is left to it:
    the hook keeps to torch's NVTX state (sequence numbers, torch's ids)."""
    p, _t, ops, steps = _train_ops({"INTEL_LIBITTNOTIFY64": "/nonexistent/libother_collector.so"})
    assert len(steps) == 4 and ops
    assert all(e["args"]["External id"] < ITT_IDS[0] for e in ops)
    assert any("Sequence number" in e["args"] for e in ops)


def test_only_torch_itt_domain_becomes_operators():
    """The library is the process's ITT collector, so oneDNN's own tasks
    (one "convolution" or "reorder" per primitive run, in its domains
    "dnnl::primitive::*") reach it too.  Only torch's domain becomes
    operators: a CNN's trace has torch's convolutions, and none of oneDNN's
    tasks, as a cpu_op or a user_annotation (torch.profiler shows none)."""
    base, _ = plain("cnn")
    p, cwd, _ = client("cnn", via_cli=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == base.stdout
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    ev = tputil.load_trace(traces[0])["traceEvents"]
    ops = collections.Counter(e["name"] for e in ev if e.get("cat") == "cpu_op")
    notes = collections.Counter(e["name"] for e in ev if e.get("cat") == "user_annotation")
    assert ops["aten::convolution"] >= 8 and ops["aten::mkldnn_convolution"] >= 8, ops
    assert all(ITT_IDS[0] <= e["args"]["External id"] < ITT_IDS[1]
               for e in ev if e.get("cat") == "cpu_op")
    dnnl = ("convolution", "reorder", "eltwise", "inner_product", "pooling", "sum")
    assert not [n for n in list(ops) + list(notes) if n in dnnl], (ops, notes)
    # torch's record_function annotations, and our steps, are all there is
    assert set(notes) == {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4",
                          "Optimizer.zero_grad#SGD.zero_grad", "Optimizer.step#SGD.step"}, notes


def our_lines_warn(stderr):
    return [l for l in stderr.decode(errors="replace").splitlines()
            if l.startswith("trainprof:") and ("warning" in l or "error" in l)]
