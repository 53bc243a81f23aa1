"""What Perfetto, chrome://tracing, the TensorBoard plugin and HTA need of a
trace, and the schema of README "What is in a trace", checked by parsing a
real trace of train_loop."""

import collections
import gzip
import json
import math
import os
import re
import time
import zlib

import pytest

import tputil

KINETO_PERIOD_S = 7889238
LAUNCHES = 3
RANK = 2

LAUNCH_ARGS = ("correlation", "cbid", "kernel", "grid", "block", "shared memory", "cuda stream")
HOST_CATS = ("cuda_runtime", "cuda_driver", "user_annotation", "cpu_op", "cpu_instant_event")
TB_WORKER = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$")
TS_RE = re.compile(r'"(ts|dur)":\s*([-+0-9.eE]+)')


def _no_constants(name):
    raise ValueError("non-finite number in trace: " + name)


@pytest.fixture(scope="module")
def traced():
    """A default-schedule run with NVTX ranges, rank 2 of 4, user metadata."""
    t0 = time.time()
    r = tputil.run("train_loop", ["--steps=8", "--launches=%d" % LAUNCHES, "--mode=nvtx"],
                   env={"RANK": RANK, "WORLD_SIZE": 4, "LOCAL_RANK": 0,
                        "TRAINPROF_METADATA": '{"job": "format-test", "n": 3}'})
    t1 = time.time()
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, (r.traces, r.stderr)
    path = r.traces[0]
    with open(path, "rb") as f:
        data = f.read()
    text = gzip.decompress(data).decode("utf-8")
    trace = json.loads(text, object_pairs_hook=collections.OrderedDict,
                       parse_constant=_no_constants)
    return dict(path=path, data=data, text=text, trace=trace, t0=t0, t1=t1, result=r)


def _data_events(trace):
    return [ev for ev in trace["traceEvents"] if ev.get("ph") != "M"]


# ---- all tools ---------------------------------------------------------------

def test_file_name(traced):
    assert os.path.basename(traced["path"]) == "rank%d.00000005.pt.trace.json.gz" % RANK
    m = TB_WORKER.match(os.path.basename(traced["path"]))      # TB plugin's discovery
    assert m and m.group(1) == "rank%d" % RANK
    assert traced["path"].endswith(".gz")                     # HTA reads .json/.gz


def test_object_form_and_key_order(traced):
    trace = traced["trace"]
    assert isinstance(trace, dict)
    keys = list(trace.keys())
    # Kineto's metadata (trace_id, host_name; record_shapes with shapes on)
    # after deviceProperties, as torch.profiler writes them
    assert keys[:6] == ["schemaVersion", "deviceProperties", "trace_id", "host_name",
                        "distributedInfo", "trainprof"]
    assert keys[-4:] == ["displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName"]
    # user metadata (TRAINPROF_METADATA) sits between trainprof and displayTimeUnit
    assert keys[6:-4] == ["job", "n"]
    assert trace["job"] == "format-test" and trace["n"] == 3
    assert trace["schemaVersion"] == 1
    assert isinstance(trace["deviceProperties"], list)
    assert isinstance(trace["traceName"], str)
    assert trace["displayTimeUnit"] == "ms"
    # metadata before traceEvents in the raw text too (HTA's ijson backend)
    assert traced["text"].index('"distributedInfo"') < traced["text"].index('"traceEvents"')


def test_distributed_info_and_rank_regex(traced):
    di = traced["trace"]["distributedInfo"]
    # the launcher's RANK and WORLD_SIZE; no process group or NCCL says the
    # backend, so none is claimed (test_metadata.py has the other cases)
    assert di == {"rank": RANK, "world_size": 4}
    # HTA: the first "rank":\s+N in the file, which needs a space after the colon
    m = re.search(r'"rank":\s+(\d+)', traced["text"])
    assert m and int(m.group(1)) == RANK
    assert m.start() < traced["text"].index('"traceEvents"')


def test_trainprof_metadata(traced):
    meta = traced["trace"]["trainprof"]
    for key in ("step_signal", "steps_recorded", "dropped_events", "partial"):
        assert key in meta, key
    assert meta["step_signal"] == "nvtx:step"
    assert meta["steps_recorded"] == 4
    assert meta["dropped_events"] == 0
    assert meta["partial"] is False
    assert meta["partial_reason"] is None


