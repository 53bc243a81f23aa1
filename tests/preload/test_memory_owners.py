"""The memory ledger's owners (collector/modules/memowner.c) against real
software: PyTorch's libc10_cuda.so from the PyPI wheel imports cudaMalloc
and cudaFree from libcudart, so its allocations reach the runtime's
exported entry points (the profiler's wrappers) from call sites inside it;
every such call site must resolve to "PyTorch caching allocator" inside a
c10 function.  No GPU is needed to resolve a call site: the call sites are
found with objdump, and the unit binary build/tests/test_memowner resolves
them in a process that loaded the real library."""

import importlib.util
import os
import re
import subprocess

import pytest

import tputil

if os.environ.get("TP_TEST_NO_TORCH") == "1":
    pytest.skip("TP_TEST_NO_TORCH=1", allow_module_level=True)


def _torch_lib(name):
    spec = importlib.util.find_spec("torch")
    assert spec is not None, "torch is not installed in this venv (tests/requirements-torch.txt)"
    path = os.path.join(os.path.dirname(spec.origin), "lib", name)
    assert os.path.exists(path), path
    return path


def _imports(path):
    out = subprocess.run(["readelf", "--dyn-syms", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r"UND (cuda\w+)@(\S+)", out)}


def _call_sites(path, callee):
    """Offsets of the return addresses of every `call callee@plt` in path."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    sites = []
    for i, line in enumerate(out):
        if re.search(r"\bcall\s+[0-9a-f]+ <%s@plt>" % callee, line):
            nxt = out[i + 1].strip()
            sites.append(nxt.split(":")[0])
    return sites


def test_libc10_cuda_allocates_through_the_runtimes_entry_points():
    """What the profiler relies on: the caching allocator calls the
    runtime's exported cudaMalloc/cudaFree (interposable), not the driver."""
    imp = _imports(_torch_lib("libc10_cuda.so"))
    for fn in ("cudaMalloc", "cudaFree"):
        assert fn in imp and imp[fn].startswith("libcudart.so"), imp


def test_libc10_cuda_call_sites_name_pytorchs_caching_allocator():
    lib = _torch_lib("libc10_cuda.so")
    sites = _call_sites(lib, "cudaMalloc") + _call_sites(lib, "cudaFree")
    assert len(sites) >= 2, sites
    exe = os.path.join(tputil.build_dir(), "tests", "test_memowner")
    env = dict(os.environ, TP_TEST_C10=lib, TP_TEST_C10_SITES=",".join(sites), CK_FORK="yes")
    p = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    named = re.findall(r"libc10_cuda.so call site \d+: (.*)", p.stderr)
    assert len(named) == len(sites), p.stderr
    assert all(n.startswith("c10::") and n.endswith("(libc10_cuda.so)") for n in named), named
    # the allocator's own function is among them
    assert any("CUDACachingAllocator" in n for n in named), named


def _needed(path):
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _wheel_lib(package, name):
    spec = importlib.util.find_spec("nvidia")
    assert spec is not None, "the nvidia wheels come with torch (tests/requirements-torch.txt)"
    for base in spec.submodule_search_locations:
        path = os.path.join(base, package, "lib", name)
        if os.path.exists(path):
            return path
    pytest.fail("%s/lib/%s not in the nvidia wheels" % (package, name))


@pytest.mark.parametrize("package,name", [("nccl", "libnccl.so.2"), ("cu13", "libcublas.so.13"),
                                          ("cu13", "libcublasLt.so.13"), ("cudnn", "libcudnn_ops.so.9"),
                                          ("cudnn", "libcudnn_graph.so.9")])
def test_libraries_reach_the_driver_from_their_own_code(package, name):
    """NCCL, cuBLAS(Lt) and cuDNN link the CUDA runtime statically: they
    import no runtime entry point and need no libcudart, and they look the
    driver's entry points up with cuGetProcAddress (which hands out the
    profiler's driver wrappers, preload/procaddr.c).  So their allocations
    reach a driver wrapper with a return address inside their own object:
    the ledger names them by it (memowner.c, rule 2), outside windows too.
    cuDNN 9's libcudnn.so.9 is a shim that loads libcudnn_*.so.9, whose code
    makes the calls: every one of them is named "cuDNN" by its prefix."""
    path = _wheel_lib(package, name)
    assert not _imports(path), _imports(path)
    assert not any(n.startswith("libcudart") for n in _needed(path)), _needed(path)
    text = open(path, "rb").read()
    assert b"cuGetProcAddress" in text and b"cuMemAlloc" in text, name


