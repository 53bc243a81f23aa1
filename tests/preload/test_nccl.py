"""NCCL wrappers (collector/record/apis/nccl.def, preload/nccl.c) against the fake NCCL
(tests/fakes/nccl.c) driven by tests/programs/nccl_calls.c: every collective
is one cpu_op event with the args Kineto writes for record_param_comms, with
bytes, group size and rank from the communicator cache and the nccl-tests bus
bandwidth factor, all hand-computed here; around it, the two layers torch's
ProcessGroupNCCL leaves in a Kineto trace (a "nccl:all_reduce" annotation
holding a record_param_comms op), and the process groups in distributedInfo.
Every other wrapped entry point (memory, registration, groups, shutdown) is one
cpu_op per call too; ncclMemAlloc'ed memory counts once in the memory
timeline.  The prototypes of the functions NCCL 2.28's nccl.h lacks
(preload/nccl_compat.h) are compiled against the torch wheel's newer NCCL
headers."""

import importlib.util
import os
import re
import subprocess

import pytest

import tputil

PROG = "nccl_calls"
NCCL_INVALID_ARGUMENT = 4
MEM_BYTES = 3 << 20     # nccl_calls.c's ncclMemAlloc

# name, count, nccl dtype -> (torch name, size), group size, rank, peer (send/recv)
def _coll(name, op, count, dtype, n, rank, peer=None, root=None):
    tname, size = dtype
    ins, outs = count, count
    # torch's record_param_comms: gather (numel, numel x size), scatter
    # (numel x size, numel); nccl-tests: gather/scatter busbw (n-1)/n
    if op in ("allgather", "gather"):
        outs = count * n
    elif op in ("reduce_scatter", "scatter"):
        ins = count * n
    elif op == "all_to_all":    # torch: the tensors' numel; NCCL's count is per peer
        ins = outs = count * n
    if op == "allreduce":
        factor = 2 * (n - 1) / n
    elif op in ("allgather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        factor = (n - 1) / n
    else:
        factor = 1
    args = {"Collective name": op, "In msg nelems": ins, "Out msg nelems": outs,
            "Group size": n, "Rank": rank, "dtype": tname, "bytes": count * size,
            "busbw factor": factor}
    if peer is not None:
        args["peer"] = peer
    if root is not None:
        args["root"] = root
    return (name, args)


F32, BF16, F16, I64, U8, F64, I32 = ("Float", 4), ("BFloat16", 2), ("Half", 2), \
    ("Long", 8), ("Byte", 1), ("Double", 8), ("Int", 4)
F8E4, F8E5, U32, I8, U64 = ("Float8_e4m3fn", 1), ("Float8_e5m2", 1), ("UInt32", 4), \
    ("Char", 1), ("UInt64", 8)
NONE = ("unknown", 0)     # a signal moves no data

# step 1 of nccl_calls.c, in order (A = 4 ranks rank 1, B = 8 ranks rank 3,
# InitAll pair = 2 ranks, C = 16 ranks rank 5, split S = 3 ranks rank 2,
# T = 3 ranks rank 2 at a reused address, G = A grown to 6 ranks, rank 1)
STEP1 = [
    _coll("ncclAllReduce", "allreduce", 1024, F32, 4, 1),
    _coll("ncclAllGather", "allgather", 256, BF16, 4, 1),
    _coll("ncclReduceScatter", "reduce_scatter", 128, F16, 4, 1),
    _coll("ncclBroadcast", "broadcast", 100, I64, 4, 1, root=2),
    _coll("ncclBcast", "broadcast", 10, U8, 4, 1, root=1),
    _coll("ncclReduce", "reduce", 64, F64, 8, 3, root=0),
    _coll("ncclAlltoAll", "all_to_all", 32, I32, 8, 3),
    ("ncclGroupStart", {}),
    ("ncclGroupStart", {}),
    _coll("ncclSend", "send", 50, F8E4, 4, 1, peer=2),
    ("ncclGroupEnd", {}),
    _coll("ncclRecv", "recv", 60, F8E5, 4, 1, peer=0),
    ("ncclGroupEnd", {}),
    _coll("ncclAllReduce", "allreduce", 5, U32, 2, 1),
    _coll("ncclAllReduce", "allreduce", 3, I8, 16, 5),
    _coll("ncclAllReduce", "allreduce", 9, F64, 3, 2),
    _coll("ncclAllGather", "allgather", 11, U64, 3, 2),
    _coll("ncclSend", "send", 7, U8, 8, 3, peer=3),
    _coll("ncclGather", "gather", 40, F32, 4, 1, root=3),
    _coll("ncclScatter", "scatter", 20, I32, 8, 3, root=0),
    ("ncclMemAlloc", {"bytes": MEM_BYTES}),
    ("ncclCommRegister", {}),
    ("ncclCommWindowRegister", {}),
    _coll("ncclPutSignal", "put_signal", 30, F16, 4, 1, peer=2),
    _coll("ncclSignal", "signal", 0, NONE, 4, 1, peer=3),
    _coll("ncclWaitSignal", "wait_signal", 0, NONE, 4, 1, peer=0),
    _coll("ncclWaitSignal", "wait_signal", 0, NONE, 4, 1),     # peers 2 and 3: none named
    ("ncclCommWindowDeregister", {}),
    ("ncclCommDeregister", {}),
    ("ncclMemFree", {"bytes": MEM_BYTES}),
    ("ncclGroupStart", {}),
    _coll("ncclSend", "send", 8, U8, 4, 1, peer=1),
    ("ncclGroupSimulateEnd", {}),
    _coll("ncclAllReduce", "allreduce", 13, I32, 6, 1),
    ("ncclCommSuspend", {}),
    ("ncclCommResume", {}),
    ("ncclDevCommCreate", {}),
    ("ncclDevCommDestroy", {}),
    ("ncclCommFinalize", {}),
    ("ncclCommRevoke", {}),
]
STEP1_COLLS = sum(1 for _, a in STEP1 if "Collective name" in a)
# (name, In msg nelems) inside a group (the last one ended by ncclGroupSimulateEnd)
GROUPED = {("ncclSend", 50), ("ncclRecv", 60), ("ncclSend", 8)}
GROUP_CALLS = ("ncclGroupStart", "ncclGroupEnd", "ncclGroupSimulateEnd")
KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _def_names():
    return set(tputil.def_entries("nccl.def"))


PG_KEYS = ("In split size", "Out split size", "Process Group Name", "Process Group Description",
           "Process Group Ranks", "Global rank start", "Global rank stride")


def _args(ev):
    """An event's args less ids, process groups and addresses (checked
    elsewhere)."""
    return {k: v for k, v in ev.get("args", {}).items()
            if k not in ("correlation", "External id", "grouped", "addr") + PG_KEYS}


def _step_bounds(trace):
    out = {}
    for ev in tputil.events(trace, ph="X"):
        m = tputil.STEP_RE.match(ev.get("name", ""))
        if m:
            out[int(m.group(1))] = (ev["ts"], ev["ts"] + ev["dur"])
    return out


def _inside(ev, lo, hi):
    return lo <= ev["ts"] and ev["ts"] + ev["dur"] <= hi + 1e-3


def _cpu_ops(trace):
    """The NCCL calls themselves (not torch's record_param_comms layer)."""
    return sorted((e for e in tputil.events(trace, ph="X", cat="cpu_op")
                   if e["name"] != "record_param_comms"), key=lambda e: e["ts"])


def _run(schedule, env=None):
    e = {"TRAINPROF_SCHEDULE": schedule}
    e.update(env or {})
    r = tputil.run(PROG, env=e)
    assert r.rc == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def all_run():
    r = _run("all")
    assert len(r.traces) == 1
    return r, tputil.load_trace(r.traces[0])


def test_stdout_and_status_same_with_and_without_library(all_run):
    plain = tputil.run(PROG, preload=False)
    assert plain.rc == 0, plain.stderr
    assert all_run[0].stdout == plain.stdout
    assert b"reuses the destroyed communicator's address: yes" in plain.stdout
    outside = tputil.run(PROG, env={"TRAINPROF_SCHEDULE": "skip_first=1000000"})
    assert outside.rc == 0 and outside.stdout == plain.stdout and outside.traces == []


def test_every_collective_once_with_expected_args(all_run):
    trace = all_run[1]
    lo, hi = _step_bounds(trace)[1]
    got = [(ev["name"], _args(ev)) for ev in _cpu_ops(trace) if _inside(ev, lo, hi)]
    assert got == STEP1
    assert {ev["name"] for ev in _cpu_ops(trace)} == _def_names()


def test_every_step_and_nothing_else(all_run):
    trace = all_run[1]
    bounds = _step_bounds(trace)
    assert sorted(bounds) == [0, 1, 2, 3]
    per_step = {s: [(ev["name"], ev["args"].get("In msg nelems"))
                    for ev in _cpu_ops(trace) if _inside(ev, *bounds[s])] for s in bounds}
    assert per_step[0] == [("ncclAllReduce", 1000)]
    assert per_step[2] == [("ncclAllReduce", 0)]
    assert per_step[3] == [("ncclAllReduce", 1003)]
    assert sum(len(v) for v in per_step.values()) == len(_cpu_ops(trace))


def test_unknown_dtype_gives_bytes_0(all_run):
    trace = all_run[1]
    lo, hi = _step_bounds(trace)[2]
    (ev,) = [ev for ev in _cpu_ops(trace) if _inside(ev, lo, hi)]
    a = ev["args"]
    assert a["bytes"] == 0 and a["dtype"] == "unknown"
    assert a["In msg nelems"] == 0 and a["Out msg nelems"] == 0
    assert a["Group size"] == 4 and a["Rank"] == 1
    assert a["status"] == NCCL_INVALID_ARGUMENT


def test_launch_inside_collective_is_its_own_runtime_event(all_run):
    trace = all_run[1]
    launches = tputil.events(trace, ph="X", cat="cuda_runtime", name="cudaLaunchKernel")
    reduces = [ev for ev in _cpu_ops(trace) if ev["name"] == "ncclAllReduce"
               and ev["args"]["bytes"] > 0]
    assert len(reduces) == 7 and len(launches) == 7
    for red in reduces:
        inner = [la for la in launches if _inside(la, red["ts"], red["ts"] + red["dur"])
                 and la["tid"] == red["tid"]]
        assert len(inner) == 1, red
        assert inner[0]["args"]["kernel"] == KERNEL
        assert "correlation" in inner[0]["args"]
        assert "correlation" not in red["args"]          # a cpu_op, as Kineto's
    assert not [ev for ev in _cpu_ops(trace) if ev["name"].startswith("cudaLaunch")]


def test_group_calls_lie_inside_the_group(all_run):
    """In time order, the calls made at a group depth above 0 (counted from
    the group calls themselves) are exactly GROUPED."""
    trace = all_run[1]
    lo, hi = _step_bounds(trace)[1]
    ops = [ev for ev in _cpu_ops(trace) if _inside(ev, lo, hi)]
    depth, inside = 0, set()
    for ev in ops:
        if ev["name"] == "ncclGroupStart":
            depth += 1
        elif ev["name"] in GROUP_CALLS:
            depth -= 1
        elif depth > 0:
            inside.add((ev["name"], ev["args"].get("In msg nelems")))
    assert depth == 0 and inside == GROUPED


def test_grouped_flag(all_run):
    ops = [ev for ev in _cpu_ops(all_run[1]) if "Collective name" in ev["args"]]
    if not any("grouped" in ev["args"] for ev in ops):
        pytest.skip("handlers/chrome_args.c does not print TP_LIB_GROUPED yet")
    grouped = {(ev["name"], ev["args"]["In msg nelems"]) for ev in ops
               if ev["args"].get("grouped")}
    assert grouped == GROUPED


def test_nothing_recorded_outside_windows():
    r = _run("wait=1,warmup=0,active=1")
    assert len(r.traces) == 1
    trace = tputil.load_trace(r.traces[0])
    assert tputil.steps(trace) == [1]
    assert [(ev["name"], _args(ev)) for ev in _cpu_ops(trace)] == STEP1
    launches = tputil.events(trace, ph="X", cat="cuda_runtime")
    # the allreduces of step 1 with a known type; ncclMemAlloc's cudaMalloc
    # and ncclMemFree's cudaFree are folded into them
    assert [ev["name"] for ev in launches] == ["cudaLaunchKernel"] * 5


def test_size_and_rank_asked_at_most_once_per_communicator():
    plain = tputil.run(PROG, preload=False, env={"FAKE_NCCL_STATS": "1"})
    assert b"fake-nccl: ncclCommCount=1 ncclCommUserRank=1" in plain.stderr
    # the program asks once; the profiler once each for the split and the
    # grown communicator (all others are filled from their creation arguments)
    r = _run("all", env={"FAKE_NCCL_STATS": "1"})
    assert b"fake-nccl: ncclCommCount=3 ncclCommUserRank=3" in r.stderr


# ---- torch's layers, process groups --------------------------------------------

# torch's names: the record_function "nccl:" + opTypeToString, and c10's C++
# type names of "Input type"
ANNOTATION = {"allreduce": "nccl:all_reduce", "allgather": "nccl:all_gather",
              "reduce_scatter": "nccl:reduce_scatter", "broadcast": "nccl:broadcast",
              "reduce": "nccl:reduce", "all_to_all": "nccl:all_to_all", "send": "nccl:send",
              "recv": "nccl:recv", "gather": "nccl:gather", "scatter": "nccl:scatter",
              # torch has no op type for NCCL's one-sided calls: our names
              "put_signal": "nccl:put_signal", "signal": "nccl:signal",
              "wait_signal": "nccl:wait_signal"}
CPP_TYPE = {"Float": "float", "BFloat16": "c10::BFloat16", "Half": "c10::Half",
            "Long": "long int", "Byte": "unsigned char", "Double": "double", "Int": "int",
            "Float8_e4m3fn": "c10::Float8_e4m3fn", "Float8_e5m2": "c10::Float8_e5m2",
            "UInt32": "unsigned int", "Char": "signed char", "UInt64": "unsigned long"}
# step 1's collectives, by communicator in creation order: A 0, B 1, the
# InitAll pair 2 and 3, C 4, S 5, the destroyed one 6, T 7 (at 6's address),
# G 8
STEP1_PG = ["0", "0", "0", "0", "0", "1", "1", "0", "0", "3", "4", "5", "7", "1",
            "0", "1", "0", "0", "0", "0", "0", "8"]


def _same_span(a, b):
    return (a["tid"], a["ts"], a["dur"]) == (b["tid"], b["ts"], b["dur"])


def test_collectives_as_torch_leaves_them(all_run):
    """Each collective call lies inside a record_param_comms cpu_op with the
    same args, inside a "nccl:<op>" user_annotation with the message's dims
    and type, all three over one span and written parents first; every
    External id in the trace's host ops is used once."""
    ev = all_run[1]["traceEvents"]
    calls = [e for e in _cpu_ops(all_run[1]) if "Collective name" in e["args"]]
    assert len(calls) == STEP1_COLLS + 3        # plus steps 0, 2, 3
    index = {id(e): i for i, e in enumerate(ev)}
    for call in calls:
        a = call["args"]
        (note,) = [e for e in ev if e.get("cat") == "user_annotation" and _same_span(e, call)
                   and e["name"].startswith("nccl:")]
        (rpc,) = [e for e in ev if e.get("name") == "record_param_comms" and _same_span(e, call)]
        assert note["name"] == ANNOTATION[a["Collective name"]], (note, call)
        assert note["args"]["Input Dims"] == [[a["In msg nelems"]]]
        assert note["args"]["Input type"] == [CPP_TYPE.get(a["dtype"], "")]
        assert rpc["cat"] == "cpu_op"
        assert {k: v for k, v in rpc["args"].items() if k not in ("External id", "Record function id")} == \
            {k: v for k, v in a.items() if k not in ("External id", "status")}
        assert index[id(note)] < index[id(rpc)] < index[id(call)]
        assert note["args"]["Record function id"] == note["args"]["External id"]
    ids = [e["args"]["External id"] for e in ev
           if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})]
    assert len(ids) == len(set(ids)) and all(i < 2 ** 53 for i in ids)


