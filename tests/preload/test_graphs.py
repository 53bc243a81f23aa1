"""Library FLOPs inside CUDA graphs: GEMMs captured into a graph
count at every launch of it, not where they were captured."""

import pytest

import tputil

GRAPH = 2 * 64 * 32 * 16 + 2 * 128 * 8 * 4      # the two captured GEMMs
DIRECT = 2 * 10 * 20 * 30                       # one direct GEMM per step


def _trace(env, args=()):
    r = tputil.run("graph_calls", args, env=env)
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1
    return r, tputil.load_trace(r.traces[0])


def test_captured_before_the_window_counts_at_each_launch():
    # captured in step 0 (warm-up: nothing recorded), launched 3 times a step
    r, trace = _trace({"TRAINPROF_SCHEDULE": "warmup=1,active=3"})
    assert r.stdout == tputil.run("graph_calls", preload=False).stdout
    launches = tputil.events(trace, ph="X", name="cudaGraphLaunch")
    assert len(launches) == 9
    assert all(ev["args"]["flops"] == GRAPH for ev in launches)
    steps = trace["trainprof"]["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all(s["flops"] == 3 * GRAPH + DIRECT for s in steps)
    assert trace["trainprof"]["flops"] == 3 * (3 * GRAPH + DIRECT)


def test_captured_inside_the_window_is_marked_and_not_counted_there():
    _, trace = _trace({"TRAINPROF_SCHEDULE": "all"}, args=("2", "1"))
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    captured = [ev for ev in ops if ev["args"].get("captured")]
    assert sorted(ev["args"]["flops"] for ev in captured) == sorted([2 * 64 * 32 * 16, 2 * 128 * 8 * 4])
    steps = {s["step"]: s["flops"] for s in trace["trainprof"]["steps"]}
    assert steps == {0: 0, 1: GRAPH + DIRECT, 2: GRAPH + DIRECT}


def test_summary_reports_graph_flops():
    import pathlib
    r, trace = _trace({"TRAINPROF_SCHEDULE": "warmup=1,active=3"})
    text = next(pathlib.Path(r.cwd, "test", "reports").glob("*.summary.txt")).read_text()
    assert f"Library FLOPs run by CUDA graph launches: {9 * GRAPH / 1e9:.3f} GFLOP" in text


@pytest.mark.parametrize("how,env", [
    ("driver", {}),                           # captured and launched through the driver alone
    ("nested", {}),                           # PyTorch's conditional body: a capture into a graph
    ("runtime", {"FAKE_CUDART_LOOKUP": "1"}),  # the runtime capturing through the driver
    ("nested", {"FAKE_CUDART_LOOKUP": "1"}),
    ("driver", {"FAKE_CUDART_LOOKUP": "1"}),
])
def test_graph_flops_whatever_layer_captures(how, env):
    sched = dict(env, TRAINPROF_SCHEDULE="warmup=1,active=3")
    r, trace = _trace(sched, args=(4, 3, how))
    assert r.stdout == tputil.run("graph_calls", (4, 3, how), env=env, preload=False).stdout
    assert b"ended with another graph" not in r.stderr
    name = "cuGraphLaunch" if how == "driver" else "cudaGraphLaunch"
    launches = tputil.events(trace, ph="X", name=name)
    assert len(launches) == 9
    assert all(ev["args"]["flops"] == GRAPH for ev in launches), launches[0]
    steps = trace["trainprof"]["steps"]
    assert [s["flops"] for s in steps] == [3 * GRAPH + DIRECT] * 3
    if env.get("FAKE_CUDART_LOOKUP") and how != "driver":
        # the runtime reaches cuGraphLaunch inside cudaGraphLaunch: one event
        assert tputil.events(trace, ph="X", cat="cuda_driver") == []