# ---- the fake job: every byte to its owner (tests/programs/mem_owners.c) -----

import glob
import json
import time

MIB = 1 << 20
OWNERS = {"NCCL", "cuBLAS", "PyTorch caching allocator", "mem_owners"}
# held at the end of every step of mem_owners (its DESIGN comment)
HELD = {"NCCL": 6 * MIB, "cuBLAS": 1 * MIB, "PyTorch caching allocator": 32 * MIB, "mem_owners": 18 * MIB}


def _owners_run(args=(), env=None):
    e = {"TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2", "TRAINPROF_ACTIVITIES": "cpu",
         "TRAINPROF_HANDLERS": "chrome,summary,memory"}
    e.update(env or {})
    r = tputil.run("mem_owners", list(args), env=e)
    return r


def _reports(r):
    return os.path.join(r.cwd, "test", "reports")


def _one(pattern):
    (path,) = glob.glob(pattern)
    return path


def test_every_byte_has_its_owner():
    """NCCL's communicator and first collective, cuBLAS's workspace,
    libc10_cuda.so's blocks, the program's own cudaMalloc and VMM memory:
    each in the trace's [memory] events, the owner counter track, the
    summary, summary.json and the memory page, with coverage 100 %."""
    plain = tputil.run("mem_owners", [], preload=False)
    r = _owners_run()
    assert r.rc == 0 and r.stdout == plain.stdout, r.stderr
    (trace_path,) = r.traces
    t = tputil.load_trace(trace_path)
    mem = tputil.events(t, ph="i", name="[memory]")
    assert mem and {e["args"]["Owner"] for e in mem} <= OWNERS, mem
    for e in mem:
        if e["args"]["Owner"] == "PyTorch caching allocator":
            assert e["args"]["Site"].endswith("(libc10_cuda.so)"), e
    # the per-owner track: at the window's end, every owner with its bytes
    track = [e for e in t["traceEvents"] if e.get("ph") == "C" and e.get("name") == "GPU 0 memory by owner"]
    assert track, [e.get("name") for e in t["traceEvents"] if e.get("ph") == "C"]
    last = max(track, key=lambda e: e["ts"])["args"]
    assert dict(last) == HELD, last

    js = json.load(open(_one(os.path.join(_reports(r), "*.summary.json"))))
    rows = {o["owner"]: o for o in js["memory_owners"] if o["device"] == 0 and o["class"] == "device"}
    assert {k: v["end_bytes"] for k, v in rows.items()} == HELD, rows
    assert {k: v["start_bytes"] for k, v in rows.items()} == HELD    # steps 2-3: the same level
    # the window's own calls: one c10 block freed and one allocated per step
    assert rows["PyTorch caching allocator"]["allocs"] == 2 and rows["PyTorch caching allocator"]["frees"] == 2
    dev = [m for m in js["memory"] if m["device"] == 0 and m["class"] == "device"][0]
    assert sum(HELD.values()) == dev["end_bytes"]
    assert js["memory_coverage"] == 1.0 and js["memory_owners_exact"] is True
    c10_sites = rows["PyTorch caching allocator"]["sites"]
    assert c10_sites and all("(libc10_cuda.so)" in s["site"] for s in c10_sites), c10_sites
    nccl_sites = [s["site"] for s in rows["NCCL"]["sites"]]
    assert any(s.startswith("ncclCommInitRank > ") for s in nccl_sites), nccl_sites

    txt = open(_one(os.path.join(_reports(r), "*.summary.txt"))).read()
    assert "Memory by owner (GPU 0)" in txt and "Owner named for 100.0 %" in txt, txt
    page = json.load(open(_one(os.path.join(_reports(r), "*.memory.json"))))
    series = [s for s in page["series"] if s["device"] == 0 and s["class"] == "device"][0]
    assert {o["owner"]: o["end_bytes"] for o in series["owners"]} == HELD