def test_process_groups(all_run):
    """Communicators are process groups named by creation order (a new one at
    a destroyed one's address is a new group); distributedInfo lists them
    with NCCL's version as the program's ncclGetVersion gives it."""
    trace = all_run[1]
    lo, hi = _step_bounds(trace)[1]
    got = [e["args"]["Process Group Name"] for e in _cpu_ops(trace)
           if _inside(e, lo, hi) and "Collective name" in e["args"]]
    assert got == STEP1_PG
    code = int(re.search(rb"^version (\d+)$", all_run[0].stdout, re.M).group(1))
    info = trace["distributedInfo"]
    assert info["nccl_version"] == "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)
    assert info["pg_count"] == 9
    assert [p["pg_size"] for p in info["pg_config"]] == [4, 8, 2, 2, 16, 3, 6, 3, 6]
    assert [p["pg_name"] for p in info["pg_config"]] == [str(i) for i in range(9)]
    # no launcher variable: the job's size is the largest communicator's
    # (16, this process rank 5), which is then the world, with its ranks
    assert [p["pg_desc"] for p in info["pg_config"]] == \
        ["default_pg" if p["pg_size"] == 16 else "undefined" for p in info["pg_config"]]
    assert all(p["ranks"] == (list(range(16)) if p["pg_size"] == 16 else [])
               for p in info["pg_config"]), info["pg_config"]


