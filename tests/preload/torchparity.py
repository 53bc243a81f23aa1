"""Compare a trace of `trainprof run` with torch.profiler's trace of the same
program, step by step (a trace a torch.profiler user cannot tell from torch's
own).  Used by tests/preload/test_torch_parity.py and by
tests/bench/torch_parity_table.py.

The program is tests/programs/torch_four.py MODEL: run once as
`trainprof run --record-shapes --schedule SCHEDULE -- python torch_four.py
MODEL plain` and once as `python torch_four.py MODEL torchprof OUTDIR
SCHEDULE` (torch.profiler with record_shapes and the same schedule).  Both
record the iterations the schedule names: torch's ProfilerStep#N is
iteration N (prof.step() ends each iteration), and so is ours (README, step
signal `api`: step N is iteration N from the second iteration on), so step N
of one trace is compared with step N of the other.

Every comparison returns a list of problems (strings), empty when the two
agree, so that a test asserts it is empty and the table counts them.  An
event's step is the ProfilerStep#N whose interval holds it; within a step,
operators are matched by (name, k): the k-th operator of that name in time
order (ties: the outer one first).
"""

import collections
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys

import tputil

PROGRAM = os.path.join(tputil.ROOT, "tests", "programs", "torch_four.py")
TRAINPROF = os.path.join(tputil.ROOT, "scripts", "trainprof")
MODELS = ("mlp", "cnn", "transformer", "gan")
ITERS = 6                                   # torch_four.py's ITERS
BATCH = 8                                   # torch_four.py's BATCH: iteration i has BATCH + i
SCHEDULE = "wait=2,warmup=1,active=3"       # iterations 3-5; 0-1 wait, 2 warms up
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

# Timestamps are written in µs with three decimals (ns), each of ts and dur
# rounded on its own, so an event's end (ts + dur) computed back from the
# trace can be off by a rounding unit or two from where it was recorded.
# Events on one thread are ordered by the clock that stamps them (a child
# begins after its parent and ends before it), so this rounding is the only
# slack a proper tree needs.
EPS = 0.002


def recorded_steps(schedule=SCHEDULE, iters=ITERS):
    """The step numbers the schedule records in a run of `iters` iterations
    (tputil's independent implementation of torch.profiler.schedule)."""
    kw = tputil.parse_schedule(schedule)
    return [n for n in range(iters) if tputil.schedule_fn(n, **kw) in (tputil.RECORD, tputil.RECORD_AND_SAVE)]


# ---- running the program ---------------------------------------------------------

def run_ours(model, schedule=SCHEDULE, timeout=300):
    """`trainprof run --record-shapes --schedule S --no-gzip` of MODEL plain:
    (CompletedProcess, folder, [trace paths])."""
    cwd = tputil.new_dir()
    env = tputil.base_env({"TRAINPROF_SYS": None, "PYTHONDONTWRITEBYTECODE": "1"}, preload=False)
    if os.environ.get("TP_TEST_ASAN"):
        env["LD_PRELOAD"] = os.environ["TP_TEST_ASAN"]
    cmd = [sys.executable, TRAINPROF, "run", "--lib", tputil.lib_path(), "--record-shapes",
           "--schedule", schedule, "--no-gzip", "--",
           sys.executable, PROGRAM, model, "plain"]
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p, cwd, sorted(glob.glob(os.path.join(cwd, "*", "traces", "*")))


def run_torch(model, schedule=SCHEDULE, timeout=300):
    """MODEL under torch.profiler (torchprof mode), without the library:
    (CompletedProcess, folder, [trace paths])."""
    cwd = tputil.new_dir()
    env = tputil.base_env({"TRAINPROF_SYS": None, "PYTHONDONTWRITEBYTECODE": "1"}, preload=False)
    out = os.path.join(cwd, "torch")
    cmd = [sys.executable, PROGRAM, model, "torchprof", out, schedule]
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p, cwd, sorted(glob.glob(os.path.join(out, "*.json")))


