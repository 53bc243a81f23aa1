"""The device side through CUPTI, against the fake libcupti in tests/fakes
(found beside the fake runtime, as a real one is found beside libcudart).
The fake turns what the fake runtime and driver "run" into real CUPTI
records delivered from its own thread; these tests check what reaches the
trace: kernel/memcpy/memset/sync events on pid = device, tid = stream,
linked to the launches by CUPTI's correlation id with ac2g flows, the
coverage metadata, and CUPTI's lifecycle (README "What is in a trace")."""

import os
import re
import subprocess
import sys

import pytest

import tputil

SCHEDULE = "wait=1,warmup=1,active=3"
STEPS = 7
LAUNCHES = 3            # cudaLaunchKernel per step; train_loop adds one __cudaLaunchKernel


def fake_cupti():
    return os.path.join(tputil.build_dir(), "fakes", "libcupti.so")


pytestmark = pytest.mark.skipif(not os.path.exists(fake_cupti()), reason="fake libcupti not built")


# The fake CUPTI as each row of collector/device/cupti_decode.c's layout table:
# CUDA 12.4 (API version 22), 12.6 (24), 12.8 (26), 13.0 U1 (130001) and
# 13.1 U1 (130101): records in that release's structs and sizes, and only
# the entry points it has (no cuptiSubscribe_v2 before 13.0).
VERSIONS = ["22", "24", "26", "130001", "130101"]
per_version = pytest.mark.parametrize("cupti_version", VERSIONS)


def run_loop(env=None, steps=STEPS, schedule=SCHEDULE, cupti_version=None, **kw):
    # steps of 5 ms, so that tp-flush has enabled CUPTI during the warmup step
    # (it does so off the training thread)
    e = {"TRAINPROF_SCHEDULE": schedule, "TRAIN_LAUNCHES": LAUNCHES, "TRAIN_SLEEP_US": 5000}
    if cupti_version:
        e["FAKE_CUPTI_VERSION"] = cupti_version
    e.update(env or {})
    return tputil.run("train_loop", ["--steps=%d" % steps], env=e, **kw)


def one_trace(res):
    assert res.rc == 0, res.stderr
    assert len(res.traces) == 1, (res.traces, res.stderr)
    return tputil.load_trace(res.traces[0])


def host_calls(trace):
    return [e for e in tputil.events(trace, ph="X")
            if e.get("cat") in ("cuda_runtime", "cuda_driver")]


@per_version
def test_kernels_linked_to_launches(cupti_version):
    res = run_loop(cupti_version=cupti_version)
    t = one_trace(res)
    kernels = tputil.events(t, ph="X", cat="kernel")
    launches = [e for e in host_calls(t) if "kernel" in e["args"]]
    assert len(launches) == 3 * (LAUNCHES + 1)
    assert len(kernels) == len(launches)
    by_corr = {e["args"]["correlation"]: e for e in host_calls(t)}
    for k in kernels:
        a = k["args"]
        assert k["pid"] == a["device"] == 0
        assert k["tid"] == a["stream"] and a["stream"] >= 0
        launch = by_corr[a["correlation"]]
        assert launch["args"]["kernel"] == k["name"]
        assert k["ts"] >= launch["ts"]
        assert a["grid"] == launch["args"]["grid"] and a["block"] == launch["args"]["block"]
        for key in ("registers per thread", "shared memory", "blocks per SM", "warps per SM",
                    "est. achieved occupancy %", "queued", "context"):
            assert isinstance(a[key], (int, float)), key
    # one ac2g pair per linked launch, at the exact ts of both ends
    starts = {e["id"]: e for e in tputil.events(t, ph="s", cat="ac2g")}
    ends = {e["id"]: e for e in tputil.events(t, ph="f", cat="ac2g")}
    assert set(starts) == set(ends) >= {k["args"]["correlation"] for k in kernels}
    for k in kernels:
        c = k["args"]["correlation"]
        assert ends[c]["ts"] == k["ts"] and ends[c]["bp"] == "e"
        assert starts[c]["ts"] == by_corr[c]["ts"] and starts[c]["tid"] == by_corr[c]["tid"]
    # no CPU event carries "stream" (HTA's CPU/GPU test)
    assert not [e for e in host_calls(t) if "stream" in e.get("args", {})]
    cov = t["trainprof"]["coverage"]
    assert cov["kernels_seen_by_cupti"] == len(kernels)
    assert cov["kernels_linked_to_launches"] == len(kernels)
    assert cov["launches_seen_by_wrappers"] == len(launches)
    assert cov["ratio"] == 1.0
    assert t["trainprof"]["gpu_activity"].startswith("active")