def test_leak_at_exit_names_its_owner():
    """--leak keeps the program's 16 MiB cudaMalloc: one line at exit names
    the program as its owner; without it, no line."""
    r = _owners_run(["--leak"])
    assert r.rc == 0, r.stderr
    lines = [ln for ln in r.stderr.decode().splitlines() if "memory held at exit" in ln]
    assert len(lines) == 1 and "GPU 0: mem_owners 16.00 MiB (1 block)" in lines[0], lines
    r = _owners_run()
    assert b"memory held at exit" not in r.stderr, r.stderr


def _oom_run(budget, grow, extra_env=None):
    env = {"FAKE_CUDA_MEM_BUDGET": str(budget)}
    env.update(extra_env or {})
    return _owners_run(["--steps=8", "--grow=%d" % grow], env=env)


def test_out_of_memory_report():
    """Budget 80 MiB; from step 1 libc10_cuda.so holds 6 MiB more each
    step: 57 + 6 s > 80 first at step 4 (75 + 6), where the grow allocation
    fails; the allocator frees its cached 8 MiB block and retries, which
    fits (79), then the step's own 8 MiB fails with nothing left to free,
    twice: one burst of 3 failed calls, one report, with the levels of the
    first failure."""
    budget, grow = 80 * MIB, 6 * MIB
    r = _oom_run(budget, grow)
    assert r.rc == 1 and b"torch.OutOfMemoryError" in r.stderr, r.stderr
    warn = [ln for ln in r.stderr.decode().splitlines() if "out of memory on GPU 0" in ln]
    assert len(warn) == 1 and warn[0].endswith("rank0.oom.txt"), r.stderr
    js = json.load(open(os.path.join(_reports(r), "rank0.oom.json")))
    req = js["request"]
    assert req["api"] == "cudaMalloc" and req["bytes"] == grow and req["owner"] == "PyTorch caching allocator"
    assert req["site"].endswith("(libc10_cuda.so)"), req
    assert js["steps_completed"] == 4
    held = {o["owner"]: o["bytes"] for o in js["owners"]}
    assert held == dict(HELD, **{"PyTorch caching allocator": 32 * MIB + 3 * grow}), held
    assert js["ledger_bytes"] == sum(held.values()) == 75 * MIB
    dm = js["device_memory"]
    assert dm["total_bytes"] == budget and dm["free_bytes"] == budget - js["ledger_bytes"], dm
    assert js["coverage"] == 1.0
    assert js["failures"] == {"failed_calls": 3, "frees_after_first": 1, "allocations_after_first": 1}
    sites = {(x["owner"], x["site"].split(" > ")[0]) for x in js["sites"]}
    assert ("NCCL", "ncclCommInitRank") in sites and ("cuBLAS", "cublasCreate_v2") in sites, sites
    # what grew since each step end, by owner: grow blocks only
    g = {x["step"]: x for x in js["growth"]}
    assert sorted(g) == [0, 1, 2, 3]
    assert [g[k]["grew_bytes"] for k in (3, 2, 1, 0)] == [0, grow, 2 * grow, 3 * grow], g
    assert g[0]["owners"] == {"PyTorch caching allocator": 3 * grow, "NCCL": 0, "cuBLAS": 0, "mem_owners": 0}
    txt = open(os.path.join(_reports(r), "rank0.oom.txt")).read()
    assert "cudaMalloc of 6.00 MiB on GPU 0 failed for want of memory, with 4 steps completed." in txt, txt
    assert "since step 0: +18.00 MiB (PyTorch caching allocator +18.00 MiB)" in txt, txt
    assert "80.00 MiB total, 5.00 MiB free, 75.00 MiB used" in txt, txt
    assert not [f for f in os.listdir(_reports(r)) if f.endswith(".tmp")]


def test_out_of_memory_report_with_its_stack():
    r = _oom_run(80 * MIB, 6 * MIB, {"TRAINPROF_MEMORY_STACKS": "1"})
    assert r.rc == 1, r.stderr
    js = json.load(open(os.path.join(_reports(r), "rank0.oom.json")))
    stack = js["request"]["stack"]
    assert any("c10_fake_raw_alloc" in f for f in stack) and any(f == "main" for f in stack), stack


