"""summary.json and `trainprof summary` on a 4-rank job:
tests/programs/ddp_loop.c run as ranks 0-3 of 4, at the same time,
in one folder, with the launcher variables of torchrun (RANK, LOCAL_RANK,
WORLD_SIZE, TORCHELASTIC_RUN_ID) or of srun (SLURM_PROCID, SLURM_LOCALID,
SLURM_NTASKS, SLURM_JOB_ID), on the fakes with the fake CUPTI.  Rank 2
sleeps SLOW_US more per step (--slow-rank): the straggler `trainprof
summary` must name, from the summary.json files and from the traces alone.

Each summary.json is checked against the trace of the same window: steps,
FLOPs, device work and launch totals, library FLOPs, collectives.  The
trace-only summary (scripts/trainprof_cli/summary.py) must agree with the
handler's summary.json on the same figures."""

import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

import tputil

WORLD = 4
SLOW_RANK = 2
SLOW_US = 30000                 # far above the noise of a loaded machine
SLEEP_US = 10000                # steps long enough that noise stays under 10%
SCRIPT = os.path.join(tputil.ROOT, "scripts", "trainprof")

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(tputil.build_dir(), "fakes", "libcupti.so")),
                                reason="fake libcupti not built")


def summary_module():
    return tputil.cli_module("summary")


def launcher_env(style, rank):
    if style == "torchrun":
        return {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": WORLD,
                "TORCHELASTIC_RUN_ID": "tr-job", "TRAINPROF_RUN_NAME": None}
    return {"SLURM_PROCID": rank, "SLURM_LOCALID": rank, "SLURM_NTASKS": WORLD,
            "SLURM_JOB_ID": "4242", "TRAINPROF_RUN_NAME": None}


RUN_NAME = {"torchrun": "tr-job", "slurm": "4242"}


def run_job(style, env=None):
    """The four ranks, started together; returns the run folder."""
    d = tputil.new_dir()
    meet = os.path.join(d, "rendezvous")
    os.mkdir(meet)
    args = ["--warmup-us=20000", "--sleep-us=%d" % SLEEP_US, "--rendezvous=" + meet,
            "--slow-rank=%d" % SLOW_RANK, "--slow-us=%d" % SLOW_US]

    def one(rank):
        e = launcher_env(style, rank)
        e["FAKE_CUPTI_COMM_US"] = 200
        e.update(env or {})
        return tputil.run("ddp_loop", args, env=e, cwd=d)

    with concurrent.futures.ThreadPoolExecutor(WORLD) as pool:
        results = list(pool.map(one, range(WORLD)))
    for r, res in enumerate(results):
        assert res.rc == 0, (r, res.stderr)
    return os.path.join(d, RUN_NAME[style])


@pytest.fixture(scope="module", params=["torchrun", "slurm"])
def job(request):
    return request.param, run_job(request.param)