def test_every_launch_linked_under_load():
    """The linking miss: under load, launches at the start of a window
    kept our own id (2^32 + n) and their kernels stayed unlinked (coverage
    0.75, 0.92).  The cause was not the join's time test but CUPTI being
    turned on by tp-flush after the window had begun: a warmup step shorter
    than tp-flush's reaction, or no warmup at all, left the first calls
    without CUPTI records.  The step that turns the schedule on now waits,
    bounded, for tp-flush to start CUPTI.  50 runs (CUPTI versions in turn,
    with and without a warmup step) beside one busy process per core."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]
    bad = []
    try:
        for i in range(50):
            schedule = "wait=1,warmup=%d,active=3" % (i % 2)
            t = one_trace(run_loop(cupti_version=VERSIONS[i % len(VERSIONS)], schedule=schedule))
            cov = t["trainprof"]["coverage"]
            own = [e["name"] for e in host_calls(t) if e["args"].get("correlation", 0) >= 1 << 32]
            if cov["ratio"] != 1.0 or cov["kernels_seen_by_cupti"] != 3 * (LAUNCHES + 1) or own:
                bad.append((i, schedule, cov, own))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert not bad, bad


@per_version
def test_copies_sets_syncs_on_the_device(cupti_version):
    t = one_trace(run_loop(cupti_version=cupti_version))
    copies = tputil.events(t, ph="X", cat="gpu_memcpy")
    sets = tputil.events(t, ph="X", cat="gpu_memset")
    syncs = tputil.events(t, ph="X", cat="cuda_sync")
    assert {c["name"].split(" (")[0] for c in copies} == {"Memcpy HtoD", "Memcpy DtoH"}
    assert all(c["args"]["bytes"] > 0 and c["args"]["memory bandwidth (GB/s)"] >= 0 for c in copies)
    assert len(copies) == 2 * 3 and len(sets) == 3
    assert sets[0]["name"].startswith("Memset (")
    assert syncs, "no cuda_sync event"
    kinds = {"Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync"}
    assert all(s["args"]["cuda_sync_kind"] == s["name"] and s["name"] in kinds for s in syncs)
    by_corr = {e["args"]["correlation"]: e for e in host_calls(t)}
    for e in copies + sets:
        assert by_corr[e["args"]["correlation"]]["name"].startswith(("cudaMemcpy", "cudaMemset"))


@per_version
def test_event_syncs_carry_wait_on(cupti_version):
    """Syncs on a CUDA event carry Kineto's wait_on_stream,
    wait_on_cuda_event_record_corr_id and wait_on_cuda_event_id (HTA's
    critical path reads them): the stream and correlation of the last
    cudaEventRecord of that event before the sync, as the fake CUPTI logged
    its CUDA_EVENT records.  train_loop --events waits on the stream's event
    from the side stream, records it again on the side stream and
    synchronizes on it; each step first waits on an event recorded at the
    end of the step before, so the first active step waits on a record of
    the warmup (two warmup steps: CUPTI is on by the second, tp-flush turns
    it on during the first).  Other syncs carry none of the three."""
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    res = run_loop(cupti_version=cupti_version, env={"FAKE_CUPTI_LOG": log, "TRAIN_EVENTS": 1},
                   schedule="wait=1,warmup=2,active=3", steps=8, cwd=d)
    t = one_trace(res)
    records = {}                        # event id -> [(correlation, stream)] in order
    with open(log) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "cuda_event":
                records.setdefault(int(w[1]), []).append((int(w[3]), int(w[2])))
    assert len(records) == 2, records

    syncs = tputil.events(t, ph="X", cat="cuda_sync")
    waits = [s for s in syncs if s["name"] == "Stream Wait Event"]
    event_syncs = [s for s in syncs if s["name"] == "Event Sync"]
    others = [s for s in syncs if s["name"] not in ("Stream Wait Event", "Event Sync")]
    active = 3
    assert len(waits) == 2 * active and len(event_syncs) == active, [s["name"] for s in syncs]
    assert others
    keys = ("wait_on_stream", "wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_id")
    for s in others:
        assert not set(keys) & set(s["args"]), s
    main = {k["tid"] for k in tputil.events(t, ph="X", cat="kernel")}
    assert len(main) == 1
    main = main.pop()
    side = {s["args"]["stream"] for s in waits}
    assert len(side) == 1 and side != {main}
    side = side.pop()
    for s in waits + event_syncs:
        a = s["args"]
        before = [r for r in records[a["wait_on_cuda_event_id"]] if r[0] < a["correlation"]]
        corr, stream = max(before) if before else (-1, -1)
        assert corr != -1, s
        assert a["wait_on_cuda_event_record_corr_id"] == corr, s
        assert a["wait_on_stream"] == stream, s
        # what train_loop did: waits are on records made on the kernels'
        # stream, the event sync on the record made on the side stream
        assert stream == (main if s in waits else side), s
    # a wait of the first active step names a record of the warmup step,
    # older than every call of the window
    host = [e["args"]["correlation"] for e in host_calls(t)]
    assert min(s["args"]["wait_on_cuda_event_record_corr_id"] for s in waits) < min(host)
    # the records are no trace events of their own, and coverage is unchanged
    assert not [e for e in tputil.events(t) if "cuda_event" in e.get("cat", "").lower()]
    assert t["trainprof"]["coverage"]["ratio"] == 1.0


def test_device_tracks_named():
    t = one_trace(run_loop())
    meta = tputil.events(t, ph="M")
    labels = [m for m in meta if m["name"] == "process_labels" and m["pid"] == 0]
    assert labels and labels[0]["args"]["labels"] == "GPU 0"
    streams = {k["tid"] for k in tputil.events(t, ph="X", cat="kernel")}
    named = {m["tid"] for m in meta if m["name"] == "thread_name" and m["pid"] == 0}
    assert streams <= named


def test_summary_reports_gpu_time_and_coverage():
    res = run_loop()
    one_trace(res)
    reports = os.path.join(res.cwd, "test", "reports")
    (name,) = [f for f in os.listdir(reports) if f.endswith(".summary.txt")]
    text = open(os.path.join(reports, name)).read()
    assert "GPU activity: active" in text
    assert "GPU busy share of the steps:" in text
    assert "Coverage: %d kernels seen by CUPTI, %d linked" % (3 * (LAUNCHES + 1), 3 * (LAUNCHES + 1)) in text


def lifecycle(log):
    with open(log) as f:
        return [line.split()[0] for line in f if line.strip()]


@per_version
def test_lifecycle_subscribe_at_warmup_finalize_after_last_window(cupti_version):
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    # 30 steps (150 ms) after the window: time for tp-flush's teardown on a
    # loaded machine (it finalizes from the next CUDA call's exit callback;
    # a program that exits first is not finalized, which is right then)
    res = run_loop(env={"FAKE_CUPTI_LOG": log}, schedule="wait=3,warmup=1,active=2", steps=36, cwd=d,
                   cupti_version=cupti_version)
    one_trace(res)
    calls = lifecycle(log)
    assert calls.count("subscribe") == 1
    assert "enable" in calls and calls.index("subscribe") < calls.index("enable")
    # after the last window: flushed, disabled, then cuptiFinalize alone
    # (it drops the subscriber; unsubscribing from inside the callback
    # corrupted the real CUPTI's heap), since a CUDA >= 12.6 driver is
    # loaded (the fake runtime loads the fake driver, 13.0, as the real
    # runtime loads libcuda)
    assert calls[-1] == "finalize" and "unsubscribe" not in calls, calls
    assert calls.index("disable") > max(i for i, c in enumerate(calls) if c == "enable")


def test_exit_right_after_the_last_window_leaves_cupti_to_the_runtime():
    """A program that exits a few milliseconds after its last window: the
    runtime's exit handler destroys the contexts while tp-flush is still
    disabling CUPTI's kinds (an H100 with CUPTI 13.0 crashed inside
    cuptiActivityDisable there; the fake aborts).  Ours runs before the
    runtime's, waits for the disabling under way, and nothing reaching the
    driver starts after it: the exit status and stdout are the program's,
    and the window is whole."""
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    env = {"FAKE_CUPTI_DISABLE_MS": "300", "FAKE_CUPTI_LOG": log}
    for _ in range(2):
        res = run_loop(env=env, schedule="wait=1,warmup=1,active=2", steps=20, cwd=d)
        plain = run_loop(env=env, schedule="wait=1,warmup=1,active=2", steps=20, preload=False)
        assert b"fake-cupti:" not in res.stderr, res.stderr
        assert res.rc == plain.rc == 0 and res.stdout == plain.stdout, res.stderr
        t = tputil.load_trace(res.traces[-1])
        assert len(tputil.events(t, ph="X", cat="kernel")) == 2 * (LAUNCHES + 1)
    # the disabling was under way when the program exited (else this test
    # tests nothing): no finalize followed it
    calls = lifecycle(log)
    assert "disable" in calls and "finalize" not in calls, calls


def test_lifecycle_windows_toggle_kinds():
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    res = run_loop(env={"FAKE_CUPTI_LOG": log}, schedule="wait=2,warmup=1,active=1,repeat=2",
                   steps=12, cwd=d)
    assert res.rc == 0 and len(res.traces) == 2, res.stderr
    calls = lifecycle(log)
    assert calls.count("subscribe") == 1
    assert "disable" in calls
    for p in res.traces:
        t = tputil.load_trace(p)
        assert len(tputil.events(t, ph="X", cat="kernel")) == LAUNCHES + 1


def test_other_subscriber_means_host_only():
    res = run_loop(env={"FAKE_CUPTI_BUSY": "1"})
    t = one_trace(res)
    lines = [l for l in res.stderr.decode().splitlines() if "CUPTI" in l]
    assert len(lines) == 1 and lines[0].startswith("trainprof:"), res.stderr
    assert not tputil.events(t, ph="X", cat="kernel")
    assert len([e for e in host_calls(t) if "kernel" in e["args"]]) == 3 * (LAUNCHES + 1)
    assert t["trainprof"]["coverage"]["ratio"] is None


def test_subscribe_error_is_not_blamed_on_another_tool():
    """A subscribe that fails for another reason (the real CUPTI answers 999,
    CUPTI_ERROR_UNKNOWN, where the driver cannot serve it) says so, names no
    other tool, and the run goes on host-side only."""
    res = run_loop(env={"FAKE_CUPTI_SUBSCRIBE_ERROR": "999"})
    t = one_trace(res)
    lines = [l for l in res.stderr.decode().splitlines() if "CUPTI" in l]
    assert len(lines) == 1 and lines[0].startswith("trainprof:"), res.stderr
    assert "another tool" not in lines[0] and "CUPTI_ERROR_UNKNOWN" in lines[0], lines
    assert "another tool" not in t["trainprof"]["gpu_activity"]
    assert "cuptiSubscribe failed (CUPTI_ERROR_UNKNOWN)" in t["trainprof"]["gpu_activity"]
    assert not tputil.events(t, ph="X", cat="kernel")


def test_refused_timestamp_callback_measures_the_offset():
    """CUPTI may refuse our timestamp callback (cupti_activity.h: NOT_INITIALIZED):
    its records then carry its own clock (CLOCK_REALTIME), which is moved onto
    ours by an offset measured (cuptiGetTimestamp) before each collection of its records.
    Ours is anchored to CLOCK_REALTIME at activation, so the offset is what
    NTP moved it since: 3 s here.  Every kernel is linked and lies after its
    launch, as with the callback; without the offset none is linked.
    Without cuptiGetTimestamp either, the warning says the times may be off."""
    res = run_loop(env={"FAKE_CUPTI_TS_REFUSED": "1", "FAKE_CUPTI_CLOCK_STEP_MS": "3000"})
    t = one_trace(res)
    lines = [l for l in res.stderr.decode().splitlines() if "timestamp" in l]
    assert len(lines) == 1 and "CUPTI_ERROR_NOT_INITIALIZED" in lines[0], res.stderr
    assert "offset measured" in lines[0]
    assert t["trainprof"]["gpu_activity"].startswith("active"), t["trainprof"]["gpu_activity"]
    kernels = tputil.events(t, ph="X", cat="kernel")
    by_corr = {e["args"]["correlation"]: e for e in host_calls(t)}
    assert len(kernels) == 3 * (LAUNCHES + 1)
    for k in kernels:
        launch = by_corr[k["args"]["correlation"]]
        assert launch["ts"] <= k["ts"] < launch["ts"] + 1e6, (launch, k)   # within a second
    assert t["trainprof"]["coverage"]["ratio"] == 1.0

    res = run_loop(env={"FAKE_CUPTI_TS_REFUSED": "2"})
    assert "device times may be off" in res.stderr.decode()
    assert res.rc == 0


def test_activities_cpu_never_loads_cupti():
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    t = one_trace(run_loop(env={"FAKE_CUPTI_LOG": log, "TRAINPROF_ACTIVITIES": "cpu"}, cwd=d))
    assert not os.path.exists(log)
    assert not tputil.events(t, ph="X", cat="kernel")


def test_late_device_records_are_waited_for():
    res = run_loop(env={"FAKE_CUPTI_DELAY_MS": "300"}, steps=STEPS)
    t = one_trace(res)
    assert t["trainprof"]["coverage"]["ratio"] == 1.0
    assert len(tputil.events(t, ph="X", cat="kernel")) == 3 * (LAUNCHES + 1)


def test_window_at_exit_is_flushed():
    # TRAINPROF_SCHEDULE=all records from the first call while tp-flush is
    # still enabling CUPTI: the first step may be missed, not the later ones,
    # whose records the exit flush forces out although the fake holds them back
    res = run_loop(env={"FAKE_CUPTI_DELAY_MS": "5000", "TRAIN_SLEEP_US": "50000"}, schedule="all", steps=4)
    t = one_trace(res)
    kernels = tputil.events(t, ph="X", cat="kernel")
    assert len(kernels) >= 3 * (LAUNCHES + 1)
    assert t["trainprof"]["coverage"]["kernels_linked_to_launches"] == len(kernels)


def test_stdout_unchanged():
    a = run_loop()
    b = run_loop(preload=False)
    assert a.rc == b.rc == 0
    assert a.stdout == b.stdout


def test_driver_launches_linked_and_device_properties():
    """A program that reaches the fake driver only through cuGetProcAddress
    (as static cudart does): its driver launches link to CUPTI's kernels,
    deviceProperties come from the driver, and with a driver loaded CUPTI
    is finalised after the last window."""
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    res = tputil.run("driver_calls", env={
        "DRIVER_STEPS": 34, "DRIVER_SLEEP_US": 5000, "FAKE_CUPTI_LOG": log,   # 30 after the window
        "TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2"}, cwd=d)
    t = one_trace(res)
    props = t["deviceProperties"]
    assert len(props) == 1 and props[0]["name"] == "Fake H100" and props[0]["numSms"] == 132
    kernels = tputil.events(t, ph="X", cat="kernel")
    assert kernels
    by_corr = {e["args"]["correlation"]: e for e in host_calls(t)}
    for k in kernels:
        launch = by_corr[k["args"]["correlation"]]
        assert launch["cat"] == "cuda_driver" and launch["name"].startswith("cuLaunchKernel")
        assert launch["args"]["kernel"] == k["name"]
        assert 0 <= k["args"]["est. achieved occupancy %"] <= 100
        assert k["args"]["blocks per SM"] > 0
    cov = t["trainprof"]["coverage"]
    assert cov["ratio"] == 1.0 and cov["kernels_seen_by_cupti"] == len(kernels)
    calls = lifecycle(log)
    assert calls[-1] == "finalize" and "unsubscribe" not in calls, calls


@per_version
def test_library_call_external_id_reaches_its_kernel(cupti_version):
    """cublasSgemm_v2 of the fake cuBLAS launches a kernel through the
    runtime: CUPTI's external correlation (the id our cuBLAS wrapper pushed)
    gives the kernel and the launch the cpu_op's External id (Kineto's
    op -> runtime -> kernel links)."""
    res = tputil.run("gemm_calls", env={
        "GEMM_STEPS": 5, "GEMM_SLEEP_US": 5000, "TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2",
        "FAKE_CUPTI_VERSION": cupti_version})
    t = one_trace(res)
    ops = [e for e in tputil.events(t, ph="X", cat="cpu_op") if e["name"] == "cublasSgemm_v2"]
    assert len(ops) == 2
    ids = {e["args"]["External id"] for e in ops}
    assert len(ids) == 2
    kernels = tputil.events(t, ph="X", cat="kernel")
    assert len(kernels) == 2
    assert {k["args"]["External id"] for k in kernels} == ids
    launches = tputil.events(t, ph="X", cat="cuda_runtime", name="cudaLaunchKernel")
    assert {l["args"]["External id"] for l in launches} == ids
    # other cpu_ops have ids of their own, which no kernel carries
    others = [e for e in tputil.events(t, ph="X", cat="cpu_op") if e["name"] != "cublasSgemm_v2"]
    assert others and not ids & {e["args"]["External id"] for e in others}


def test_cupti_13_0_ga_keeps_kinds_on_between_windows():
    """On CUPTI 13.0 GA disabling CONCURRENT_KERNEL mid-run may deadlock
    (fixed in 13.0 Update 1): kinds are enabled once, records between windows are
    dropped, and each window still gets exactly its own kernels."""
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    res = run_loop(env={"FAKE_CUPTI_LOG": log, "FAKE_CUPTI_VERSION": "130000"},
                   schedule="wait=2,warmup=1,active=1,repeat=2", steps=12, cwd=d)
    assert res.rc == 0 and len(res.traces) == 2, res.stderr
    calls = lifecycle(log)
    first_disable = calls.index("disable") if "disable" in calls else len(calls)
    assert "enable" not in calls[first_disable:], calls
    for p in res.traces:
        t = tputil.load_trace(p)
        assert len(tputil.events(t, ph="X", cat="kernel")) == LAUNCHES + 1
        assert t["trainprof"]["coverage"]["ratio"] == 1.0


# ---- the CUPTI gate: a driver and a context, or no CUPTI ---------------------

GATE_PROG = r"""
import ctypes, sys, time
stage = sys.argv[1]
drv = None
if stage != "none":
    drv = ctypes.CDLL(sys.argv[2])                     # the fake driver, RTLD_LOCAL
