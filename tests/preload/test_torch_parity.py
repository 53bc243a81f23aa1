"""`trainprof run` against torch.profiler on real PyTorch: a trace
a torch.profiler user cannot tell from torch's own.

Four kinds of training program (tests/programs/torch_four.py: an MLP with
AdamW, a CNN with SGD, a TransformerEncoderLayer with Adam, a GAN whose
discriminator and generator each step an Adam every iteration) run once
under `trainprof run --record-shapes` and once under torch.profiler
(record_shapes, CPU), both with the schedule wait=2,warmup=1,active=3, so
both record iterations 3-5 (torch's ProfilerStep#N is iteration N, and so is
ours: README, step signal `api`).  Step N of our trace is compared with
torch's ProfilerStep#N (tests/preload/torchparity.py): (a) the operators'
names and counts, (b) nesting (every operator and annotation inside exactly
one step, each thread's events a proper tree), (c) each operator's Input
Dims, (d) the annotations, (e) Sequence numbers, (f) the fwdbwd flows.
Iteration i trains on BATCH + i samples, so matching shapes also say that
the steps hold the same iterations.

A program with its own torch.profiler outside our window (its ProfilerStep#N
ranges reach the library through ITT and NVTX while ours records) has each
of our steps once: tests/preload/test_own_profiler.py, mode "late" and
test_torch_profiler_steps_not_written_through_nvtx.

tests/bench/torch_parity_table.py prints the same comparison as a table.
"""

import collections
import copy
import functools
import os

import pytest

import tputil
import torchparity as tp

if os.environ.get("TP_TEST_NO_TORCH") == "1":
    pytest.skip("TP_TEST_NO_TORCH=1", allow_module_level=True)

STEPS = tp.recorded_steps()


@functools.lru_cache(maxsize=None)
def _runs(model):
    (po, _, to), (pt, _, tt) = tp.run_both(model)
    return po, to, pt, tt


def pair(model):
    """(our trace, torch's trace) of MODEL, run once per test session."""
    po, to, pt, tt = _runs(model)
    assert po.returncode == 0, po.stderr[-3000:]
    assert pt.returncode == 0, pt.stderr[-3000:]
    assert len(to) == 1 and len(tt) == 1, (to, tt)
    return tp.load(to[0]), tp.load(tt[0])


def test_schedule_records_iterations_3_to_5():
    assert STEPS == [3, 4, 5]


@pytest.mark.parametrize("model", tp.MODELS)
def test_both_record_the_same_steps(model):
    """Both runs succeed, print the same losses (the profilers change
    nothing the program computes, and trainprof writes nothing on stdout),
    and record steps 3-5, each once; our stderr has no torch assertion."""
    ours, theirs = pair(model)
    po, _, pt, _ = _runs(model)
    assert po.stdout == pt.stdout and po.stdout.count(b"\n") == tp.ITERS
    err = po.stderr.decode(errors="replace")
    assert "Traceback" not in err and "INTERNAL ASSERT" not in err, err[-3000:]
    assert tputil.steps(ours) == STEPS
    assert tputil.steps(theirs) == STEPS
    assert ours["trainprof"]["operators_lost"] is None


@pytest.mark.parametrize("model", tp.MODELS)
def test_operator_names_and_counts_per_step(model):
    ours, theirs = pair(model)
    assert tp.compare_names(ours, theirs) == []
    p = tp.Pair(ours, theirs)
    assert all(len(tp.ops(p.bo[n])) > 50 for n in STEPS)


@pytest.mark.parametrize("model", tp.MODELS)
def test_nesting(model):
    """Every operator and annotation of ours inside exactly one step; on
    each thread a proper tree (within tp.EPS, the rounding of ts and dur to
    the ns: on these programs the overlap measured without any tolerance is
    0).  torch's own trace passes the same check."""
    ours, theirs = pair(model)
    assert tp.nesting_problems(ours) == []
    assert tp.nesting_problems(theirs) == []


@pytest.mark.parametrize("model", tp.MODELS)
def test_input_dims(model):
    """Each operator's Input Dims, matched by (name, k) within its step:
    every operator compared (a step's names agree, so all pair up)."""
    ours, theirs = pair(model)
    problems, compared = tp.compare_dims(ours, theirs)
    assert problems == []
    assert compared == sum(len(tp.ops(ev)) for ev in tp.by_step(theirs)[0].values())


@pytest.mark.parametrize("model", tp.MODELS)
def test_annotations_per_step(model):
    ours, theirs = pair(model)
    assert tp.compare_annotations(ours, theirs) == []
    names = collections.Counter(e["name"] for e in tp.annotations(tp.ranges(ours)))
    assert any(n.startswith("Optimizer.step#") for n in names), names
    assert any(n.startswith("Optimizer.zero_grad#") for n in names), names


@pytest.mark.parametrize("model", tp.MODELS)
def test_sequence_numbers(model):
    """Sequence numbers on the same operators as torch's, forward ops,
    backward ops and the autograd::engine::evaluate_function wrappers,
    with the same values relative to the step's first."""
    ours, theirs = pair(model)
    problems, compared = tp.compare_sequence_numbers(ours, theirs)
    assert problems == []
    assert compared > 0


@pytest.mark.parametrize("model", tp.MODELS)
def test_fwdbwd_flows(model):
    """The fwdbwd flows join the same (forward op, backward op) pairs in
    each step as torch's."""
    ours, theirs = pair(model)
    problems, total = tp.compare_flows(ours, theirs)
    assert problems == []
    assert total > 0


