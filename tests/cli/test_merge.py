"""`trainprof merge` on the traces of a 4-rank job:
tests/programs/ddp_loop.c as ranks 0-3 with torchrun's variables, on the
fakes with the fake CUPTI (kernels, flows on GPU tracks), meeting after
ncclCommInitRank as a real job's ranks do.

What the merged trace must be, checked against the inputs (never against
merge's own report): one gzip member of JSON; every rank's pids apart
(pid // 2^22 is the rank's slot) and labelled "rank N ..."; every input
event present, with its fields unchanged but pid, flow id and ts; ts moved
by exactly the shift merge reports, so the order of every track is kept;
flow ids unique across ranks, each pairing one start and one end of one
rank; distributedInfo of every rank kept.  Alignment: a copy of one rank's
trace whose CLOCK_REALTIME was stepped by 5 ms (its events and realtime
readings moved, CLOCK_MONOTONIC not) comes back onto the original times
within the skew bound merge records; a rank from another kernel (boot_id)
is reported with an unknown skew.  A trace written as one line (json.dump)
merges to the same events as the line-per-event one."""

import collections
import concurrent.futures
import gzip
import json
import os
import subprocess
import sys
import zlib

import pytest

import tputil

WORLD = 4
SCRIPT = os.path.join(tputil.ROOT, "scripts", "trainprof")
STRIDE = 1 << 22
STEP_NS = 5_000_000


def fake_cupti():
    return os.path.join(tputil.build_dir(), "fakes", "libcupti.so")


pytestmark = pytest.mark.skipif(not os.path.exists(fake_cupti()), reason="fake libcupti not built")


@pytest.fixture(scope="module")
def traces():
    d = tputil.new_dir()
    meet = os.path.join(d, "rendezvous")
    os.mkdir(meet)
    args = ["--warmup-us=20000", "--sleep-us=1000", "--rendezvous=" + meet]

    def one(rank):
        env = {"RANK": rank, "WORLD_SIZE": WORLD, "LOCAL_RANK": rank, "LOCAL_WORLD_SIZE": WORLD,
               "GROUP_RANK": 0, "TORCHELASTIC_RUN_ID": "mergejob", "FAKE_CUPTI_COMM_US": 200}
        return tputil.run("ddp_loop", args, env=env, cwd=d)

    with concurrent.futures.ThreadPoolExecutor(WORLD) as pool:
        results = list(pool.map(one, range(WORLD)))
    for r, res in enumerate(results):
        assert res.rc == 0, (r, res.stderr)
    paths = tputil.find_traces(d)
    assert len(paths) == WORLD, paths
    return {tputil.load_trace(p)["distributedInfo"]["rank"]: p for p in paths}


def merge_env():
    """Under make check-sanitize the engine of that build runs, under ASan."""
    env = dict(os.environ)
    asan = os.environ.get("TP_TEST_ASAN")
    if asan:
        env.update(LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0",
                   TP_TEST_MERGE_ENGINE=os.path.join(tputil.build_dir(), "libtrainprof_merge.so"))
    return env


def merge(paths, out, *extra):
    p = subprocess.run([sys.executable, SCRIPT, "merge", *paths, "-o", out, *extra],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                       env=merge_env())
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == b""
    return p.stderr.decode()


def load_one_member(path):
    raw = open(path, "rb").read()
    z = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = z.decompress(raw) + z.flush()
    assert z.eof and z.unused_data == b"", "not a single gzip member"
    return json.loads(text)


def ns(ts):
    return round(ts * 1000)


def strip(e):
    """An event without the fields merge rewrites."""
    return {k: v for k, v in e.items() if k not in ("pid", "ts", "id", "args") or
            (k == "args" and e.get("ph") != "M")}


@pytest.fixture(scope="module")
def merged(traces):
    out = os.path.join(tputil.new_dir(), "job.json.gz")
    err = merge([traces[r] for r in (2, 0, 3, 1)], out, "-j", "2")   # any order
    return out, load_one_member(out), err


