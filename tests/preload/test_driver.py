"""The driver layer: cuGetProcAddress{,_v2} and dlsym interposition against
the fake libcuda.so.1 (tests/fakes/cuda.c), driven by programs that speak
CUDA 13's lookup protocol (driver_calls) and Triton's dlsym protocol
(triton_like); the dlsym tail jump with a second preloaded tool."""

import collections
import os
import re

import tputil

PER_THREAD_STREAM = 2   # CU_STREAM_PER_THREAD


def _counts(stderr):
    """{variant: calls} from a program's "count NAME N" lines."""
    out = {}
    for line in stderr.decode().splitlines():
        m = re.match(r"^count (\S+) (\d+)$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def _one_trace(r):
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, r.traces
    return tputil.load_trace(r.traces[0])


def _by_name(trace, cat):
    out = collections.defaultdict(list)
    for ev in tputil.events(trace, ph="X", cat=cat):
        out[ev["name"]].append(ev)
    return out


def test_driver_calls_recorded_once_per_call_with_names():
    steps = 4
    env = {"TRAINPROF_SCHEDULE": "all", "DRIVER_STEPS": steps}
    plain = tputil.run("driver_calls", env={"DRIVER_STEPS": steps}, preload=False)
    r = tputil.run("driver_calls", env=env)
    assert plain.rc == 0, plain.stderr
    assert r.stdout == plain.stdout
    made = _counts(r.stderr)
    assert made == _counts(plain.stderr)
    assert made["cuLaunchKernel"] == 6 * steps
    trace = _one_trace(r)
    driver = _by_name(trace, "cuda_driver")
    runtime = _by_name(trace, "cuda_runtime")
    got = {name: len(evs) for name, evs in driver.items()}
    want = {k: v for k, v in made.items() if k.startswith("cu") and not k.startswith("cuda")}
    assert got == want, (got, want)
    assert len(runtime["cudaDeviceSynchronize"]) == made["cudaDeviceSynchronize"]
    for evs in driver.values():
        for ev in evs:
            assert ev["args"]["cbid"] > 0, ev

    def kernels(name):
        return collections.Counter(ev["args"].get("kernel") for ev in driver[name]
                                   if "status" not in ev["args"])

    matmul = "matmul(float*, float*, float*, int)"
    # legacy pointer, the 4-argument lookup's pointer, a per-thread lookup
    # below 7000 (the legacy function), a CUfunction from
    # cuKernelGetFunction, and a kernel only the driver can name
    assert kernels("cuLaunchKernel") == {matmul: 4 * steps, "softmax(float*, int)": steps}
    assert kernels("cuLaunchKernel_ptsz") == {"relu(float*, int)": steps}
    assert kernels("cuLaunchKernelEx") == {matmul: steps}
    assert kernels("cuLaunchKernelEx_ptsz") == {"relu(float*, int)": steps}
    for ev in driver["cuLaunchKernel_ptsz"] + driver["cuLaunchKernelEx_ptsz"]:
        assert ev["args"]["cuda stream"] == PER_THREAD_STREAM, ev
        assert ev["args"]["grid"][0] in (8, 2) and ev["args"]["block"][0] in (256, 64)
    ex = driver["cuLaunchKernelEx"][0]["args"]
    assert ex["grid"] == [2, 2, 1] and ex["block"] == [64, 1, 1] and ex["shared memory"] == 128
    failed = [ev for ev in driver["cuLaunchKernel"] if "status" in ev["args"]]
    assert len(failed) == steps and all(ev["args"]["status"] == 400 for ev in failed)
    for ev in driver["cuGraphLaunch"]:
        assert ev["args"].get("kernel", "") == "" and "grid" not in ev["args"]
    sizes = {name: sorted({ev["args"]["bytes"] for ev in driver[name]})
             for name in ("cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", "cuMemcpyDtoD_v2",
                          "cuMemsetD8_v2", "cuMemAlloc_v2")}
    # cuMemsetD8_v2: 16 bytes through the legacy lookup's internal pointer,
    # 8 through the per-thread lookup at 3020, which the driver answers with
    # that same legacy function (per-thread variants begin at 7000)
    assert sizes == {"cuMemcpyHtoD_v2": [4096], "cuMemcpyHtoD_v2_ptds": [1024],
                     "cuMemcpyDtoD_v2": [2048], "cuMemsetD8_v2": [8, 16], "cuMemAlloc_v2": [4096]}
    kinds = {name: {ev["args"]["kind"] for ev in driver[name]}
             for name in ("cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemcpy")}
    assert kinds == {"cuMemcpyHtoD_v2": {"HtoD"}, "cuMemcpyDtoH_v2": {"DtoH"},
                     "cuMemcpyDtoD_v2": {"DtoD"}, "cuMemcpy": {"Default"}}
    assert {ev["args"]["cuda stream"] for ev in driver["cuStreamSynchronize_ptsz"]} == {PER_THREAD_STREAM}
    corr = [ev["args"]["correlation"] for evs in driver.values() for ev in evs]
    assert len(set(corr)) == len(corr)
    assert tputil.steps(trace)[:steps] == list(range(steps))


def test_lookup_results_pass_through():
    r = tputil.run("driver_calls", env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    out = r.stdout.decode()
    assert "probe: rc=500 status=1 null=1" in out
    assert "unknown: rc=500 status=1 null=1" in out
    assert "too old: rc=500 status=2 null=1" in out
    # the pre-3020 cuMemAlloc ABI is handed out untouched
    assert "cuMemAlloc@2000 is the exported cuMemAlloc: yes" in out
    # the self-lookup gives the same wrapper as dlsym did (same real pointer)
    assert "self lookup 12000 is the dlsym pointer: yes" in out
    assert "launch of NULL: 400" in out
    assert re.search(r"launch pointer in: .*libtrainprof\.so", r.stderr.decode()), r.stderr


def test_disabled_hands_out_real_pointers():
    plain = tputil.run("driver_calls", preload=False)
    for env in ({"TRAINPROF_ENABLED": "0"}, {"TRAINPROF_RANKS": "1", "RANK": "0"}):
        env = dict(env, TRAINPROF_SCHEDULE="all")
        r = tputil.run("driver_calls", env=env)
        assert r.rc == 0, r.stderr
        assert r.stdout == plain.stdout
        assert r.traces == []
        assert re.search(r"launch pointer in: .*libcuda\.so\.1", r.stderr.decode()), (env, r.stderr)


def test_triton_like_launches_recorded():
    steps, per = 5, 3
    env = {"TRITON_STEPS": steps, "TRITON_LAUNCHES": per}
    plain = tputil.run("triton_like", env=env, preload=False)
    r = tputil.run("triton_like", env=dict(env, TRAINPROF_SCHEDULE="all"))
    assert plain.rc == 0 and r.stdout == plain.stdout
    assert b"unknown symbol: NULL" in r.stdout
    driver = _by_name(_one_trace(r), "cuda_driver")
    assert len(driver["cuLaunchKernelEx"]) == steps * per
    assert len(driver["cuLaunchKernel"]) == steps
    assert len(driver["cuCtxSynchronize"]) == steps
    for ev in driver["cuLaunchKernelEx"] + driver["cuLaunchKernel"]:
        assert ev["args"]["kernel"] == "triton_poi_fused_add_0", ev
    assert driver["cuLaunchKernelEx"][0]["args"]["grid"] == [16, 1, 1]


def test_launch_attributes_reach_the_kernel_events():
    """cuLaunchKernelEx's cluster dimension and cooperative attributes, as
    CUPTI's kernel record gives them (clusterX/Y/Z, launchType), are on each
    device kernel event, and on no kernel of a launch without them."""
    cupti = os.path.join(tputil.build_dir(), "fakes", "libcupti.so")
    env = {"TRITON_STEPS": 6, "TRITON_LAUNCHES": 3, "TRITON_SLEEP_US": 20000, "TRAINPROF_CUPTI_PATH": cupti,
           "TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=3"}
    events = _one_trace(tputil.run("triton_like", env=env))["traceEvents"]
    launches = sorted((e for e in events if e.get("cat") == "cuda_driver" and "kernel" in e["args"]),
                      key=lambda e: e["ts"])
    want, first = {}, set()
    for ev in launches:          # per step: Ex cooperative, Ex cluster, Ex cluster, plain
        step = ev["args"]["External id"]
        if ev["name"] == "cuLaunchKernelEx" and step not in first:
            first.add(step)
            want[ev["args"]["correlation"]] = ("cooperative", None)
        elif ev["name"] == "cuLaunchKernelEx":
            want[ev["args"]["correlation"]] = (None, [2, 1, 1])
        else:
            want[ev["args"]["correlation"]] = (None, None)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) >= 8, kernels
    got = {k["args"]["correlation"]: (k["args"].get("launch type"), k["args"].get("cluster")) for k in kernels}
    assert {c: want.get(c) for c in got} == got
    assert sorted(v for v in got.values() if v[1]) and [v for v in got.values() if v[0]]


def test_schedule_counts_driver_steps():
    # windows of the default schedule (warmup 1, active 4) from driver-only steps
    r = tputil.run("triton_like", env={"TRITON_STEPS": 6, "TRAINPROF_SCHEDULE": "warmup=1,active=4"})
    trace = _one_trace(r)
    assert tputil.steps(trace) == [1, 2, 3, 4]
    assert len(_by_name(trace, "cuda_driver")["cuLaunchKernel"]) == 4


def test_call_signal_matches_the_driver_form():
    # call:NAME names the logical call at any layer: cuGraphLaunch is
    # cudaGraphLaunch; cuMemsetD8_v2 (twice a step) and its _ptds form are
    # cudaMemset
    for item, nsteps in (("call:cudaGraphLaunch", 4), ("call:cuGraphLaunch", 4),
                         ("call:cuGraphLaunch_ptsz", 4), ("call:cudaMemset", 12)):
        r = tputil.run("driver_calls", env={"TRAINPROF_SCHEDULE": "all", "DRIVER_STEPS": 4,
                                            "TRAINPROF_STEP_ON": item})
        trace = _one_trace(r)
        assert b"not an intercepted call" not in r.stderr, r.stderr
        assert trace["trainprof"]["step_signal"] == item
        assert tputil.steps(trace) == list(range(nsteps)), (item, tputil.steps(trace))


def _spy_env(extra=None):
    spy = os.path.join(tputil.build_dir(), "fakes", "libdlsym_spy.so")
    env = {"LD_PRELOAD": tputil.preload_value() + " " + spy, "DLSYM_SPY_REPORT": "1",
           "TRAINPROF_SCHEDULE": "all", "DRIVER_STEPS": 3}
    env.update(extra or {})
    return env


def test_second_preload_rtld_next_finds_the_real_function():
    r = tputil.run("driver_calls", env=_spy_env())
    assert r.rc == 0, r.stderr
    err = r.stderr.decode()
    assert "found the spy itself" not in err
    assert "dlsym_spy: cudaDeviceSynchronize calls=3" in err, err
    runtime = _by_name(_one_trace(r), "cuda_runtime")
    assert len(runtime["cudaDeviceSynchronize"]) == 3


def test_driver_call_inside_runtime_call_is_folded():
    # the spy calls cuCtxSynchronize (our exported wrapper) inside
    # cudaDeviceSynchronize, on the same thread: one record per logical call
    r = tputil.run("driver_calls", env=_spy_env({"DLSYM_SPY_DRIVER": "1"}))
    assert r.rc == 0, r.stderr
    trace = _one_trace(r)
    assert len(_by_name(trace, "cuda_runtime")["cudaDeviceSynchronize"]) == 3
    driver = _by_name(trace, "cuda_driver")
    assert "cuCtxSynchronize" not in driver
    assert len(driver["cuCtxSynchronize_v2"]) == 3   # the program's own, outside


def test_no_preload_same_output():
    for prog in ("driver_calls", "triton_like"):
        a = tputil.run(prog, preload=False)
        b = tputil.run(prog, env={"TRAINPROF_SCHEDULE": "warmup=1,active=2"})
        assert a.rc == 0 and b.rc == 0, (prog, b.stderr)
        assert a.stdout == b.stdout


# ---- every entry point of cuda.def (tests/programs/driver_all.c) ------------


def _driver_def():
    """name -> record macro of every TP_DRV_FN line."""
    out = {}
    for name, line in tputil.def_entries("cuda.def").items():
        m = re.search(r"(TP_R_[A-Z_0-9]+)", line)
        if m:
            out[name] = m.group(1)
    return out


def test_every_driver_entry_point_recorded_once_per_call():
    plain = tputil.run("driver_all", preload=False)
    r = tputil.run("driver_all", env={"TRAINPROF_SCHEDULE": "all"})
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    calls = collections.Counter(
        m.group(1) for m in re.finditer(r"^(cu\w+) 0$", r.stdout.decode(), re.M))
    forms = _driver_def()
    assert set(calls) == set(forms), set(calls) ^ set(forms)
    driver = _by_name(_one_trace(r), "cuda_driver")
    got = collections.Counter({name: len(evs) for name, evs in driver.items()})
    assert got == calls, (got - calls, calls - got)

    def one(name):
        assert len(driver[name]) == 1, name
        return driver[name][0]["args"]

    for name, evs in driver.items():
        for ev in evs:
            a, form = ev["args"], forms[name]
            if form == "TP_R_COPY":
                assert a["bytes"] > 0 and "kind" in a and "cuda stream" in a, ev
            elif form == "TP_R_SET":
                assert a["bytes"] > 0 and "kind" not in a and "cuda stream" in a, ev
            elif form in ("TP_R_SYNC", "TP_R_STREAM"):
                assert "cuda stream" in a and "bytes" not in a, ev
    # bytes and kinds of the copies described by a struct, the peer copies
    # and the sets of 16 bits and of 2D rows (driver_all.c's sizes)
    for name in ("cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds", "cuMemcpy2DUnaligned_v2", "cuMemcpy2DAsync_v2_ptsz"):
        assert (one(name)["bytes"], one(name)["kind"]) == (256, "HtoD"), name
    for name in ("cuMemcpy3D_v2", "cuMemcpy3DAsync_v2_ptsz"):
        assert (one(name)["bytes"], one(name)["kind"]) == (128, "DtoH"), name
    for name in ("cuMemcpy3DPeer", "cuMemcpy3DPeerAsync"):
        assert (one(name)["bytes"], one(name)["kind"]) == (128, "DtoD"), name
    assert (one("cuMemcpyPeer")["bytes"], one("cuMemcpyPeer")["kind"]) == (1024, "DtoD")
    assert one("cuMemcpyPeerAsync_ptsz")["cuda stream"] == PER_THREAD_STREAM
    assert one("cuMemsetD16_v2")["bytes"] == 128 and one("cuMemsetD32Async")["bytes"] == 256
    assert [one("cuMemsetD2D%d_v2" % b)["bytes"] for b in (8, 16, 32)] == [64, 128, 256]
    assert one("cuMemsetD2D16Async_ptsz")["cuda stream"] == PER_THREAD_STREAM
    assert one("cuLaunchHostFunc")["cuda stream"] == 0x5a
    assert one("cuLaunchCooperativeKernel_ptsz")["grid"] == [4, 2, 1]