def test_gan_one_step_per_iteration():
    """The GAN's two Adams both step every iteration: our step N holds
    iteration N, as torch's ProfilerStep#N does: both Optimizer.step
    annotations (D's, then G's) inside it, and every matrix product on
    iteration N's batch of BATCH + N samples."""
    ours, theirs = pair("gan")
    for trace in (ours, theirs):
        st, _ = tp.steps(trace)
        per_step, _ = tp.by_step(trace)
        assert sorted(per_step) == STEPS
        for n in STEPS:
            notes = [e for e in tp.annotations(per_step[n]) if e["name"].startswith("Optimizer.step#")]
            assert [e["name"] for e in notes] == ["Optimizer.step#Adam.step"] * 2, (n, notes)
            assert all(tp.inside(e, st[n]) for e in notes)
            rows = {e["args"]["Input Dims"][1][0] for e in tp.ops(per_step[n]) if e["name"] == "aten::addmm"}
            assert rows == {tp.BATCH + n}, (n, rows)


@pytest.mark.parametrize("model", tp.MODELS)
def test_comparisons_accept_torch_against_itself(model):
    """The comparisons find nothing between torch's trace and itself, and
    that comparison covers sequence numbers and flows: (e) and (f) hold
    for a trace in torch's own format."""
    _, theirs = pair(model)
    assert tp.compare_all(theirs, theirs) == {k: [] for k in
                                              ("names", "annotations", "nesting", "dims", "sequence", "flows")}
    assert tp.compare_sequence_numbers(theirs, theirs)[1] > 0
    assert tp.compare_flows(theirs, theirs)[1] > 0


def _perturbed(trace, change):
    t = copy.deepcopy(trace)
    change(t["traceEvents"])
    return t


def _first(evs, pred):
    return next(e for e in evs if pred(e))


def test_comparisons_catch_differences():
    """Each comparison reports a difference made on purpose in a copy of
    torch's MLP trace (so that the tests above can fail); a step that holds
    another iteration (steps 3 and 5 swapped) shows in the shapes."""
    _, theirs = pair("mlp")
    s4 = _first(theirs["traceEvents"], lambda e: e.get("name") == "ProfilerStep#4")

    def in4(pred):
        return lambda e: pred(e) and tp.inside(e, s4)

    def rename(evs):
        _first(evs, in4(lambda e: e.get("name") == "aten::relu"))["name"] = "aten::gelu"

    def reshape(evs):
        _first(evs, in4(lambda e: e.get("name") == "aten::addmm"))["args"]["Input Dims"][1][0] += 1

    def straddle(evs):      # an operator that begins in step 4 and ends in 5
        e = _first(evs, in4(lambda e: e.get("cat") == "cpu_op"))
        e["dur"] = s4["ts"] + s4["dur"] - e["ts"] + 5.0

    def overlap(evs):       # a child that outlives its parent by 1 µs
        p = _first(evs, in4(lambda e: e.get("name") == "aten::linear"))
        c = _first(evs, lambda e: e.get("name") == "aten::addmm" and e["ts"] > p["ts"])
        c["dur"] = p["ts"] + p["dur"] - c["ts"] + 1.0

    def unannotate(evs):
        evs.remove(_first(evs, in4(lambda e: e.get("name", "").startswith("Optimizer.zero_grad#"))))

    def renumber(evs):
        _first(evs, in4(lambda e: e.get("name") == "AddmmBackward0"))["args"]["Sequence number"] += 1

    def unsequence(evs):
        del _first(evs, in4(lambda e: e.get("name", "").startswith(
            "autograd::engine::evaluate_function:")))["args"]["Sequence number"]

    def unflow(evs):
        evs.remove(_first(evs, lambda e: e.get("cat") == "fwdbwd" and e["ph"] == "f"))

    def reflow(evs):        # a flow's start moved to another forward op
        f = _first(evs, lambda e: e.get("cat") == "fwdbwd" and e["ph"] == "s" and tp.inside(e, s4))
        other = _first(evs, in4(lambda e: e.get("name") == "aten::linear"))
        f["ts"] = other["ts"]

    def swap(evs):          # steps 3 and 5 trade numbers: the same operators,
        steps = {e["name"]: e for e in evs if tp.STEP_RE.match(e.get("name", ""))}
        steps["ProfilerStep#3"]["name"], steps["ProfilerStep#5"]["name"] = \
            "ProfilerStep#5", "ProfilerStep#3"      # on other batch sizes

    # change -> the checks that must report it (a renamed operator also
    # changes its sequence number's key and its flow's pair; one that
    # straddles two steps leaves step 4, which the other checks may see)
    cases = [(rename, {"names", "sequence", "flows"}), (reshape, {"dims"}),
             (straddle, {"nesting"}), (overlap, {"nesting"}), (unannotate, {"annotations"}),
             (renumber, {"sequence"}), (unsequence, {"sequence"}), (unflow, {"flows"}),
             (reflow, {"flows"}), (swap, {"dims"})]
    for change, expect in cases:
        got = tp.compare_all(_perturbed(theirs, change), theirs)
        reported = {k for k, v in got.items() if v}
        if change is straddle:
            assert reported >= expect, (change.__name__, got)
        else:
            assert reported == expect, (change.__name__, got)
