"""Every entry point of collector/record/apis/cudart.def is intercepted and recorded once
per call, under its own name, with the launch details of each launch form."""

import collections
import re

import tputil


def _def_names():
    return list(tputil.def_entries("cudart.def"))


def test_every_entry_point_recorded_once_per_call():
    plain = tputil.run("all_apis", preload=False)
    r = tputil.run("all_apis", env={"TRAINPROF_SCHEDULE": "all"})
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    calls = collections.Counter(
        re.match(r"^([A-Za-z_0-9]+)\(", line).group(1)
        for line in r.stdout.decode().splitlines() if re.match(r"^[A-Za-z_0-9]+\(", line))
    assert set(calls) == set(_def_names()), set(_def_names()) ^ set(calls)
    assert len(r.traces) == 1
    trace = tputil.load_trace(r.traces[0])
    runtime = tputil.events(trace, ph="X", cat="cuda_runtime")
    got = collections.Counter(ev["name"] for ev in runtime)
    assert got == calls, (got - calls, calls - got)
    corr = [ev["args"]["correlation"] for ev in runtime]
    assert len(set(corr)) == len(corr)
    by_name = collections.defaultdict(list)
    for ev in runtime:
        by_name[ev["name"]].append(ev)

    def one(name):
        assert len(by_name[name]) == 1, name
        return by_name[name][0]["args"]

    for name in ("cudaLaunchKernel", "cudaLaunchKernel_ptsz",
                 "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz"):
        a = one(name)
        assert a["kernel"] == "k_plain(float*)", (name, a)
        assert a["grid"] == [4, 2, 1] and a["block"] == [64, 2, 1], (name, a)
    for name in ("cudaLaunchKernel", "cudaLaunchKernel_ptsz"):
        assert one(name)["shared memory"] == 128
    for name in ("__cudaLaunchKernel", "__cudaLaunchKernel_ptsz"):
        a = one(name)
        assert a["kernel"] == "ns::k_kernel(float*, int)", (name, a)
        assert a["grid"] == [4, 2, 1] and a["block"] == [64, 2, 1]
    for name in ("cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz"):
        a = one(name)
        assert a["kernel"] == "k_cfg()", (name, a)
        assert a["grid"] == [5, 1, 1] and a["block"] == [96, 1, 1]
        assert a["shared memory"] == 1024
    for name, nbytes in (("cudaMemcpy", 4096), ("cudaMemcpy_ptds", 4096),
                         ("cudaMemcpyAsync_ptsz", 2048), ("cudaMemcpy2D", 256),
                         ("cudaMemcpyPeer", 1024), ("cudaMemcpyToSymbolAsync", 32),
                         ("cudaMemset", 4096), ("cudaMemsetAsync_ptsz", 512),
                         ("cudaMemset2DAsync", 256)):
        assert one(name)["bytes"] == nbytes, (name, one(name))
    # copies described by a struct or a batch (all_apis.c's sizes): 3D
    # extents in bytes between pointers, in 4-byte elements into an array
    for name, nbytes in (("cudaMemcpy3D", 128), ("cudaMemcpy3DAsync_ptsz", 128),
                         ("cudaMemcpy3D_ptds", 64), ("cudaMemcpy3DPeer", 128),
                         ("cudaMemcpy3DPeerAsync_ptsz", 128), ("cudaMemcpyBatchAsync", 1536),
                         ("cudaMemcpyBatchAsync_ptsz", 1024), ("cudaMemcpy3DBatchAsync", 64 + 16),
                         ("cudaMemcpy3DBatchAsync_ptsz", 64), ("cudaMemset3D", 128),
                         ("cudaMemset3DAsync_ptsz", 128)):
        assert one(name)["bytes"] == nbytes, (name, one(name))
    assert one("cudaMemcpy3D_ptds")["kind"] == "HtoD" and one("cudaMemcpy3DPeer")["kind"] == "DtoD"
    assert one("cudaMemcpyBatchAsync")["kind"] == "Default"
    # the batches' stream is CUDA 13's argument (the fake runtime is .13)
    stream = one("cudaMemcpy3DAsync")["cuda stream"]
    assert stream != 0
    for name in ("cudaMemcpyBatchAsync", "cudaMemcpy3DBatchAsync_ptsz", "cudaEventRecord",
                 "cudaEventRecordWithFlags_ptsz", "cudaLaunchHostFunc", "cudaStreamAddCallback_ptsz",
                 "cudaStreamQuery"):
        assert one(name)["cuda stream"] == stream, (name, one(name))
    reg = one("cudaHostRegister")
    assert reg["bytes"] == 8192 and one("cudaHostUnregister")["bytes"] == 8192
    assert one("cudaHostUnregister")["addr"] == reg["addr"]
    for ev in runtime:
        assert "stream" not in ev.get("args", {}), ev


def _def_forms():
    """name -> record form (the TP_R_* macro of its .def line)."""
    forms = {}
    for name, line in tputil.def_entries("cudart.def").items():
        m = re.match(r".*(TP_R_[A-Z_0-9]+)", line)
        if m:
            forms[name] = m.group(1)
    return forms


