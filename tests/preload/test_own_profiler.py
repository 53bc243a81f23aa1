"""Programs that profile themselves with torch's own profiler, under
`trainprof run`.

torch runs one profiler at a time.  `trainprof run`'s Python hook turns
torch's ITT/NVTX operator ranges on in the steps that warm up or record;
a program whose own profiler started during one of those steps used to
stop with "RuntimeError: Profiler is already enabled on this thread"
(exit status 1, and its own trace never saved).  Each way a program may
profile itself (tests/programs/torch_own_profiler.py) must run exactly as
without trainprof: same exit status and stdout (which says what its own
profiler recorded).  Our window says which of its steps lack torch's
operators and why, in the trace (trainprof.operators_lost), the summary
and one log line, and keeps them where the program's profiler hands them
on (emit_itt, through the library as ITT collector).

Needs the PyPI torch wheel and pytorch-lightning (tests/requirements-torch.txt).
"""

import glob
import json
import os
import re
import subprocess
import sys

import pytest

import tputil

if os.environ.get("TP_TEST_NO_TORCH") == "1":
    pytest.skip("TP_TEST_NO_TORCH=1", allow_module_level=True)

PROGRAM = os.path.join(tputil.ROOT, "tests", "programs", "torch_own_profiler.py")
TRAINPROF = os.path.join(tputil.ROOT, "scripts", "trainprof")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

# mode -> the steps of our window (steps 1-4, the default schedule) that
# lack operators, None where none do
LOST = {
    "schedule": (2, 4),     # torch's window: wait 0, warmup 1, active 2-4
    "late": None,           # torch's window 8-10, after ours
    "byhand": (2, 4),       # start() before iteration 2, stop() before 6
    "before": (1, 3),       # on from the start, stop() before iteration 3
    "autograd": (2, 4),
    "legacy": (2, 4),
    "emit_itt": None,       # its ITT ranges reach the library: nothing lost
    "emit_nvtx": None,      # fails to enter without CUDA, with or without us
    "lightning": (1, 4),    # Lightning's profiler is on from the first step
}


def run(mode, via_cli, extra=None):
    cwd = tputil.new_dir()
    env = tputil.base_env(dict({"TRAINPROF_SYS": None, "PYTHONDONTWRITEBYTECODE": "1"},
                               **(extra or {})), preload=False)
    cmd = [sys.executable, PROGRAM, mode, "own"]
    if via_cli:
        cmd = [sys.executable, TRAINPROF, "run", "--lib", tputil.lib_path(), "--"] + cmd
        if os.environ.get("TP_TEST_ASAN"):
            env["LD_PRELOAD"] = os.environ["TP_TEST_ASAN"]
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=600)
    return p, cwd


def own_files(cwd):
    return sorted(os.path.relpath(f, cwd) for f in
                  glob.glob(os.path.join(cwd, "own", "**", "*"), recursive=True)
                  if os.path.isfile(f))


def our_steps(trace):
    """[(N, event)] of the ProfilerStep#N events: trainprof's steps, each once
    (torch's own ProfilerStep#N ranges of a program's profiler, which reach
    the library through ITT, are not written: README "What is in a trace")."""
    return [(int(STEP_RE.match(ev["name"]).group(1)), ev)
            for ev in tputil.events(trace, ph="X") if STEP_RE.match(ev.get("name", ""))]


def operators_by_step(trace):
    """{step: number of torch operators (cpu_op events) that begin in it}."""
    st = our_steps(trace)
    out = {n: 0 for n, _ in st}
    for ev in tputil.events(trace, ph="X", cat="cpu_op"):
        for n, s in st:
            if s["ts"] <= ev["ts"] < s["ts"] + s["dur"]:
                out[n] += 1
    return out


@pytest.mark.parametrize("mode", sorted(LOST))
def test_program_with_its_own_profiler_runs_unchanged(mode):
    base, base_cwd = run(mode, via_cli=False)
    assert base.returncode == 0, base.stderr[-3000:]
    p, cwd = run(mode, via_cli=True)
    assert p.returncode == base.returncode, p.stderr[-3000:]
    assert p.stdout == base.stdout, (p.stdout[-2000:], p.stderr[-3000:])
    err = p.stderr.decode(errors="replace")
    assert "already enabled" not in err and "Traceback" not in err, err[-3000:]
    # the program's own profiler saved as many files as without us
    assert len(own_files(cwd)) == len(own_files(base_cwd)), (own_files(cwd), own_files(base_cwd))

    traces = glob.glob(os.path.join(cwd, "*", "traces", "*.gz"))
    assert len(traces) == 1, traces
    t = tputil.load_trace(traces[0])
    assert tputil.steps(t) == [1, 2, 3, 4]
    assert all(ev["args"]["External id"] == (1 << 48) + n for n, ev in our_steps(t))
    lost = t["trainprof"]["operators_lost"]
    ops = operators_by_step(t)
    summaries = glob.glob(os.path.join(cwd, "*", "reports", "*.summary.json"))
    assert len(summaries) == 1
    with open(summaries[0]) as f:
        window = json.load(f)["window"]
    warned = [l for l in err.splitlines() if "lack torch's operators" in l]
    expect = LOST[mode]
    if expect is None:
        assert lost is None, lost
        assert window["operators_lost"] is None
        assert warned == []
        assert all(ops[n] > 0 for n in (1, 2, 3, 4)), ops
        return
    assert (lost["first_step"], lost["last_step"]) == expect, lost
    assert "own profiler" in lost["why"] and "one profiler at a time" in lost["why"], lost
    assert ("profiler_legacy" in lost["why"]) == (mode == "legacy"), lost
    assert window["operators_lost"] == lost["why"]
    assert window["operators_lost_steps"] == list(expect)
    assert len(warned) == 1 and "steps %d-%d" % expect in warned[0], err[-2000:]
    # the steps before the loss keep their operators
    for n in range(1, expect[0]):
        assert ops[n] > 0, ops
    with open(summaries[0].replace(".summary.json", ".summary.txt")) as f:
        text = f.read()
    assert "Operators:    none in steps %d..%d" % expect in text, text[:2000]


def test_torch_profiler_steps_not_written_through_nvtx():
    """With shapes the hook turns torch's NVTX state on, whose messages
    announce the program's own ProfilerStep#N ranges too ("ProfilerStep#3,
    op_id = N, sizes = []"): they are not written either, each of our steps
    is there once, with its operators."""
    p, cwd = run("late", via_cli=True, extra={"TRAINPROF_RECORD_SHAPES": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*.gz"))
    assert len(traces) == 1, traces
    t = tputil.load_trace(traces[0])
    assert tputil.steps(t) == [1, 2, 3, 4]
    ops = operators_by_step(t)
    assert all(ops[n] > 0 for n in (1, 2, 3, 4)), ops
    assert any("Input Dims" in e["args"] for e in tputil.events(t, ph="X", cat="cpu_op"))
