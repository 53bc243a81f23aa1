"""Every entry point of preload/cudart.def is intercepted and recorded once
per call, under its own name, with the launch details of each launch form."""

import collections
import os
import re

import tputil

DEF = os.path.join(tputil.ROOT, "preload", "cudart.def")


def _def_names():
    names = []
    with open(DEF) as f:
        for line in f:
            m = re.match(r"^TP_FN\(\s*[^,]+,\s*([A-Za-z_0-9]+)\s*,", line)
            if m:
                names.append(m.group(1))
    return names


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
    for ev in runtime:
        assert "stream" not in ev.get("args", {}), ev