def test_world_process_group_has_its_ranks():
    """As rank 1 of 4, communicator A (4 ranks, rank 1) is the default
    process group: its global ranks are listed, as torch lists them."""
    r = _run("all", env={"RANK": 1, "WORLD_SIZE": 4})
    assert len(r.traces) == 1
    trace = tputil.load_trace(r.traces[0])
    info = trace["distributedInfo"]
    assert info["pg_config"][0] == {"pg_name": "0", "pg_desc": "default_pg",
                                    "backend_config": "cuda:nccl", "pg_size": 4,
                                    "ranks": [0, 1, 2, 3]}
    assert all(p["pg_desc"] == "undefined" for p in info["pg_config"][1:])
    on_a = [e for e in _cpu_ops(trace) if e["args"].get("Process Group Name") == "0"]
    assert on_a and all(e["args"]["Process Group Ranks"] == "[0, 1, 2, 3]" and
                        e["args"]["Process Group Description"] == "default_pg" for e in on_a)
    others = [e for e in _cpu_ops(trace) if e["args"].get("Process Group Name", "0") != "0"]
    assert others and not [e for e in others if "Process Group Ranks" in e["args"]]


def test_collective_kernels_carry_its_args_and_id():
    """With the fake CUPTI (step 0 warms up), each allreduce's kernel and
    the launch inside the call carry the External id of the call's
    nccl:all_reduce annotation, and the kernel the collective's args, as
    Kineto copies them from record_param_comms."""
    r = _run("warmup=1,active=3", env={"NCCL_STEP_SLEEP_US": 20000})
    assert len(r.traces) == 1
    ev = tputil.load_trace(r.traces[0])["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    # the fake launches a kernel for each allreduce NCCL accepts
    reduces = [e for e in ev if e.get("name") == "ncclAllReduce" and "status" not in e["args"]]
    assert len(reduces) == 6 and len(kernels) == len(reduces), kernels
    notes = {e["args"]["External id"]: e for e in ev if e.get("name") == "nccl:all_reduce"}
    rpcs = [e for e in ev if e.get("name") == "record_param_comms"]
    launches = [e for e in ev if e.get("name") == "cudaLaunchKernel"]
    for k in kernels:
        note = notes[k["args"]["External id"]]
        (rpc,) = [e for e in rpcs if _same_span(e, note)]
        for key, value in rpc["args"].items():
            if key not in ("External id", "Record function id"):
                assert k["args"][key] == value, (key, k["args"], rpc["args"])
        (launch,) = [e for e in launches if e["args"]["correlation"] == k["args"]["correlation"]]
        assert launch["args"]["External id"] == note["args"]["External id"]
        assert _inside(launch, note["ts"], note["ts"] + note["dur"])


# ---- memory: ncclMemAlloc/ncclMemFree --------------------------------------------

def test_nccl_memory_counts_once(all_run):
    """ncclMemAlloc'ed memory is device memory the program holds: one
    [memory] instant up at ncclMemAlloc and one down at ncclMemFree, at the
    address the call returned, on device 0's track; the fake's inner
    cudaMalloc/cudaFree are folded into the NCCL calls (no runtime event, no
    second count).  The fake NCCL's own communicator memory (cuMemAlloc_v2
    from its code, tests/fakes/nccl.c) has instants of its own, outside
    these two calls, none between them."""
    trace = all_run[1]
    (alloc,) = tputil.events(trace, ph="X", cat="cpu_op", name="ncclMemAlloc")
    (free,) = tputil.events(trace, ph="X", cat="cpu_op", name="ncclMemFree")
    addr = alloc["args"]["addr"]
    assert addr and free["args"]["addr"] == addr
    assert alloc["args"]["bytes"] == free["args"]["bytes"] == MEM_BYTES
    mem = [e for e in tputil.events(trace, ph="i", name="[memory]")
           if alloc["ts"] <= e["ts"] <= free["ts"] + free["dur"] + 0.002]
    assert [(e["args"]["Addr"], e["args"]["Bytes"], e["args"]["Device Type"],
             e["args"]["Device Id"]) for e in mem] == [(addr, MEM_BYTES, 1, 0),
                                                       (addr, -MEM_BYTES, 1, 0)]
    up, down = mem
    assert up["args"]["Total Allocated"] == down["args"]["Total Allocated"] + MEM_BYTES
    assert alloc["ts"] <= up["ts"] <= alloc["ts"] + alloc["dur"] + 0.002
    assert free["ts"] <= down["ts"] <= free["ts"] + free["dur"] + 0.002
    track = [e["args"]["bytes"] for e in tputil.events(trace, ph="C") if e["name"] == "GPU 0 memory reserved"]
    assert MEM_BYTES in [b - a for a, b in zip(track, track[1:])]
    runtime = {e["name"] for e in tputil.events(trace, ph="X", cat="cuda_runtime")}
    assert runtime == {"cudaLaunchKernel"}


# ---- prototypes against a newer nccl.h -------------------------------------------

def _wheel_nccl_include():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    inc = os.path.join(os.path.dirname(os.path.dirname(spec.origin)), "nvidia", "nccl", "include")
    return inc if os.path.isfile(os.path.join(inc, "nccl.h")) else None


@pytest.mark.parametrize("source", ["preload/nccl.c", "tests/fakes/nccl.c"])
def test_prototypes_match_the_wheel_nccl_headers(source):
    """preload/nccl_compat.h declares what NCCL 2.28's nccl.h lacks, from
    NCCL 2.30.7's headers: compiled against the torch wheel's nccl.h and
    nccl_device/core.h (with TP_NCCL_COMPAT_CHECK, so that our declarations
    meet NVIDIA's), every declaration, wrapper and fake function must agree
    with NVIDIA's prototypes (a difference is a compile error)."""
    inc = _wheel_nccl_include()
    if inc is None:
        pytest.skip("no torch wheel with nvidia-nccl headers in this venv")
    with open(os.path.join(inc, "nccl.h")) as f:
        code = int(re.search(r"^#define NCCL_VERSION_CODE (\d+)", f.read(), re.M).group(1))
    if code < 22907:
        pytest.skip("the wheel's nccl.h (%d) predates the functions compat declares" % code)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    unit = ("#include <cuda_runtime_api.h>\n#include <nccl.h>\n#include <nccl_device/core.h>\n"
            "#include \"%s\"\n" % os.path.join(tputil.ROOT, source))
    r = subprocess.run(["cc", "-std=gnu11", "-fsyntax-only", "-w", "-D_GNU_SOURCE",
                        "-DTP_NCCL_COMPAT_CHECK", "-I", tputil.ROOT, "-isystem", inc,
                        "-isystem", os.path.join(cuda, "include"), "-x", "c", "-"],
                       input=unit.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr.decode()[-4000:]
