"""The device-memory timeline: tests/programs/mem_calls.c makes a known
sequence of allocations (runtime, driver, VMM, host-pinned, managed, pitch,
3D, async, one out-of-memory failure) over five steps, of which steps 2 and 3
record.  The trace's [memory] instants, the API events' args and the counter
tracks must follow from that sequence, counting memory allocated before the
window, and a cudaMalloc that the (fake) runtime forwards to cuMemAlloc_v2
must count once."""

import re

import tputil

MIB = 1 << 20
SCHED = "wait=1,warmup=1,active=2"


def _run(extra=None):
    env = {"TRAINPROF_SCHEDULE": SCHED, "FAKE_CUDA_OOM_BYTES": str(256 * MIB),
           "FAKE_CUDART_VIA_DRIVER": "1", "TRAINPROF_ACTIVITIES": "cpu"}
    env.update(extra or {})
    r = tputil.run("mem_calls", env=env)
    assert r.rc == 0, r.stderr
    addrs = {m.group(1).decode(): int(m.group(2), 16)
             for m in re.finditer(rb"addr (\w+) 0x([0-9a-f]+)", r.stderr)}
    return r, addrs


def _calls(trace):
    return [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")]


def test_stdout_unchanged():
    r, _ = _run()
    plain = tputil.run("mem_calls", env={"FAKE_CUDA_OOM_BYTES": str(256 * MIB),
                                         "FAKE_CUDART_VIA_DRIVER": "1"}, preload=False)
    assert plain.rc == 0 and r.stdout == plain.stdout
    assert b"out of memory" in r.stdout and b"pitch 512, 3D pitch 512" in r.stdout


def test_memory_instants_follow_the_sequence():
    r, a = _run()
    (path,) = r.traces
    t = tputil.load_trace(path)
    mem = tputil.events(t, ph="i", name="[memory]")
    for e in mem:
        assert e["cat"] == "cpu_instant_event" and e["s"] == "t", e
        assert e["args"]["Total Allocated"] == e["args"]["Total Reserved"], e
    got = [(e["args"]["Addr"], e["args"]["Bytes"], e["args"]["Device Type"], e["args"]["Device Id"],
            e["args"]["Total Allocated"]) for e in mem]
    dev0 = 3 * MIB          # A (1 MiB) and B (2 MiB), allocated before the window
    host = 4096             # H, before the window
    expect = []

    def dev(addr, b):
        nonlocal dev0
        dev0 += b
        expect.append((addr, b, 1, 0, dev0))

    dev(a["C"], 4096)
    dev(a["A"], -MIB)                            # freed in the window: its size is known
    expect.append((a["M"], 8192, 1, 0, 8192))    # managed: its own total
    host += 16384
    expect.append((a["H2"], 16384, 0, -1, host))
    dev(a["P"], 512 * 4)                         # pitch x height
    dev(a["Q"], 512 * 4 * 2)
    dev(a["S"], 65536)
    dev(a["S"], -65536)
    dev(a["D"], 131072)                          # driver
    dev(a["D"], -131072)
    dev(a["V"], 2 * MIB)                         # VMM physical memory, keyed by handle
    dev(a["V"], -2 * MIB)
    dev(a["C"], -4096)
    host -= 16384
    expect.append((a["H2"], -16384, 0, -1, host))
    assert got == expect
    # on the calling thread, at the end of its call
    calls = _calls(t)
    tids = {c["tid"] for c in calls}
    assert {e["tid"] for e in mem} <= tids


def test_api_events_failed_noop_and_nesting():
    r, a = _run()
    t = tputil.load_trace(r.traces[0])
    calls = _calls(t)
    names = [c["name"] for c in calls]
    failed = [c for c in calls if c["args"].get("failed")]
    assert len(failed) == 1
    (f,) = failed
    assert f["name"] == "cudaMalloc" and f["args"]["bytes"] == 1 << 30 and f["args"]["addr"] == 0
    assert f["args"]["status"] == 2        # cudaErrorMemoryAllocation
    frees = [c for c in calls if c["name"] == "cudaFree"]
    assert frees[0]["args"]["addr"] == 0 and frees[0]["args"]["bytes"] == 0   # cudaFree(NULL)
    assert frees[1]["args"] == {**frees[1]["args"], "addr": a["A"], "bytes": MIB}
    # the runtime forwarded every cudaMalloc/cudaFree to the driver: only the
    # program's own two driver calls are events of their own
    assert names.count("cuMemAlloc_v2") == 1 and names.count("cuMemFree_v2") == 1
    assert names.count("cudaMalloc") == 2
    # cuMemMap/cuMemUnmap stay plain driver events with no memory args
    for n in ("cuMemMap", "cuMemUnmap"):
        (m,) = [c for c in calls if c["name"] == n]
        assert "bytes" not in m["args"]
    mem = tputil.events(t, ph="i", name="[memory]")
    assert len(mem) == 14
    create = [c for c in calls if c["name"] == "cuMemCreate"][0]
    assert create["args"]["addr"] == a["V"] and create["args"]["bytes"] == 2 * MIB


def test_counter_tracks():
    r, a = _run()
    t = tputil.load_trace(r.traces[0])
    tracks = {}
    for c in tputil.events(t, ph="C"):
        if "bytes" in c["args"]:
            tracks.setdefault(c["name"], []).append((c["ts"], c["args"]["bytes"]))
    assert set(tracks) == {"GPU 0 memory reserved", "GPU 0 managed memory", "Host pinned memory"}
    gpu = tracks["GPU 0 memory reserved"]
    # starts at the level held when the window began, ends where it ended
    assert gpu[0][1] == 3 * MIB
    assert gpu[-1][1] == 3 * MIB - MIB + 512 * 4 + 512 * 4 * 2
    assert max(v for _, v in gpu) == 2 * MIB + 4096 + 512 * 4 + 512 * 4 * 2 + 2 * MIB  # C live, V created
    assert [ts for ts, _ in gpu] == sorted(ts for ts, _ in gpu)
    assert tracks["Host pinned memory"][0][1] == 4096
    assert max(v for _, v in tracks["Host pinned memory"]) == 4096 + 16384
    assert tracks["GPU 0 managed memory"][-1][1] == 8192
    # every [memory] instant has a counter point of the same value and time
    points = {(ts, v) for vals in tracks.values() for ts, v in vals}
    for e in tputil.events(t, ph="i", name="[memory]"):
        assert (e["ts"], e["args"]["Total Reserved"]) in points, e


def test_profile_memory_off():
    r, a = _run({"TRAINPROF_PROFILE_MEMORY": "0"})
    t = tputil.load_trace(r.traces[0])
    assert not tputil.events(t, ph="i", name="[memory]")
    assert not [c for c in tputil.events(t, ph="C") if "bytes" in c["args"]]
    # the API events keep address and size
    (m,) = [c for c in _calls(t) if c["name"] == "cudaMallocManaged"]
    assert m["args"]["addr"] == a["M"] and m["args"]["bytes"] == 8192


def test_pointer_device_and_without_driver_forwarding():
    # the driver says every pointer is on device 1: device-memory tracks
    # follow cuPointerGetAttribute, host-pinned memory stays device -1, and
    # VMM memory follows its properties' location (device 0)
    r, a = _run({"FAKE_CUDA_POINTER_DEVICE": "1", "FAKE_CUDART_VIA_DRIVER": "0"})
    t = tputil.load_trace(r.traces[0])
    mem = tputil.events(t, ph="i", name="[memory]")
    by_addr = {}
    for e in mem:
        by_addr.setdefault(e["args"]["Addr"], set()).add((e["args"]["Device Type"], e["args"]["Device Id"]))
    assert by_addr[a["V"]] == {(1, 0)}
    assert by_addr[a["H2"]] == {(0, -1)}
    for k in ("A", "C", "M", "P", "Q", "S", "D"):
        assert by_addr[a[k]] == {(1, 1)}, k
    gpu1 = [c for c in tputil.events(t, ph="C", name="GPU 1 memory reserved")]
    assert gpu1[0]["args"]["bytes"] == 3 * MIB
    gpu0 = [c["args"]["bytes"] for c in tputil.events(t, ph="C", name="GPU 0 memory reserved")]
    # a track that begins in the window begins at 0
    assert gpu0[0] == 0 and max(gpu0) == 2 * MIB and gpu0[-1] == 0


def test_totals_carry_across_windows():
    # windows at steps 1 and 3: what step 2 (not recorded) allocates and
    # frees sets the level window 2 starts from
    r, a = _run({"TRAINPROF_SCHEDULE": "wait=0,warmup=1,active=1,repeat=2"})
    assert len(r.traces) == 2, r.stderr
    first, second = (tputil.load_trace(p) for p in r.traces)

    def level(t, name):
        return [c["args"]["bytes"] for c in tputil.events(t, ph="C", name=name)]

    g1 = level(first, "GPU 0 memory reserved")
    assert g1 == [MIB, 3 * MIB, 3 * MIB]          # start (A), cudaMalloc B, end
    after_step2 = 3 * MIB + 4096 - MIB + 512 * 4 + 512 * 4 * 2
    g2 = level(second, "GPU 0 memory reserved")
    assert g2[0] == after_step2 and g2[-1] == after_step2 - 4096
    assert level(second, "Host pinned memory")[0] == 4096 + 16384
    assert level(second, "GPU 0 managed memory")[0] == 8192
    # the frees in window 2 of memory allocated outside it know their sizes
    mem = tputil.events(second, ph="i", name="[memory]")
    freed_c = [e for e in mem if e["args"]["Addr"] == a["C"]]
    assert [e["args"]["Bytes"] for e in freed_c] == [-4096]


# ---- the lean path between windows (tests/programs/mem_lean.c) -------------

import pytest


@pytest.mark.parametrize("via_driver", ["0", "1"])
def test_lean_path_and_windows_see_each_others_blocks(via_driver):
    """Blocks that cross a window's edge: X and D allocated between windows
    (the wrappers' lean path), X freed in window 1 (the recording path) with
    its size and owner; Y allocated in window 1 and freed between windows
    with D, gone when window 2 starts; Z and W allocated between windows, Z
    freed in window 2 with its size; W held at exit.  A lean path that lost
    an allocation makes X's free unknown (0 bytes) and window 1 start low; one
    that lost a free makes window 2 start high (and the exit line wrong).
    FAKE_CUDART_VIA_DRIVER=1: each cudaMalloc reaches cuMemAlloc_v2 inside
    it, which must not count twice."""
    env = {"TRAINPROF_SCHEDULE": "wait=1,warmup=0,active=1,repeat=2", "TRAINPROF_ACTIVITIES": "cpu",
           "FAKE_CUDART_VIA_DRIVER": via_driver}
    plain = tputil.run("mem_lean", preload=False, env=env)
    r = tputil.run("mem_lean", env=env)
    assert r.rc == 0 and r.stdout == plain.stdout, r.stderr
    a = {m.group(1).decode(): int(m.group(2), 16) for m in re.finditer(rb"addr (\w+) 0x([0-9a-f]+)", r.stderr)}
    assert len(r.traces) == 2, r.stderr
    w1, w2 = (tputil.load_trace(p) for p in r.traces)

    def level(t, name="GPU 0 memory reserved"):
        return [c["args"]["bytes"] for c in tputil.events(t, ph="C", name=name)]

    def mem(t):
        return {e["args"]["Addr"]: e["args"] for e in tputil.events(t, ph="i", name="[memory]")}

    kib = 1024
    assert level(w1)[0] == MIB + 64 * kib, level(w1)
    m1 = mem(w1)
    assert set(m1) == {a["X"], a["Y"]}, m1
    assert m1[a["X"]]["Bytes"] == -MIB and m1[a["Y"]]["Bytes"] == 2 * MIB, m1
    # X's owner is the program, from the call site the lean path kept
    assert m1[a["X"]]["Owner"] == "mem_lean" and m1[a["X"]]["Site"].endswith("(mem_lean)"), m1
    assert level(w2)[0] == 12 * MIB and level(w2)[-1] == 8 * MIB, level(w2)
    assert [c["args"] for c in tputil.events(w2, ph="C", name="GPU 0 memory by owner")][0] == {"mem_lean": 12 * MIB}
    m2 = mem(w2)
    assert set(m2) == {a["Z"]} and m2[a["Z"]]["Bytes"] == -4 * MIB, m2
    held = [ln for ln in r.stderr.decode().splitlines() if "memory held at exit" in ln]
    assert len(held) == 1 and "GPU 0: mem_lean 8.00 MiB (1 block)" in held[0], held
    r = tputil.run("mem_lean", ["--free-w"], env=env)
    assert r.rc == 0 and b"memory held at exit" not in r.stderr, r.stderr