def run_both(model, schedule=SCHEDULE):
    """Both runs of MODEL, side by side (one core each): ((p, cwd, traces) of
    ours, of torch's)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        a = pool.submit(run_ours, model, schedule)
        b = pool.submit(run_torch, model, schedule)
        return a.result(), b.result()


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ---- reading a trace ---------------------------------------------------------------

def steps(trace):
    """{N: the ProfilerStep#N event}, and problems (a step written twice)."""
    out, problems = {}, []
    for ev in trace.get("traceEvents", []):
        m = STEP_RE.match(ev.get("name", "")) if ev.get("ph") == "X" else None
        if m:
            n = int(m.group(1))
            if n in out:
                problems.append("ProfilerStep#%d written twice" % n)
            out[n] = ev
    return out, problems


def end(ev):
    return ev["ts"] + ev.get("dur", 0)


def inside(ev, outer):
    return outer["ts"] - EPS <= ev["ts"] and end(ev) <= end(outer) + EPS


def ranges(trace):
    """The cpu_op and user_annotation X events, less the ProfilerStep#N ones."""
    return [ev for ev in trace.get("traceEvents", [])
            if ev.get("ph") == "X" and ev.get("cat") in ("cpu_op", "user_annotation")
            and not STEP_RE.match(ev.get("name", ""))]


def order(evs):
    """Time order, the outer of two events that begin together first."""
    return sorted(evs, key=lambda e: (e["ts"], -e.get("dur", 0)))


def by_step(trace):
    """{N: [events of ranges() inside ProfilerStep#N, in order()]} and the
    events inside no step or inside several (the latter only in a broken
    trace: steps do not overlap)."""
    st, _ = steps(trace)
    out = {n: [] for n in st}
    stray = []
    for ev in order(ranges(trace)):
        hits = [n for n, s in st.items() if inside(ev, s)]
        if len(hits) == 1:
            out[hits[0]].append(ev)
        else:
            stray.append((ev, hits))
    return out, stray


def ops(evs):
    return [e for e in evs if e.get("cat") == "cpu_op"]


def annotations(evs):
    return [e for e in evs if e.get("cat") == "user_annotation"]


def occurrences(evs):
    """{(name, k): event}: the k-th event of each name, in the given order."""
    seen = collections.Counter()
    out = {}
    for e in evs:
        out[(e["name"], seen[e["name"]])] = e
        seen[e["name"]] += 1
    return out


# ---- the comparisons -----------------------------------------------------------------

# Operator names that may appear on one side only, with the reason.  Empty:
# on the four programs the names and counts agree exactly.
ONLY_TORCH = {}
ONLY_OURS = {}


def _counter_diff(a, b):
    """Entries of Counter a beyond b, and of b beyond a."""
    return dict(a - b), dict(b - a)


def tree_problems(evs):
    """The events of each thread form a proper tree: two events are
    disjoint or one holds the other, within EPS."""
    problems = []
    threads = collections.defaultdict(list)
    for ev in evs:
        threads[(ev.get("pid"), ev.get("tid"))].append(ev)
    for key, tevs in threads.items():
        stack = []
        for ev in order(tevs):
            while stack and end(stack[-1]) <= ev["ts"] + EPS:
                stack.pop()
            if stack and end(ev) > end(stack[-1]) + EPS:
                problems.append("thread %s: %s [%.3f, %.3f] overlaps %s [%.3f, %.3f]" % (
                    key[1], ev["name"], ev["ts"], end(ev), stack[-1]["name"],
                    stack[-1]["ts"], end(stack[-1])))
                continue
            stack.append(ev)
    return problems


def nesting_problems(trace):
    """(b) Every cpu_op and user_annotation lies inside exactly one
    ProfilerStep, and the X events of each thread (steps included) form a
    proper tree."""
    st, problems = steps(trace)
    _, stray = by_step(trace)
    for ev, hits in stray:
        problems.append("%s at %.3f is inside steps %s" % (ev["name"], ev["ts"], hits))
    return problems + tree_problems(ranges(trace) + list(st.values()))


def sequence_numbers(evs):
    """{(name, k): Sequence number relative to the smallest in evs}."""
    occ = occurrences(ops(evs))
    seqs = {k: e["args"]["Sequence number"] for k, e in occ.items() if "Sequence number" in e["args"]}
    if not seqs:
        return {}
    base = min(seqs.values())
    return {k: v - base for k, v in seqs.items()}


def flows(trace):
    """(pairs, problems): pairs {N: Counter((forward op, backward op))} of
    the fwdbwd flows, in the step of their forward op.  torch writes each
    flow as {"ph": "s", "cat": "fwdbwd", "id": K, "ts": <its forward op's
    ts>} and {"ph": "f", ..., "bp": "e", "ts": <its backward op's ts>} on the
    ops' pid and tid: an end point is the operator that begins at that ts
    on that thread (the innermost, should two begin together; in torch's
    traces of the four programs none do)."""
    problems = []
    points = collections.defaultdict(dict)
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") == "fwdbwd" and ev.get("ph") in ("s", "f"):
            if ev["ph"] in points[ev.get("id")]:
                problems.append("fwdbwd flow %s has two '%s' points" % (ev.get("id"), ev["ph"]))
            points[ev.get("id")][ev["ph"]] = ev
            if ev["ph"] == "f" and ev.get("bp") != "e":
                problems.append("fwdbwd flow %s: 'f' without \"bp\": \"e\"" % ev.get("id"))
    by_thread = collections.defaultdict(list)
    for ev in ops(ranges(trace)):
        by_thread[(ev.get("pid"), ev.get("tid"))].append(ev)

    def op_at(p):
        hits = [e for e in by_thread.get((p.get("pid"), p.get("tid")), ())
                if abs(e["ts"] - p["ts"]) <= EPS / 2]
        return min(hits, key=lambda e: e.get("dur", 0)) if hits else None

    st, _ = steps(trace)
    out = {n: collections.Counter() for n in st}
    for fid, pts in sorted(points.items(), key=lambda kv: str(kv[0])):
        if set(pts) != {"s", "f"}:
            problems.append("fwdbwd flow %s lacks a point: has %s" % (fid, sorted(pts)))
            continue
        fwd, bwd = op_at(pts["s"]), op_at(pts["f"])
        if fwd is None or bwd is None:
            problems.append("fwdbwd flow %s: no operator at its %s point" % (
                fid, "start" if fwd is None else "end"))
            continue
        if bwd["ts"] < fwd["ts"]:
            problems.append("fwdbwd flow %s ends before it starts" % fid)
        hits = [n for n, s in st.items() if inside(fwd, s)]
        if len(hits) == 1:
            out[hits[0]][(fwd["name"], bwd["name"])] += 1
        else:
            problems.append("fwdbwd flow %s: its forward op is in steps %s" % (fid, hits))
    return out, problems


class Pair:
    """Our trace and torch's of one program, read once; each check is per
    step N (of the steps both recorded) and returns problems, and for some
    a count of what it compared."""

    def __init__(self, ours, theirs):
        self.ours, self.theirs = ours, theirs
        self.steps_ours, _ = steps(ours)
        self.steps_theirs, _ = steps(theirs)
        self.steps = sorted(set(self.steps_ours) & set(self.steps_theirs))
        self.bo, self.stray_ours = by_step(ours)
        self.bt, self.stray_theirs = by_step(theirs)
        self._flows = None

    def step_problems(self):
        if sorted(self.steps_ours) != sorted(self.steps_theirs):
            return ["recorded steps differ: ours %s, torch's %s" % (
                sorted(self.steps_ours), sorted(self.steps_theirs))]
        return []

    def names(self, n):
        """(a) the multiset of cpu_op names in step n, but for ONLY_TORCH
        and ONLY_OURS."""
        co = collections.Counter(e["name"] for e in ops(self.bo[n]))
        ct = collections.Counter(e["name"] for e in ops(self.bt[n]))
        more, fewer = _counter_diff(co, ct)
        more = {k: v for k, v in more.items() if k not in ONLY_OURS}
        fewer = {k: v for k, v in fewer.items() if k not in ONLY_TORCH}
        if more or fewer:
            return ["step %d: operators only ours %s, only torch's %s" % (n, more, fewer)]
        return []

    def annotations(self, n):
        """(d) the multiset of user_annotation names in step n
        (Optimizer.step#..., Optimizer.zero_grad#..., the program's
        record_function ranges)."""
        co = collections.Counter(e["name"] for e in annotations(self.bo[n]))
        ct = collections.Counter(e["name"] for e in annotations(self.bt[n]))
        if co != ct:
            more, fewer = _counter_diff(co, ct)
            return ["step %d: annotations only ours %s, only torch's %s" % (n, more, fewer)]
        return []

    def nesting(self, n):
        """(b) within step n of ours: the step and its events form a tree."""
        return ["step %d: %s" % (n, p) for p in tree_problems([self.steps_ours[n]] + self.bo[n])]

    def dims(self, n):
        """(c) each operator's Input Dims in step n, matched by (name, k).
        torch.profiler writes Input Dims on every operator with inputs; ours
        come from torch's NVTX messages, which carry shapes and no dtypes,
        so dtypes are not compared.  (problems, operators compared)"""
        oo, ot = occurrences(ops(self.bo[n])), occurrences(ops(self.bt[n]))
        problems, compared = [], 0
        for key in sorted(set(oo) & set(ot)):
            a = oo[key]["args"].get("Input Dims")
            b = ot[key]["args"].get("Input Dims")
            compared += 1
            if a != b:
                problems.append("step %d: %s #%d Input Dims ours %s, torch's %s" % (n, key[0], key[1], a, b))
        return problems, compared

    def sequence(self, n):
        """(e) which operators of step n carry a Sequence number (forward ops
        that make autograd nodes, backward ops, and the
        autograd::engine::evaluate_function wrappers) and its value relative
        to the step's smallest: the same on both sides.  (Both runs are the
        same program from the same start, and the absolute numbers agree
        too; relative ones are what a reader links by.)  (problems,
        operators compared)"""
        so, stt = sequence_numbers(self.bo[n]), sequence_numbers(self.bt[n])
        problems, compared = [], 0
        missing = sorted(set(stt) - set(so))
        extra = sorted(set(so) - set(stt))
        if missing:
            names = collections.Counter(k[0] for k in missing)
            problems.append("step %d: %d operators lack torch's Sequence number: %s" % (
                n, len(missing), dict(names)))
        if extra:
            problems.append("step %d: Sequence number where torch has none: %s" % (n, extra[:5]))
        for key in sorted(set(so) & set(stt)):
            compared += 1
            if so[key] != stt[key]:
                problems.append("step %d: %s #%d Sequence number +%d, torch's +%d" % (
                    n, key[0], key[1], so[key], stt[key]))
        return problems, compared

    def flow_pairs(self):
        if self._flows is None:
            fo, po = flows(self.ours)
            ft, pt = flows(self.theirs)
            self._flows = (fo, ft, ["ours: " + p for p in po] + ["torch's: " + p for p in pt])
        return self._flows

    def flows(self, n):
        """(f) the multiset of (forward op, backward op) pairs that fwdbwd
        flows join, by the step of the forward op.  (problems, our flows,
        torch's flows)"""
        fo, ft, _ = self.flow_pairs()
        a, b = fo.get(n, collections.Counter()), ft.get(n, collections.Counter())
        if a != b:
            more, fewer = _counter_diff(a, b)
            return (["step %d: %d flows, torch's %d; only ours %s, only torch's %s" % (
                n, sum(a.values()), sum(b.values()), more, fewer)], sum(a.values()), sum(b.values()))
        return [], sum(a.values()), sum(b.values())


def _over_steps(pair, check):
    problems = pair.step_problems()
    for n in pair.steps:
        r = check(n)
        problems += r[0] if isinstance(r, tuple) else r
    return problems


def compare_names(ours, theirs):
    p = Pair(ours, theirs)
    return _over_steps(p, p.names)


def compare_annotations(ours, theirs):
    p = Pair(ours, theirs)
    return _over_steps(p, p.annotations)


def compare_dims(ours, theirs):
    """(problems, operators compared)"""
    p = Pair(ours, theirs)
    return _over_steps(p, p.dims), sum(p.dims(n)[1] for n in p.steps)


def compare_sequence_numbers(ours, theirs):
    """(problems, operators compared)"""
    p = Pair(ours, theirs)
    return _over_steps(p, p.sequence), sum(p.sequence(n)[1] for n in p.steps)


def compare_flows(ours, theirs):
    """(problems, torch's flows in the common steps)"""
    p = Pair(ours, theirs)
    return p.flow_pairs()[2] + _over_steps(p, p.flows), sum(p.flows(n)[2] for n in p.steps)


def compare_all(ours, theirs):
    """{check: problems} of every comparison."""
    return {
        "names": compare_names(ours, theirs),
        "annotations": compare_annotations(ours, theirs),
        "nesting": nesting_problems(ours),
        "dims": compare_dims(ours, theirs)[0],
        "sequence": compare_sequence_numbers(ours, theirs)[0],
        "flows": compare_flows(ours, theirs)[0],
    }
