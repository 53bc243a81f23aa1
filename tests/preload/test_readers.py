"""The readers PyTorch users run load our traces: Holistic Trace Analysis
(rank from distributedInfo, iterations from ProfilerStep#N) and the
TensorBoard profiler plugin's parser (steps, runtime events, no exception).
Skipped, with the reason, only when a reader cannot be imported."""

import collections
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import tputil

LAUNCHES = 3
PER_STEP = LAUNCHES + 1
RANK = 3
ACT = 1 << 20           # bytes of activations per step (and half as much again)


@pytest.fixture(scope="module")
def trace_dir():
    """One trace (default schedule: steps 1-4) of rank 3, alone in a folder,
    with activations allocated and freed in every step ([memory] events)."""
    r = tputil.run("train_loop", ["--steps=8", "--launches=%d" % LAUNCHES, "--mode=nvtx",
                                  "--activations=%d" % ACT],
                   env={"RANK": RANK, "WORLD_SIZE": 4})
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, r.traces
    d = tputil.new_dir()
    shutil.copy(r.traces[0], d)
    return d, os.path.join(d, os.path.basename(r.traces[0])), tputil.load_trace(r.traces[0])


def test_hta_finds_rank_and_iterations(trace_dir):
    try:
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # pragma: no cover - depends on the environment
        pytest.skip("holistictraceanalysis cannot be imported: %r" % (e,))
    d, _path, trace = trace_dir
    steps = tputil.steps(trace)
    assert steps == [1, 2, 3, 4]
    analyzer = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    t = analyzer.t
    assert t.get_ranks() == [RANK]
    assert sorted(t.get_iterations(RANK)) == steps
    df = t.get_trace(RANK)
    names = t.symbol_table.get_sym_table()
    df = df.assign(sname=df["name"].map(lambda i: names[i]))
    launches = df[df["sname"].isin(["cudaLaunchKernel", "__cudaLaunchKernel"])]
    per = collections.Counter(int(i) for i in launches["iteration"])
    assert per == {s: PER_STEP for s in steps}
    # HTA reads launches as CPU events: no stream arg, so stream == -1
    assert set(int(s) for s in launches["stream"]) == {-1}
    # and by default it drops the last step, as it does for Kineto traces
    default = TraceAnalysis(trace_dir=d)
    assert sorted(default.t.get_iterations(RANK)) == steps[:-1]


def test_tb_plugin_parses_steps(trace_dir):
    try:
        from torch_tb_profiler import consts
        from torch_tb_profiler.profiler.data import RunProfileData
        from torch_tb_profiler.profiler.run_generator import RunGenerator
    except Exception as e:  # pragma: no cover - depends on the environment
        pytest.skip("torch_tb_profiler cannot be imported: %r" % (e,))
    _d, path, trace = trace_dir
    # what RunLoader does for each file of a run folder
    m = consts.WORKER_PATTERN.match(os.path.basename(path))
    assert m, "file name not recognised by the TB plugin"
    worker, span = m.group(1), m.group(2)[1:] if m.group(2) else None
    assert worker == "rank%d" % RANK
    data = RunProfileData.parse(worker, span, path, tputil.new_dir())
    assert data.steps_names == [str(s) for s in tputil.steps(trace)]
    # (0.4.3, the last release, maps only cat "runtime", not "cuda_runtime",
    # to its Runtime type, so has_runtime stays False for Kineto's traces too)
    assert data.distributed_info["rank"] == RANK
    profile = RunGenerator(worker, span, data).generate_run_profile()
    assert profile is not None
    assert profile.views, "no view generated"


def test_tb_plugin_reads_memory(trace_dir):
    """The plugin's memory view takes our [memory] events: its peak per
    device is the trace's own peak of "Total Allocated"."""
    try:
        from torch_tb_profiler import consts
        from torch_tb_profiler.profiler.data import RunProfileData
        from torch_tb_profiler.profiler.run_generator import RunGenerator
    except Exception as e:  # pragma: no cover - depends on the environment
        pytest.skip("torch_tb_profiler cannot be imported: %r" % (e,))
    _d, path, trace = trace_dir
    mem = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    assert len(mem) == 4 * 4                     # two allocations, two frees per step
    peak = max(e["args"]["Total Allocated"] for e in mem)
    low = min(e["args"]["Total Allocated"] for e in mem)
    assert peak - low == ACT + ACT // 2
    m = consts.WORKER_PATTERN.match(os.path.basename(path))
    data = RunProfileData.parse(m.group(1), None, path, tputil.new_dir())
    assert data.memory_snapshot is not None
    peaks = data.memory_snapshot.get_peak_memory()
    cuda = {k: v for k, v in peaks.items() if getattr(k[0], "name", "") == "CUDA"}
    assert list(cuda.values()) == [peak], peaks
    profile = RunGenerator(m.group(1), None, data).generate_run_profile()
    assert profile.memory_snapshot is not None