def test_base_time_is_kinetos(traced):
    base = traced["trace"]["baseTimeNanoseconds"]
    assert isinstance(base, int)
    period_ns = KINETO_PERIOD_S * 10**9
    assert base % period_ns == 0
    lo = math.floor(traced["t0"] / KINETO_PERIOD_S) * period_ns
    hi = math.floor(traced["t1"] / KINETO_PERIOD_S) * period_ns
    assert lo <= base <= hi
    # relative timestamps: the events fall inside the run, measured from base
    for ev in _data_events(traced["trace"]):
        abs_s = (base + ev["ts"] * 1000) / 1e9
        assert traced["t0"] - 1 <= abs_s <= traced["t1"] + 1, ev


def test_ts_and_dur_at_most_three_decimals(traced):
    found = 0
    for key, num in TS_RE.findall(traced["text"]):
        found += 1
        assert "e" not in num.lower(), num
        if "." in num:
            assert len(num.split(".")[1]) <= 3, (key, num)
    assert found > 0
    for ev in traced["trace"]["traceEvents"]:
        if "ts" in ev:
            assert isinstance(ev["ts"], (int, float)) and not isinstance(ev["ts"], bool)
        if "dur" in ev:
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0


def test_every_event_has_name_ph_and_ids(traced):
    for ev in traced["trace"]["traceEvents"]:
        assert isinstance(ev.get("name"), str), ev
        assert isinstance(ev.get("ph"), str), ev
        for k in ("pid", "tid"):
            assert type(ev.get(k)) is int, ev            # integer, not string or bool
            assert 0 <= ev[k] <= 2**32 - 1, ev
        if ev["ph"] != "M":
            assert "ts" in ev, ev
            assert ev["tid"] != 0, ev                      # Perfetto rewrites tid 0
        if ev["ph"] == "X":
            assert isinstance(ev.get("cat"), str) and ev["cat"], ev
            assert "dur" in ev, ev
        if ev["ph"] == "C":
            assert ev.get("args") and all(
                isinstance(v, (int, float)) and not isinstance(v, bool)
                for v in ev["args"].values()), ev
        if ev["ph"] in ("s", "f"):
            assert ev.get("cat") and isinstance(ev.get("id"), int) and 0 <= ev["id"] < 2**53
            if ev["ph"] == "f":
                assert ev.get("bp") == "e", ev


def test_no_stream_arg_on_cpu_events(traced):
    host_pid = traced["result"].traces and _main_pid(traced["trace"])
    n = 0
    for ev in _data_events(traced["trace"]):
        if ev.get("cat") in HOST_CATS or ev.get("pid") == host_pid:
            n += 1
            assert "stream" not in ev.get("args", {}), ev
    assert n > 0


def _main_pid(trace):
    return tputil.events(trace, ph="X", cat="cuda_runtime")[0]["pid"]


def test_single_gzip_member(traced):
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(traced["data"])
    assert d.eof, "truncated gzip stream"
    assert d.unused_data == b"", "more than one gzip member"
    assert out.decode("utf-8") == traced["text"]


def test_metadata_events_for_every_track(traced):
    trace = traced["trace"]
    meta = collections.defaultdict(dict)
    for ev in tputil.events(trace, ph="M"):
        meta[ev["name"]][(ev["pid"], ev["tid"])] = ev.get("args", {})
    procs = {pid for (pid, _tid) in meta["process_name"]}
    for (pid, tid), args in meta["process_name"].items():
        assert isinstance(args.get("name"), str) and args["name"], args
    for (pid, tid), args in meta["thread_name"].items():
        assert isinstance(args.get("name"), str) and args["name"], args
    sort_procs = {pid for (pid, _tid) in meta["process_sort_index"]}
    used = {(ev["pid"], ev["tid"]) for ev in _data_events(trace)}
    assert used
    for pid, tid in used:
        assert pid in procs, ("no process_name for pid", pid)
        assert pid in sort_procs, ("no process_sort_index for pid", pid)
        assert (pid, tid) in meta["thread_name"], ("no thread_name for", pid, tid)
        assert (pid, tid) in meta["thread_sort_index"], ("no thread_sort_index for", pid, tid)