def test_args_follow_the_record_form():
    r = tputil.run("all_apis", env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    trace = tputil.load_trace(r.traces[0])
    forms = _def_forms()
    seen = set()
    for ev in tputil.events(trace, ph="X", cat="cuda_runtime"):
        form, args = forms[ev["name"]], ev["args"]
        seen.add(form)
        if form == "TP_R_COPY":
            assert "bytes" in args and args["kind"] in ("HtoH", "HtoD", "DtoH", "DtoD", "Default"), ev
            assert "cuda stream" in args, ev
        elif form == "TP_R_SET":
            assert "bytes" in args and "kind" not in args and "cuda stream" in args, ev
        elif form in ("TP_R_SYNC", "TP_R_STREAM"):
            assert "cuda stream" in args and "bytes" not in args, ev
        elif form == "TP_R_SYNC_EVENT":
            assert "cuda event" in args and "cuda stream" not in args, ev
        elif form in ("TP_R_ALLOC", "TP_R_ALLOC3D"):
            assert args["bytes"] > 0 and args["addr"] > 0, ev
            assert not {"kind", "cuda stream", "cuda event"} & set(args), ev
        elif form == "TP_R_FREE":
            # the size the address was allocated with (all frees here are of
            # memory this program allocated)
            assert args["addr"] > 0 and args["bytes"] > 0, ev
            assert not {"kind", "cuda stream", "cuda event"} & set(args), ev
        elif form in ("TP_R_NONE", "TP_R_MAP"):
            assert not {"bytes", "kind", "cuda stream", "cuda event"} & set(args), ev
    assert {"TP_R_COPY", "TP_R_SET", "TP_R_SYNC", "TP_R_SYNC_EVENT", "TP_R_STREAM", "TP_R_ALLOC",
            "TP_R_ALLOC3D", "TP_R_FREE", "TP_R_MAP", "TP_R_NONE"} <= seen


def test_runtime_reaching_the_driver_records_one_event_per_call():
    # FAKE_CUDART_LOOKUP=1: the fake runtime's launches (by stub, cudaKernel_t,
    # launch config, cooperative), graph launches and peer copies call the
    # driver functions its cuGetProcAddress lookups returned (our slot
    # wrappers), inside the runtime call, as the real runtime does: one
    # runtime event per call, no driver event
    env = {"FAKE_CUDART_LOOKUP": "1"}
    plain = tputil.run("all_apis", env=env, preload=False)
    r = tputil.run("all_apis", env=dict(env, TRAINPROF_SCHEDULE="all"))
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    calls = collections.Counter(
        re.match(r"^([A-Za-z_0-9]+)\(", line).group(1)
        for line in r.stdout.decode().splitlines() if re.match(r"^[A-Za-z_0-9]+\(", line))
    trace = tputil.load_trace(r.traces[0])
    runtime = collections.Counter(ev["name"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime"))
    assert runtime == calls, (runtime - calls, calls - runtime)
    assert tputil.events(trace, ph="X", cat="cuda_driver") == []
    for ev in tputil.launches(trace):
        assert ev["args"]["kernel"] in ("k_plain(float*)", "ns::k_kernel(float*, int)", "k_cfg()"), ev


def test_batch_copies_of_cuda_12_keep_their_arguments():
    # libcudart.so.12 (12.8, 12.9) takes a size_t *failIdx before the stream
    # (tests/fakes/cudart12.c): the one unversioned wrapper must forward it
    # and record the stream from where that ABI has it
    plain = tputil.run("batch12", preload=False)
    r = tputil.run("batch12", env={"TRAINPROF_SCHEDULE": "all"})
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    assert r.stdout.count(b"rc=0 copied=1 stream intact failIdx intact") == 2, r.stdout
    stream = int(re.search(rb"^stream (\d+)$", r.stderr, re.M).group(1))
    trace = tputil.load_trace(r.traces[0])
    by_name = {ev["name"]: ev["args"] for ev in tputil.events(trace, ph="X", cat="cuda_runtime")}
    assert by_name["cudaMemcpyBatchAsync"]["bytes"] == 256 + 128
    assert by_name["cudaMemcpy3DBatchAsync"]["bytes"] == 64
    for name in ("cudaMemcpyBatchAsync", "cudaMemcpy3DBatchAsync"):
        assert by_name[name]["cuda stream"] == stream, (name, by_name[name])


def test_kernels_of_a_runtime_library_are_named():
    # cudaLibraryGetKernel's cudaKernel_t is launched as cudaLaunchKernel's
    # "func": named from the name it was asked for
    r = tputil.run("library_kernels", env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0, r.stderr
    trace = tputil.load_trace(r.traces[0])
    names = collections.Counter(ev["args"].get("kernel") for ev in tputil.launches(trace))
    assert names == {"k_lib()": 2, "lib::k2(int)": 2}, names