def test_tb_plugin_run_loader(trace_dir):
    """The plugin's own RunLoader on the folder, in a fresh interpreter (it
    spawns worker processes and swallows their exceptions into a warning, so
    the check is that a profile with our steps comes back)."""
    try:
        import torch_tb_profiler  # noqa: F401
    except Exception as e:  # pragma: no cover
        pytest.skip("torch_tb_profiler cannot be imported: %r" % (e,))
    d, _path, trace = trace_dir
    script = textwrap.dedent("""
        import sys
        from torch_tb_profiler import io
        from torch_tb_profiler.profiler.loader import RunLoader
        if __name__ == "__main__":
            cache = io.Cache(sys.argv[2])
            run = RunLoader("run", sys.argv[1], cache).load()
            profiles = [p for p in run.get_profiles() if p is not None]
            for p in profiles:
                print("PROFILE", p.worker, ",".join(p.steps_names if hasattr(p, "steps_names")
                                                     else []))
            print("COUNT", len(profiles))
    """)
    sp = os.path.join(tputil.new_dir(), "load_run.py")
    with open(sp, "w") as f:
        f.write(script)
    p = subprocess.run([sys.executable, sp, d, tputil.new_dir()], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert "Failed to parse profile data" not in p.stderr.decode(), p.stderr.decode()[-3000:]
    assert "COUNT 1" in out, (out, p.stderr.decode()[-3000:])
    assert "PROFILE rank%d" % RANK in out


WINDOWS_SCHEDULE = "wait=2,warmup=1,active=3,repeat=3"      # steps 3-5, 9-11, 15-17
WINDOWS_STEPS = [[3, 4, 5], [9, 10, 11], [15, 16, 17]]


def test_tb_plugin_orders_three_windows():
    """Three windows of one rank in one folder: the
    plugin's RunLoader numbers a worker's spans in the text order of the
    number in their file names, and its span list (what the UI offers) sorts
    those.  Span 1 must be the first window, 2 the second, 3 the third: with
    bare {batch} names (6, 12, 18) the text order made span 1 the window of
    steps 9-11 and span 3 that of steps 3-5."""
    try:
        import torch_tb_profiler  # noqa: F401
    except Exception as e:  # pragma: no cover
        pytest.skip("torch_tb_profiler cannot be imported: %r" % (e,))
    r = tputil.run("train_loop", ["--steps=18", "--launches=%d" % LAUNCHES, "--mode=nvtx"],
                   env={"TRAINPROF_SCHEDULE": WINDOWS_SCHEDULE})
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 3, (r.traces, r.stderr)
    d = tputil.new_dir()
    for p in r.traces:
        shutil.copy(p, d)
    # the names alone already sort as the windows happened (ls, globs)
    by_name = [tputil.steps(tputil.load_trace(os.path.join(d, f))) for f in sorted(os.listdir(d))]
    assert by_name == WINDOWS_STEPS, (sorted(os.listdir(d)), by_name)
    script = textwrap.dedent("""
        import json, os, sys
        from torch_tb_profiler import io
        from torch_tb_profiler.profiler.loader import RunLoader
        if __name__ == "__main__":
            run = RunLoader("run", sys.argv[1], io.Cache(sys.argv[2])).load()
            out = []
            for worker in run.workers:
                for span in run.get_spans(worker) or []:
                    p = run.get_profile(worker, span)
                    steps = [row[0] for row in p.overview["steps"]["rows"]]
                    out.append([worker, span, os.path.basename(p.trace_file_path), steps])
            print("SPANS " + json.dumps(out))
    """)
    sp = os.path.join(tputil.new_dir(), "load_spans.py")
    with open(sp, "w") as f:
        f.write(script)
    p = subprocess.run([sys.executable, sp, d, tputil.new_dir()], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=180)
    err = p.stderr.decode()[-3000:]
    assert p.returncode == 0, err
    assert "Failed to parse profile data" not in err, err
    line = [x for x in p.stdout.decode().splitlines() if x.startswith("SPANS ")]
    assert line, (p.stdout.decode(), err)
    spans = json.loads(line[0][len("SPANS "):])
    assert [s[0] for s in spans] == ["rank0"] * 3, spans
    assert [s[1] for s in spans] == ["1", "2", "3"], spans
    # each span's ProfilerStep rows are that window's steps, in window order
    assert [[int(x) for x in s[3]] for s in spans] == WINDOWS_STEPS, spans