def by_slot(trace):
    slots = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if isinstance(e.get("pid"), int):
            slots[e["pid"] // STRIDE].append(e)
    return slots


def test_structure_and_ranks(merged, traces):
    _out, t, err = merged
    assert t["schemaVersion"] == 1 and t["displayTimeUnit"] == "ms"
    m = t["trainprof"]["merge"]
    assert [r["rank"] for r in m["ranks"]] == list(range(WORLD))
    for r in m["ranks"]:
        src = tputil.load_trace(traces[r["rank"]])
        assert r["distributedInfo"] == src["distributedInfo"]
        assert r["skew_bound_ns"] is not None and r["skew_bound_ns"] >= 0
        assert "rank %d:" % r["rank"] in err or "rank %d (" % r["rank"] in err
    assert "residual skew <=" in err
    assert m["max_skew_bound_ns"] == max(r["skew_bound_ns"] for r in m["ranks"])
    for e in t["traceEvents"]:
        assert isinstance(e.get("name"), str) and e.get("ph")
        if e["ph"] == "X":
            assert isinstance(e.get("cat"), str) and e["dur"] >= 0
        if e["name"] == "Record Window End":     # merge's last event, as Kineto's
            assert e["ph"] == "i" and e is t["traceEvents"][-1]
            continue
        assert isinstance(e["pid"], int) and 0 <= e["pid"] < 1 << 32


def test_pids_apart_and_labelled(merged, traces):
    _out, t, _err = merged
    names = {e["pid"]: e["args"]["name"] for e in t["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    sort = {e["pid"]: e["args"]["sort_index"] for e in t["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_sort_index"}
    slots = by_slot(t)
    assert sorted(slots) == list(range(WORLD))
    for slot, evs in slots.items():
        src = tputil.load_trace(traces[slot])
        src_pids = {e["pid"] for e in src["traceEvents"]}
        pids = {e["pid"] for e in evs}
        assert pids == {slot * STRIDE + p for p in src_pids}
        for p in pids:
            assert names[p].startswith("rank %d " % slot), names[p]
        # ranks sort in rank order, and within a rank as the input sorted them
        assert max(sort[p] for p in pids) < min(sort[q] for q in sort if q // STRIDE > slot) \
            if slot < WORLD - 1 else True
    # GPU 0 of every rank is its own process
    assert len({p for p in names if p % STRIDE == 0}) == WORLD


def test_every_event_kept_and_time_moved_by_the_shift(merged, traces):
    _out, t, _err = merged
    m = t["trainprof"]["merge"]
    base = t["baseTimeNanoseconds"]
    slots = by_slot(t)
    counts = {c["rank"]: c["events"] for c in t["trainprofMergeCounts"]}
    for r in m["ranks"]:
        slot = r["slot"]
        src = tputil.load_trace(traces[r["rank"]])
        out = slots[slot]
        assert len(out) == len(src["traceEvents"]) == counts[r["rank"]]
        shift = r["shift_ns"] - (src["baseTimeNanoseconds"] - base)
        for a, b in zip(src["traceEvents"], out):      # same order, same events
            assert strip(a) == strip(b), (a, b)
            assert b["pid"] == slot * STRIDE + a["pid"]
            assert ns(b["ts"]) == ns(a["ts"]) + shift + (src["baseTimeNanoseconds"] - base), (a, b)
        # monotone per track: every (pid, tid) lists its events in the same
        # time order as the input did
        tracks = collections.defaultdict(lambda: ([], []))
        for a, b in zip(src["traceEvents"], out):
            tracks[(b["pid"], b["tid"])][0].append(a["ts"])
            tracks[(b["pid"], b["tid"])][1].append(b["ts"])
        for key, (ins, outs) in tracks.items():
            order_in = sorted(range(len(ins)), key=lambda i: (ins[i], i))
            order_out = sorted(range(len(outs)), key=lambda i: (outs[i], i))
            assert order_in == order_out, key


def test_flow_ids_unique_per_rank(merged):
    _out, t, _err = merged
    ends = collections.defaultdict(list)
    for e in t["traceEvents"]:
        if e["ph"] in ("s", "f"):
            ends[e["id"]].append(e)
    assert ends
    for fid, es in ends.items():
        assert sorted(e["ph"] for e in es) == ["f", "s"], es
        assert es[0]["pid"] // STRIDE == es[1]["pid"] // STRIDE
        assert fid % 10 == es[0]["pid"] // STRIDE


def _rewrite(src, dst, fn):
    t = tputil.load_trace(src)
    fn(t)
    with gzip.open(dst, "wt") as f:
        json.dump(t, f)          # one line: merge's event-by-event path


def _step_realtime(t):
    """A trace as if NTP had stepped CLOCK_REALTIME by STEP_NS before its
    window: events and realtime readings move, CLOCK_MONOTONIC does not."""
    c = t["trainprof"]["clock"]
    for end in ("start", "end"):
        c[end]["realtime_ns"] += STEP_NS
        c[end]["trace_ns"] += STEP_NS
    for e in t["traceEvents"]:
        e["ts"] = round(e["ts"] + STEP_NS / 1000, 3)


def _head(t):
    """The top-level keys of trace t but its events, one per line, as
    trainprof writes them, up to the event array's opening."""
    keys = "".join("  %s: %s,\n" % (json.dumps(k), json.dumps(v)) for k, v in t.items()
                   if k != "traceEvents")
    return "{\n" + keys + '  "traceEvents": ['


def test_realtime_step_is_removed_within_the_bound(traces):
    """Rank 1's copy as if NTP stepped CLOCK_REALTIME by +5 ms before its
    window: events and realtime readings move, CLOCK_MONOTONIC does not."""
    d = tputil.new_dir()
    stepped = os.path.join(d, "rank1.stepped.json.gz")

    _rewrite(traces[1], stepped, _step_realtime)
    out = os.path.join(d, "job.json.gz")
    err = merge([traces[0], stepped], out)
    t = load_one_member(out)
    r1 = t["trainprof"]["merge"]["ranks"][1]
    assert r1["rank"] == 1
    bound = r1["skew_bound_ns"]
    assert bound is not None and bound < 100_000, err
    orig = tputil.load_trace(traces[1])
    base = t["baseTimeNanoseconds"]
    got = by_slot(t)[1]
    assert len(got) == len(orig["traceEvents"])
    for a, b in zip(orig["traceEvents"], got):
        true = orig["baseTimeNanoseconds"] + ns(a["ts"])
        assert abs(base + ns(b["ts"]) - true) <= bound, (a, b, bound)


def test_other_kernel_reported_unknown(traces):
    d = tputil.new_dir()
    other = os.path.join(d, "rank3.otherhost.json.gz")

    def move(t):
        t["trainprof"]["clock"]["boot_id"] = "00000000-0000-0000-0000-000000000000"
        t["trainprof"]["clock"]["host"] = "elsewhere"

    _rewrite(traces[3], other, move)
    out = os.path.join(d, "job.json.gz")
    err = merge([traces[0], other], out)
    t = load_one_member(out)
    m = t["trainprof"]["merge"]
    assert m["clock_domains"] == 2 and m["max_skew_bound_ns"] is None
    assert m["ranks"][1]["skew_bound_ns"] is None
    assert "unknown (another host" in err and "2 clock domains" in err


def test_one_line_trace_merges_the_same(traces, merged):
    """json.dump's layout goes through the event-by-event path."""
    d = tputil.new_dir()
    one = os.path.join(d, "rank0.oneline.json.gz")
    _rewrite(traces[0], one, lambda t: None)
    out_a = os.path.join(d, "a.json.gz")
    out_b = os.path.join(d, "b.json.gz")
    merge([traces[0], traces[1]], out_a)
    merge([one, traces[1]], out_b)
    a, b = load_one_member(out_a), load_one_member(out_b)
    assert a["traceEvents"] == b["traceEvents"]


def test_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X"')
    p = subprocess.run([sys.executable, SCRIPT, "merge", str(bad), "-o", str(tmp_path / "o.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 2 and p.stdout == b""       # bad input: status 2 (README)
    assert p.stderr.decode().startswith("trainprof: merge: ") and p.stderr.count(b"\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["bad.json"]     # no output, no temporary file


# ---- the two engines: scripts/trainprof_cli/merge/engine.c against the Python path ----------

ENGINE = os.path.join(tputil.build_dir(), "libtrainprof_merge.so")


def _isal():
    return subprocess.run(["pkg-config", "--exists", "libisal"]).returncode == 0


def _need_engine():
    if not os.path.exists(ENGINE):
        assert not _isal(), "ISA-L is installed but %s was not built" % ENGINE
        pytest.skip("the C engine needs ISA-L (Debian libisal-dev)")


def _text(path):
    """The merged trace's text, less the line naming the output file."""
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        raw = z.decompress(raw) + z.flush()
        assert z.eof and z.unused_data == b""
    return b"\n".join(l for l in raw.split(b"\n") if not l.lstrip().startswith(b'"traceName"'))


def _both(paths, *extra, suffix=".json.gz"):
    d = tputil.new_dir()
    out = {}
    for engine in ("c", "python"):
        out[engine] = os.path.join(d, engine + suffix)
        merge(paths, out[engine], "--engine", engine, *extra)
    return out["c"], out["python"]


def _rewrite_lines(src, dst, fn, opener=gzip.open):
    """As _rewrite, laid out one event per line as trainprof writes."""
    t = tputil.load_trace(src)
    fn(t)
    text = _head(t) + "\n" + ",\n".join(json.dumps(e) for e in t["traceEvents"]) + "\n  ]\n}\n"
    with opener(dst, "wb") as f:
        f.write(text.encode())
    return text.encode()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_engines_write_the_same_bytes(traces, jobs):
    """Four ranks of line-per-event traces: the C engine's output is the
    Python path's, byte for byte (pids, flow ids, process names and sort
    indexes, counts), one gzip member either way."""
    _need_engine()
    c, py = _both([traces[r] for r in range(WORLD)], "-j", jobs)
    assert _text(c) == _text(py)
    assert len(load_one_member(c)["traceEvents"]) > 100


def test_engines_agree_on_moved_time(traces):
    """A rank whose realtime was stepped, in the line layout: every ts moves
    (the engine's ts rewrite), the same as the Python path moves it."""
    _need_engine()
    d = tputil.new_dir()
    stepped = os.path.join(d, "rank1.stepped.json.gz")

    _rewrite_lines(traces[1], stepped, _step_realtime)
    c, py = _both([traces[0], stepped])
    shift = load_one_member(c)["trainprof"]["merge"]["ranks"][1]["shift_ns"]
    assert abs(shift + STEP_NS) < 100_000, shift
    assert _text(c) == _text(py)


def test_engine_goes_on_event_by_event_where_lines_stop(traces):
    """Half the events one per line, the rest pretty-printed: the engine
    stops at the first event that is not a line and the Python path goes on
    from there; every event is kept, as the Python path alone keeps them."""
    _need_engine()
    d = tputil.new_dir()
    mixed = os.path.join(d, "rank2.mixed.json.gz")
    t = tputil.load_trace(traces[2])
    evs = t.pop("traceEvents")
    half = len(evs) // 2
    text = _head(t) + "\n" + "".join(json.dumps(e) + ",\n" for e in evs[:half])
    text += ",\n".join(json.dumps(e, indent=2) for e in evs[half:]) + "\n  ],\n"
    text += '  "traceName": "mixed"\n}\n'
    with gzip.open(mixed, "wb") as f:
        f.write(text.encode())
    c, py = _both([traces[0], mixed])
    a, b = load_one_member(c), load_one_member(py)
    assert a["traceEvents"] == b["traceEvents"]
    counts = {x["rank"]: x["events"] for x in a["trainprofMergeCounts"]}
    assert counts[2] == len(evs)
    assert a["trainprofMergeTrailers"] == b["trainprofMergeTrailers"]
    assert {"traceName": "mixed"} in a["trainprofMergeTrailers"]


def _kineto_layout(events):
    """The event array as Kineto's ChromeTraceLogger writes it: each event
    over several indented lines (libkineto/src/output_json.cpp)."""
    out = []
    for e in events:
        keys = [k for k in e if k != "args"]
        head = ", ".join("%s: %s" % (json.dumps(k), json.dumps(e[k])) for k in keys[:5])
        rest = ", ".join("%s: %s" % (json.dumps(k), json.dumps(e[k])) for k in keys[5:])
        text = "  {\n    " + head + (",\n    " + rest if rest else "")
        if "args" in e:
            args = ", ".join("%s: %s" % (json.dumps(k), json.dumps(v)) for k, v in e["args"].items())
            text += ',\n    "args": {\n      ' + args + "\n    }"
        out.append(text + "\n  }")
    return ",".join(out)


def test_kineto_layout_goes_through_the_engine(traces, tmp_path):
    """A trace in Kineto's layout (an event over several lines) merges to the
    same events through the engine as through the Python path's event mode,
    and the engine takes it whole (its output is one line per event)."""
    _need_engine()
    t = tputil.load_trace(traces[1])
    evs = t.pop("traceEvents")
    text = _head(t) + _kineto_layout(evs) + "\n  ],\n"
    text += '  "traceName": "kineto"\n}'
    kineto = str(tmp_path / "rank1.kineto.json.gz")
    with gzip.open(kineto, "wb") as f:
        f.write(text.encode())
    c, py = _both([traces[0], kineto])
    a, b = load_one_member(c), load_one_member(py)
    assert a["traceEvents"] == b["traceEvents"]
    assert len(by_slot(a)[1]) >= len(evs)
    lines = _text(c).split(b"\n")
    start = lines.index(b'  "traceEvents": [')
    body = lines[start + 1:lines.index(b"  ],", start)]
    assert all(l.startswith(b"{") and l.endswith(b"},") for l in body[:-1]), body[:3]
    assert len(body) >= len(evs) + len(tputil.load_trace(traces[0])["traceEvents"])


TORCH_PROFILE = """
import sys, torch
from torch.profiler import profile, ProfilerActivity
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        opt.zero_grad()
        m(torch.randn(16, 64)).sum().backward()
        opt.step()
prof.export_chrome_trace(sys.argv[1])
"""


def test_real_torch_profiler_trace_through_the_engine(traces, tmp_path):
    """A trace torch.profiler itself wrote (the PyPI wheel's Kineto, on the
    CPU: its own layout, string pids and tids, its own flows and metadata)
    merges beside one of ours to the same events through the engine as
    through the Python path's json, and every one of its events is kept."""
    _need_engine()
    if os.environ.get("TP_TEST_NO_TORCH") == "1":
        pytest.skip("TP_TEST_NO_TORCH=1")
    kineto = str(tmp_path / "torch.json")
    p = subprocess.run([sys.executable, "-c", TORCH_PROFILE, kineto], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    with open(kineto, "rb") as f:
        raw = f.read()
    assert raw.count(b"\n") > raw.count(b'"ph"'), "not Kineto's layout (an event over lines)"
    src = json.loads(raw)
    c, py = _both([traces[0], kineto])
    a, b = load_one_member(c), load_one_member(py)
    assert a["traceEvents"] == b["traceEvents"]
    slot = [r["slot"] for r in a["trainprof"]["merge"]["ranks"] if r["file"] == "torch.json"][0]
    mine = [e for e in a["traceEvents"] if isinstance(e.get("pid"), int) and e["pid"] // STRIDE == slot
            and e.get("name") != "Record Window End"]
    names = collections.Counter(e["name"] for e in src["traceEvents"] if e.get("ph") == "X")
    assert names and collections.Counter(e["name"] for e in mine if e.get("ph") == "X") == names


def test_engine_reads_members_and_plain_files_and_writes_plain(traces):
    """An input of several gzip members (split mid-line) and a plain .json
    input merge as the single-member gzip does; a plain output holds the
    same text as the gzip output."""
    _need_engine()
    d = tputil.new_dir()
    plain = os.path.join(d, "rank1.json")
    text = _rewrite_lines(traces[1], plain, lambda t: None, opener=open)
    members = os.path.join(d, "rank1.members.json.gz")
    with open(members, "wb") as f:
        for a in range(0, len(text), 7777):
            f.write(gzip.compress(text[a:a + 7777], 1))
    one = os.path.join(d, "rank1.one.json.gz")
    with open(one, "wb") as f:
        f.write(gzip.compress(text, 1))
    outs = {}
    for name, src in (("one", one), ("members", members), ("plain", plain)):
        outs[name] = os.path.join(d, name + ".out.json.gz")
        merge([traces[0], src], outs[name], "--engine", "c")
    ref = load_one_member(outs["one"])["traceEvents"]
    assert load_one_member(outs["members"])["traceEvents"] == ref
    assert load_one_member(outs["plain"])["traceEvents"] == ref
    flat = os.path.join(d, "plain.out.json")
    merge([traces[0], one], flat, "--engine", "c")
    with open(flat, "rb") as f:
        assert json.load(f)["traceEvents"] == ref


def test_python_path_writes_plain_output(traces, tmp_path):
    """A plain output from the Python path's worker pieces, line by line and
    event by event (it once wrote None there and stopped with a TypeError)."""
    one = str(tmp_path / "rank0.oneline.json.gz")
    _rewrite(traces[0], one, lambda t: None)
    flat = str(tmp_path / "out.json")
    merge([one, traces[1]], flat, "--engine", "python", "-j", "2")
    with open(flat) as f:
        got = json.load(f)
    ref = str(tmp_path / "out.json.gz")
    merge([one, traces[1]], ref, "--engine", "python")
    assert got["traceEvents"] == load_one_member(ref)["traceEvents"]


@pytest.mark.parametrize("engine", ["c", "python"])
def test_truncated_input_is_one_error_line(traces, tmp_path, engine):
    if engine == "c":
        _need_engine()
    raw = open(traces[1], "rb").read()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[:len(raw) * 2 // 3])
    out = tmp_path / "o.json.gz"
    p = subprocess.run([sys.executable, SCRIPT, "merge", traces[0], str(cut), "-o", str(out),
                        "--engine", engine], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120, env=merge_env())
    assert p.returncode == 2 and p.stdout == b"", p.stderr
    assert p.stderr.decode().startswith("trainprof: merge: ") and p.stderr.count(b"\n") == 1, p.stderr
    assert sorted(os.listdir(tmp_path)) == ["cut.json.gz"]