def test_out_of_memory_report_within_two_seconds_while_the_job_goes_on():
    """A job that survives its failed allocation (it skips the batch): the
    report is there within 2 s of the failure, from tp-flush, not at exit."""
    env = tputil.base_env({"TRAINPROF_SCHEDULE": "none", "FAKE_CUDA_OOM_BYTES": str(256 * MIB),
                           "TRAIN_OOM_GOES_ON": "1"})
    cwd = tputil.new_dir()
    p = subprocess.Popen([tputil.program("train_loop"), "--steps=40", "--sleep-us=100000", "--oom-at=2"],
                         cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        line = b""
        while b"train_loop: oom:" not in line:
            line = p.stderr.readline()
            assert line, "the program ended before its failed allocation"
        t0 = time.monotonic()
        path = os.path.join(cwd, "test", "reports", "rank0.oom.json")
        while not os.path.exists(path) and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        latency = time.monotonic() - t0
        assert os.path.exists(path) and p.poll() is None, (latency, p.poll())
        assert latency < 2.0, latency
        js = json.load(open(path))
        assert js["request"]["owner"] == "train_loop" and js["failures"]["failed_calls"] == 1, js
    finally:
        p.kill()
        p.communicate()


# ---- bad input and faults ----------------------------------------------------

def test_threads_failing_at_once_make_one_report():
    """8 threads ask for 1 GiB at the same moment, all refused: one burst,
    one report counting 8 failed calls, and the program's results as without
    the library."""
    env = {"FAKE_CUDA_OOM_BYTES": str(256 * MIB)}
    plain = tputil.run("oom_faults", ["threads", "8"], env=env, preload=False)
    r = tputil.run("oom_faults", ["threads", "8"], env=env)
    assert r.rc == 0 and r.stdout == plain.stdout, r.stderr
    assert r.stdout.count(b": 2\n") == 8        # cudaErrorMemoryAllocation, each
    names = sorted(os.listdir(_reports(r)))
    assert [n for n in names if ".oom." in n] == ["rank0.oom.json", "rank0.oom.txt"], names
    js = json.load(open(os.path.join(_reports(r), "rank0.oom.json")))
    assert js["failures"]["failed_calls"] == 8 and js["request"]["bytes"] == 1 << 30, js
    assert {o["owner"]: o["bytes"] for o in js["owners"]} == {"oom_faults": MIB}


def test_allocations_from_a_signal_handler():
    """A handler that allocates, firing every 100 us over 20,000 allocation
    pairs of the program's own: no deadlock, no crash, the same results."""
    plain = tputil.run("oom_faults", ["signal", "20000"], preload=False, timeout=60)
    r = tputil.run("oom_faults", ["signal", "20000"], timeout=60)
    assert r.rc == 0 and r.stdout == plain.stdout == b"pairs 20000 done\n", r.stderr
    assert b"handler allocations" in r.stderr


def test_a_caller_with_no_symbols():
    """A stripped program: its call sites are named by object and offset,
    and its memory is still the program's.  (Beside build/programs, so that
    its run path $ORIGIN/../fakes still finds the fakes.)"""
    d = os.path.join(tputil.build_dir(), "stripped")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "mem_owners")
    subprocess.run(["strip", "-o", exe, tputil.program("mem_owners")], check=True)
    c10 = os.path.join(tputil.build_dir(), "fakes", "c10", "libc10_cuda.so")
    r = tputil.run(exe, ["--steps=8", "--grow=%d" % (6 * MIB), "--c10=" + c10],
                   env={"FAKE_CUDA_MEM_BUDGET": str(80 * MIB), "TRAINPROF_SCHEDULE": "none",
                        "TRAINPROF_FLIGHT": None})
    assert r.rc == 1, r.stderr
    js = json.load(open(os.path.join(_reports(r), "rank0.oom.json")))
    mine = [s["site"] for s in js["sites"] if s["owner"] == "mem_owners"]
    assert mine and all(re.fullmatch(r"mem_owners\+0x[0-9a-f]+", s) for s in mine), mine
    assert js["coverage"] == 1.0