if stage in ("init", "context"):
    assert drv.cuInit(0) == 0
if stage == "context":
    ctx = ctypes.c_void_p()
    assert drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
step = ctypes.CDLL(None).trainprof_step
for _ in range(6):
    time.sleep(0.03)                                   # tp-flush acts between steps
    step()
"""


@pytest.mark.parametrize("stage,subscribed", [
    ("none", "no CUDA driver in this process (libcuda not loaded)"),
    ("loaded", "CUDA driver not initialized (cuInit not called yet)"),
    ("init", "no CUDA context yet (no CUDA call has succeeded)"),
    ("context", True),      # a primary context is active
])
def test_cupti_only_with_driver_and_context(stage, subscribed):
    """A process activated by trainprof_step alone (`trainprof run` on a CPU
    job) loads CUPTI only once the driver is loaded and initialised and a
    context exists: the PyPI wheel's CUPTI recurses to a stack overflow in
    cuptiGetVersion without a driver.  Until then the trace says so."""
    import sys
    d = tputil.new_dir()
    log = os.path.join(d, "cupti.log")
    drv = os.path.join(tputil.build_dir(), "fakes", "libcuda.so.1")
    e = tputil.base_env({"TRAINPROF_CUPTI_PATH": fake_cupti(), "FAKE_CUPTI_LOG": log,
                         "TRAINPROF_SCHEDULE": "warmup=1,active=2", "TRAINPROF_STEP_ON": "api"})
    p = __import__("subprocess").run([sys.executable, "-c", GATE_PROG, stage, drv], cwd=d, env=e,
                                     stdout=-1, stderr=-1, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b""
    t = one_trace(tputil.Result(p.returncode, p.stdout, p.stderr, tputil.find_traces(d)))
    calls = lifecycle(log) if os.path.exists(log) else []
    if subscribed is True:
        assert "subscribe" in calls, calls
        assert t["trainprof"]["gpu_activity"].startswith("active"), t["trainprof"]
    else:
        assert calls == [], calls
        assert t["trainprof"]["gpu_activity"] == "not started: " + subscribed
        assert b"CUPTI" not in p.stderr


def test_cupti_path_yields_to_a_loaded_cupti():
    """A libcupti already in the process (torch loads its own) is the one
    used: TRAINPROF_CUPTI_PATH naming another file is not loaded beside it
    (two CUPTIs in one process are unsafe), and one line says so; naming
    the loaded file itself says nothing."""
    import shutil
    d = tputil.new_dir()
    other = os.path.join(d, "libcupti-other.so")
    shutil.copy(fake_cupti(), other)
    pre = tputil.preload_value() + " " + fake_cupti()
    res = run_loop(env={"LD_PRELOAD": pre, "TRAINPROF_CUPTI_PATH": other}, cwd=d)
    t = one_trace(res)
    lines = [l for l in res.stderr.decode().splitlines() if "TRAINPROF_CUPTI_PATH" in l]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("trainprof:") and other in lines[0] and "already loaded" in lines[0]
    assert os.path.realpath(fake_cupti()) in lines[0] or fake_cupti() in lines[0], lines
    assert tputil.events(t, ph="X", cat="kernel")       # the loaded one serves
    same = run_loop(env={"LD_PRELOAD": pre, "TRAINPROF_CUPTI_PATH": fake_cupti()})
    assert b"TRAINPROF_CUPTI_PATH" not in same.stderr
    assert tputil.events(one_trace(same), ph="X", cat="kernel")


# ---- another CUPTI client in the process (torch.profiler's Kineto) -----------

FOREIGN_SCHEDULE = "wait=1,warmup=1,active=2,repeat=3"


def reports_text(res):
    reports = os.path.join(res.cwd, "test", "reports")
    return "".join(open(os.path.join(reports, f)).read() for f in sorted(os.listdir(reports))
                   if f.endswith(".txt"))


def foreign_run(how, at, schedule=FOREIGN_SCHEDULE, steps=16):
    # steps of 50 ms: the window before the client's arrival is written
    # (every launch with its kernel) well before it comes, even on a busy
    # machine: its device records are waited for 2 steps (100 ms) after it
    # ends.  At 20 ms, 4 of its 8 kernels were once missing while fuzzers and
    # a build shared the machine's 2 cores.
    res = run_loop(schedule=schedule, steps=steps,
                   env={"TRAIN_FOREIGN": "%d:%s" % (at, how), "TRAIN_SLEEP_US": 50000})
    plain = tputil.run("train_loop", ["--steps=%d" % steps], preload=False,
                       env={"TRAIN_LAUNCHES": LAUNCHES, "TRAIN_FOREIGN": "%d:%s" % (at, how)})
    assert res.rc == 0 and plain.rc == 0, res.stderr
    assert res.stdout == plain.stdout
    by_batch = sorted(res.traces, key=lambda p: int(re.search(r"\.(\d+)\.pt\.trace", p).group(1)))
    return res, [tputil.load_trace(p) for p in by_batch]


def test_client_taking_cupti_mid_run_spoils_no_window():
    """A client that registers its own buffer callbacks after we started (what
    Kineto does at torch.profiler's start, replacing ours) takes CUPTI's
    activity API: the window before keeps its device records, the window it
    happened in and every later one have none and say why, in the trace and
    the summary, and one warning line names the client; the client gets its
    records (we never take them back)."""
    res, traces = foreign_run("kineto", 6)
    assert len(traces) == 3, res.stderr
    first, *later = traces
    assert first["trainprof"]["gpu_activity"].startswith("active")
    assert len(tputil.events(first, ph="X", cat="kernel")) == 2 * (LAUNCHES + 1)
    want = ("lost: another CUPTI client (train_loop) took the activity API "
            "(cuptiActivityRegisterCallbacks) while trainprof recorded")
    for t in later:
        assert t["trainprof"]["gpu_activity"] == want, t["trainprof"]["gpu_activity"]
        assert not tputil.events(t, ph="X", cat="kernel")
        assert len([e for e in host_calls(t) if "kernel" in e["args"]]) == 2 * (LAUNCHES + 1)
    err = res.stderr.decode().splitlines()
    lines = [l for l in err if "CUPTI" in l]
    assert len(lines) == 1 and lines[0].startswith("trainprof: warning:"), err
    assert "train_loop" in lines[0] and "separate run" in lines[0]
    got = [int(l.split()[1]) for l in err if l.startswith("foreign:")]
    assert got and got[0] > 0, err
    assert reports_text(res).count("GPU activity: " + want) == 2


def test_client_with_its_own_clock_is_seen_in_the_times():
    """A client that replaces only CUPTI's timestamp callback, through its own
    handle (so no call of it passes through us), gives itself away: the
    records come timed outside our clock's range, and we write none of them."""
    res, traces = foreign_run("clock", 6)
    assert len(traces) == 3, res.stderr
    assert len(tputil.events(traces[0], ph="X", cat="kernel")) == 2 * (LAUNCHES + 1)
    for t in traces[1:]:
        assert t["trainprof"]["gpu_activity"].startswith("lost: device records came timed "
                                                          "outside this process's clock")
        assert not tputil.events(t, ph="X", cat="kernel")
        assert not tputil.events(t, ph="X", cat="gpu_memcpy")


def test_client_before_us_keeps_cupti():
    """A client that registered its buffer callbacks before our first warmup
    step keeps the activity API, even once it has turned its kinds off
    (its buffers may still be in flight): host-side only, said once."""
    res, traces = foreign_run("kineto", 0, schedule="wait=4,warmup=1,active=2", steps=10)
    assert len(traces) == 1, res.stderr
    t = traces[0]
    assert t["trainprof"]["gpu_activity"] == \
        "unavailable: in use by another CUPTI client in this process (train_loop)"
    assert not tputil.events(t, ph="X", cat="kernel")
    lines = [l for l in res.stderr.decode().splitlines() if "CUPTI" in l]
    assert len(lines) == 1 and "host-side only" in lines[0], lines