def test_x_events_nest_per_thread(traced):
    # the fake CUPTI lays the device timeline out from host time (work 2 us
    # after its call returns; a sync record spans its own API call, not the
    # work it waits for): under emulation a slow sync call overlaps the work
    # queued before it on the stream track
    tputil.need_native("the fake CUPTI's device timeline follows host speed")
    tracks = collections.defaultdict(list)
    for ev in tputil.events(traced["trace"], ph="X"):
        start = round(ev["ts"] * 1000)
        tracks[(ev["pid"], ev["tid"])].append((start, -round(ev["dur"] * 1000), ev))
    assert tracks
    for key, evs in tracks.items():
        evs.sort(key=lambda t: (t[0], t[1]))
        stack = []
        for start, negdur, ev in evs:
            end = start - negdur
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                assert end <= stack[-1][1], ("overlap on", key, stack[-1][2], ev)
            stack.append((start, end, ev))
    # a parent that starts with its child comes first in the file (catapult)
    order = {id(ev): i for i, ev in enumerate(traced["trace"]["traceEvents"])}
    for key, evs in tracks.items():
        for (s1, d1, e1), (s2, d2, e2) in zip(evs, evs[1:]):
            if s1 == s2 and d1 < d2:
                assert order[id(e1)] < order[id(e2)], (e1, e2)


def test_launch_and_api_events(traced):
    trace = traced["trace"]
    runtime = tputil.events(trace, ph="X", cat="cuda_runtime")
    launches = tputil.launches(trace)
    assert len(launches) == 4 * (LAUNCHES + 1)
    corr = [ev["args"]["correlation"] for ev in runtime]
    assert all(type(c) is int for c in corr)
    assert len(set(corr)) == len(corr)
    for la in launches:
        args = la["args"]
        for k in LAUNCH_ARGS:
            assert k in args, (k, la)
        assert type(args["cbid"]) is int
        assert isinstance(args["kernel"], str) and args["kernel"]
        for k in ("grid", "block"):
            assert len(args[k]) == 3 and all(type(v) is int and v >= 1 for v in args[k])
        assert type(args["shared memory"]) is int and type(args["cuda stream"]) is int
    adam = [la for la in launches if la["name"] == "__cudaLaunchKernel"]
    assert len(adam) == 4
    assert all(la["args"]["grid"] == [8, 2, 1] and la["args"]["block"] == [256, 1, 1]
               for la in adam)
    copies = [ev for ev in runtime if ev["name"] == "cudaMemcpy"]
    assert len(copies) == 8                     # H2D + D2H per recorded step
    for c in copies:
        assert c["args"]["bytes"] == 4096 and "kind" in c["args"]
    sets = [ev for ev in runtime if ev["name"] == "cudaMemsetAsync"]
    assert len(sets) == 4 and all(s["args"]["bytes"] == 16 for s in sets)
    syncs = [ev for ev in runtime if ev["name"] == "cudaStreamSynchronize"]
    assert len(syncs) == 4


def test_steps_and_nvtx_ranges(traced):
    trace = traced["trace"]
    steps = [ev for ev in tputil.events(trace, ph="X") if tputil.STEP_RE.match(ev["name"])]
    assert sorted(int(ev["name"].split("#")[1]) for ev in steps) == [1, 2, 3, 4]
    assert all(ev["cat"] == "user_annotation" for ev in steps)
    assert len({(ev["pid"], ev["tid"]) for ev in steps}) == 1     # on the main thread
    # Kineto's step args: External id = Record function id, and Ev Idx, the
    # event's place in traceEvents
    events = trace["traceEvents"]
    for ev in steps:
        a = ev["args"]
        assert a["External id"] == a["Record function id"] >= 1 << 48
        assert events[a["Ev Idx"]] is ev, (a, events[a["Ev Idx"]])
    fwd = tputil.events(trace, ph="X", cat="user_annotation", name="forward")
    assert len(fwd) == 4
    # every launch through cudaLaunchKernel lies inside a "forward" range
    for la in tputil.events(trace, ph="X", cat="cuda_runtime", name="cudaLaunchKernel"):
        assert any(f["ts"] <= la["ts"] and la["ts"] + la["dur"] <= f["ts"] + f["dur"] + 1e-3
                   for f in fwd), la


def test_trace_folder_holds_traces_only(traced):
    folder = os.path.dirname(traced["path"])
    assert all(re.search(r"\.json(\.gz)?$", f) for f in os.listdir(folder)), os.listdir(folder)
    assert not [f for f in os.listdir(folder) if f.endswith(".tmp")]