def cli(args):
    e = tputil.base_env(preload=False)
    p = subprocess.run([sys.executable, SCRIPT, "summary"] + [str(a) for a in args], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p


def traces_and_summaries(run):
    traces = sorted(glob.glob(os.path.join(run, "traces", "*.json.gz")))
    sums = sorted(glob.glob(os.path.join(run, "reports", "*.summary.json")))
    return traces, sums


def trace_figures(trace):
    """What a summary.json must say, counted from the trace."""
    ev = trace["traceEvents"]
    dev = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    launches = [e for e in ev if e.get("cat") == "cuda_runtime" and "kernel" in e.get("args", {})]
    libs = [e for e in ev if e.get("cat") == "cpu_op" and "Record function id" not in e["args"]]
    colls = [e for e in libs if "Collective name" in e["args"]]
    return {"dev_count": len(dev), "dev_ns": sum(round(e["dur"] * 1000) for e in dev),
            "kernels": sum(1 for e in dev if e["cat"] == "kernel"),
            "launches": len(launches),
            "lib_flops": sum(e["args"].get("flops", 0) for e in libs),
            "coll_calls": len(colls)}


def test_four_traces_one_folder_with_their_summaries(job):
    style, run = job
    traces, sums = traces_and_summaries(run)
    assert len(traces) == WORLD and len(sums) == WORLD, (traces, sums)
    seen = set()
    for path in traces:
        t = tputil.load_trace(path)
        rank = t["distributedInfo"]["rank"]
        base = os.path.basename(path)[:-len(".json.gz")]
        with open(os.path.join(run, "reports", base + ".summary.json")) as f:
            s = json.load(f)
        seen.add(rank)
        tp = t["trainprof"]
        assert s["schema"] == "trainprof.summary/1.1"
        assert s["trace"] == os.path.basename(path)
        assert (s["rank"], s["local_rank"], s["world_size"]) == (rank, rank, WORLD)
        assert s["run"] == RUN_NAME[style]
        assert s["pid"] > 0 and s["host"]
        w = s["window"]
        assert (w["batch"], w["first_step"], w["last_step"]) == (tp["batch"], tp["first_step"], tp["last_step"])
        assert w["start_ns"] < w["end_ns"]
        assert [x["step"] for x in s["steps"]] == tputil.steps(t) == [x["step"] for x in tp["steps"]]
        for a, b in zip(s["steps"], tp["steps"]):
            assert abs(a["wall_ns"] - b["wall_ms"] * 1e6) <= 2
            assert a["flops"] == b["flops"] > 0
            assert 0 < a["gpu_busy_ns"] <= a["wall_ns"]
        assert s["totals"]["flops"] == sum(b["flops"] for b in tp["steps"])
        f = trace_figures(t)
        assert s["gpu"] is True
        assert s["gpu_work"]["calls"] == f["dev_count"]
        assert abs(s["gpu_work"]["total_ns"] - f["dev_ns"]) <= f["dev_count"]
        assert s["coverage"]["gpu_kernels"] == f["kernels"]
        assert s["launches"]["calls"] == s["host_launch_count"] == f["launches"]
        assert s["library_calls"]["top"] and s["totals"]["library_flops"] == f["lib_flops"]
        co = s["collectives"]
        assert co["basis"] == "device"
        assert [(r["kind"], r["ranks"], r["calls"]) for r in co["rows"]] == [("allreduce", WORLD, f["coll_calls"])]
        assert co["time_ns"] > 0
        assert s["events"]["dropped"] == tp["dropped_events"] == 0
        assert s["memory"] and s["memory"][0]["peak_bytes"] > 0
        assert os.path.getsize(os.path.join(run, "reports", base + ".summary.json")) < 16384
    assert seen == set(range(WORLD))


def check_straggler(p, sources):
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["ranks"] == WORLD and j["world_size"] == WORLD
    assert j["sources"] == sources
    per = {r["rank"]: r for r in j["per_rank"]}
    # the slowed rank is named first (the slowest); any other rank named is
    # one whose steps this loaded machine slowed by more than 10% too: the
    # rule holds both ways, whatever the noise
    # vs_median is 3 on a quiet machine (30 ms more on 10 ms steps); with the
    # four ranks and another test suite sharing 2 cores the median step grew
    # to 24 ms and it fell to 0.67 (CI run beside make check-sanitize)
    assert j["stragglers"][0]["rank"] == SLOW_RANK and per[SLOW_RANK]["vs_median"] > 0.3
    named = {s["rank"] for s in j["stragglers"]}
    for r, x in per.items():
        assert (x["vs_median"] > 0.10) == (r in named), (r, x)
    # the per-step table names the slowed rank as the slowest (a step of
    # another rank may hiccup on a loaded machine: most steps, not all)
    slowest = [s["slowest_rank"] for s in j["steps"]]
    assert len(slowest) == 4 and slowest.count(SLOW_RANK) >= 3, j["steps"]
    # collective wait is over the fastest rank's: one rank waits 0
    assert min(r["collective_wait_ns"] for r in j["per_rank"]) == 0
    assert all(r["gpu_busy_share"] > 0 for r in j["per_rank"])


def test_straggler_from_summary_json(job):
    _style, run = job
    check_straggler(cli(["--json", run]), {"summary.json": WORLD})
    p = cli([run])
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "\nstragglers: rank %d (+" % SLOW_RANK in out
    assert "Per step: median and slowest rank" in out and "MFU-like spread" in out


def test_straggler_from_traces_alone(job):
    _style, run = job
    d = tputil.new_dir()
    shutil.copytree(os.path.join(run, "traces"), os.path.join(d, "traces"))
    check_straggler(cli(["--json", d]), {"trace": WORLD})
    # the traces named one by one, too
    check_straggler(cli(["--json"] + sorted(glob.glob(os.path.join(d, "traces", "*")))), {"trace": WORLD})


def test_trace_alone_agrees_with_summary_json(job):
    _style, run = job
    mod = summary_module()
    traces, _ = traces_and_summaries(run)
    for path in traces:
        base = os.path.basename(path)[:-len(".json.gz")]
        with open(os.path.join(run, "reports", base + ".summary.json")) as f:
            s = json.load(f)
        t = mod.summarize_trace(path)
        assert t["rank"] == s["rank"] and t["run"] == s["run"] and t["pid"] == s["pid"]
        assert [x["step"] for x in t["steps"]] == [x["step"] for x in s["steps"]]
        for a, b in zip(t["steps"], s["steps"]):
            assert abs(a["wall_ns"] - b["wall_ns"]) <= 2
            assert a["flops"] == b["flops"]
            assert abs(a["gpu_busy_ns"] - b["gpu_busy_ns"]) <= 64   # ns rounding per span
        for table in ("gpu_work", "launches", "api_calls", "library_calls", "operators"):
            assert t[table]["distinct"] == s[table]["distinct"], table
            assert t[table]["calls"] == s[table]["calls"], table
            assert abs(t[table]["total_ns"] - s[table]["total_ns"]) <= t[table]["calls"], table
            assert {r["name"]: r["calls"] for r in t[table]["top"]} == \
                {r["name"]: r["calls"] for r in s[table]["top"]}, table
        for a, b in zip(t["operators"]["top"], s["operators"]["top"]):
            assert abs(a["gpu_ns"] - b["gpu_ns"]) <= a["calls"], a["name"]
        # the operator tables: annotation and step rows, self
        # times, shares, and the rows by input shape, as the library's
        assert {r["kind"] for r in s["operators"]["top"]} == {"operator", "annotation", "step"}
        for table in ("operators", "operators_by_shape"):
            tt, ss = t[table], s[table]
            assert tt["distinct"] == ss["distinct"] and tt["calls"] == ss["calls"], table
            assert abs(tt["self_ns"] - ss["self_ns"]) <= tt["calls"], table
            by_key = {(r["name"], r.get("input_shapes")): r for r in ss["top"]}
            assert set(by_key) == {(r["name"], r.get("input_shapes")) for r in tt["top"]}, table
            for a in tt["top"]:
                b = by_key[(a["name"], a.get("input_shapes"))]
                assert (a["kind"], a["calls"]) == (b["kind"], b["calls"]), (table, a, b)
                assert abs(a["self_ns"] - b["self_ns"]) <= 4 * a["calls"], (table, a, b)
                assert abs(a["gpu_ns"] - b["gpu_ns"]) <= a["calls"], (table, a, b)
                assert abs(a["self_share"] - b["self_share"]) < 1e-6, (table, a, b)
        assert any(r["name"] == "aten::addmm" and r["input_shapes"] == "[[256], [64, 256], [256, 256]]"
                   for r in s["operators_by_shape"]["top"])
        tc, sc = t["collectives"], s["collectives"]
        assert tc["basis"] == sc["basis"]
        assert [(r["kind"], r["ranks"], r["calls"], r["bytes"], r["basis"]) for r in tc["rows"]] == \
            [(r["kind"], r["ranks"], r["calls"], r["bytes"], r["basis"]) for r in sc["rows"]]
        assert abs(tc["time_ns"] - sc["time_ns"]) <= tc["calls"]
        assert t["memory"][0]["peak_bytes"] == s["memory"][0]["peak_bytes"]
        # device spans folded 8 at a time (what keeps a big trace's memory
        # bounded): the same busy time
        mod.BUSY_BATCH, mod.BUSY_DISORDER = 8, 4
        small = mod.summarize_trace(path)
        mod.BUSY_BATCH, mod.BUSY_DISORDER = 65536, 4096
        assert small["busy_late_spans"] == 0
        assert [x["gpu_busy_ns"] for x in small["steps"]] == [x["gpu_busy_ns"] for x in t["steps"]]
        assert t["coverage"]["gpu_kernels"] == s["coverage"]["gpu_kernels"]


def test_one_rank_prints_the_tables(job):
    _style, run = job
    traces, sums = traces_and_summaries(run)
    for arg in (sums[0], traces[0]):
        p = cli([arg])
        assert p.returncode == 0, p.stderr
        out = p.stdout.decode()
        for title in ("Per-step wall time", "Operators (PyTorch)", "Operators by input shape",
                      "Self host %", "Library calls", "Host API calls",
                      "Kernels launched", "GPU activity: active", "Memory held", "Collectives (NCCL)",
                      "Events:"):
            assert title in out, (title, out)
    # a trace given alone still reads its summary.json in the run's reports folder
    assert "(from summary.json)" in cli([traces[0]]).stdout.decode()
    d = tputil.new_dir()
    shutil.copy(traces[0], d)
    assert "(from trace)" in cli([os.path.join(d, os.path.basename(traces[0]))]).stdout.decode()


def test_ranks_subset_records_two():
    run = run_job("torchrun", env={"TRAINPROF_RANKS": "1,3"})
    traces, sums = traces_and_summaries(run)
    assert len(traces) == 2 and len(sums) == 2
    p = cli(["--json", run])
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert sorted(r["rank"] for r in j["per_rank"]) == [1, 3]


def test_errors():
    p = cli([os.path.join(tputil.new_dir(), "missing.json.gz")])
    assert p.returncode == 2 and p.stderr.startswith(b"trainprof: error:") and p.stdout == b""
    p = cli([tputil.new_dir()])
    assert p.returncode == 2 and b"no trace or summary.json" in p.stderr
    bad = os.path.join(tputil.new_dir(), "x.json")
    with open(bad, "w") as f:
        f.write('{"traceEvents": [{"ph": "X"')
    p = cli([bad])
    assert p.returncode == 2 and p.stderr.startswith(b"trainprof: error:")
