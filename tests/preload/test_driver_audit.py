"""The driver layer against NVIDIA's own description of it.

cudaTypedefs.h declares one PFN_<request>_v<N>[_ptsz|_ptds] per ABI of every
driver entry point: what ("request", N) a cuGetProcAddress lookup names, and
with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM which per-thread variant.
Our lookup table (collector/record/apis/cuda.def, the hooks of preload/graphs.c and
preload/driver.c) and the fake driver's (tests/fakes/cuda.c) must agree with
it; the behaviour that follows is checked on the fakes: a per-thread lookup
below 7000 gets the legacy function (test_driver.py), a lookup above the
headers' version that returns a pointer nobody can name gets no wrapper, and
a lookup through the runtime (cudaGetDriverEntryPoint*) gets the wrapper a
driver lookup would."""

import collections
import os
import re

import tputil

CUDA_INCLUDE = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")


def _pfn():
    """{(request, version, suffix)} of every PFN typedef NVIDIA declares."""
    out = set()
    for header in ("cudaTypedefs.h", "cudaProfilerTypedefs.h"):
        with open(os.path.join(CUDA_INCLUDE, header)) as f:
            for m in re.finditer(r"\bPFN_(cu\w+?)_v(\d+)(_ptsz|_ptds)?\)", f.read()):
                out.add((m.group(1), int(m.group(2)), m.group(3) or ""))
    return out


def _cuda_version():
    with open(os.path.join(CUDA_INCLUDE, "cuda.h")) as f:
        return int(re.search(r"^#define CUDA_VERSION (\d+)", f.read(), re.M).group(1))


def _suffix(name):
    return name[-5:] if name.endswith(("_ptsz", "_ptds")) else ""


def _ours():
    """[(exported name, request, version)] of every variant we hand out."""
    out = []
    with open(os.path.join(tputil.ROOT, "collector", "record", "apis", "cuda.def")) as f:
        for line in f:
            m = re.match(r"^TP_DRV_FN\(.*?, (\w+), .*, (\w+), (\d+)\)\s*$", line)
            if m:
                out.append((m.group(1), m.group(2), int(m.group(3))))
    for src in ("driver.c", "graphs.c"):
        with open(os.path.join(tputil.ROOT, "preload", src)) as f:
            for m in re.finditer(r'TP_DRV_ENTRY\((\w+), "(\w+)", "(\w+)", (\d+)\)', f.read()):
                assert m.group(1) == m.group(2), m.group(0)
                out.append((m.group(2), m.group(3), int(m.group(4))))
    return out


def test_every_variant_is_one_nvidia_declares():
    pfn = _pfn()
    ours = _ours()
    assert len(ours) > 100
    wrong = [(name, req, ver) for name, req, ver in ours if (req, ver, _suffix(name)) not in pfn]
    assert not wrong, wrong


def test_every_abi_of_a_wrapped_family_is_in_the_table():
    # procaddr.c names a pointer the driver does not export by (request,
    # version, flags): the variant with the highest version <= the lookup's.
    # That is right only if every ABI of the family from our lowest one up to
    # CUDA_VERSION (above it procaddr.c guesses nothing) is in the table.
    pfn = _pfn()
    top = _cuda_version()
    have = collections.defaultdict(set)
    for name, req, ver in _ours():
        have[(req, _suffix(name) != "")].add(ver)
    missing = []
    for (req, pt), vers in have.items():
        for r, v, suf in pfn:
            if r == req and (suf != "") == pt and min(vers) <= v <= top and v not in vers:
                missing.append((req, v, suf))
    assert not missing, missing


def test_the_fake_driver_answers_as_nvidia_declares():
    # every (request, version, per-thread) of the fake's lookup table is a
    # PFN typedef, but for CUDA 13.1's cuLaunchHostFunc_v2 (13010), newer
    # than these headers, which the fake hands out on purpose
    pfn = _pfn()
    with open(os.path.join(tputil.ROOT, "tests", "fakes", "cuda.c")) as f:
        src = f.read()
    rows = re.findall(r'^\s+(S|PT)\("(\w+)", (\d+), (\w+)\),', src, re.M)
    assert len(rows) > 100
    wrong = []
    for kind, req, ver, fn in rows:
        suf = ("_ptds" if fn.endswith("_ptds") else "_ptsz") if kind == "PT" else ""
        if (req, int(ver), suf) not in pfn and (req, ver) != ("cuLaunchHostFunc", "13010"):
            wrong.append((req, ver, fn))
    assert not wrong, wrong


def test_newer_abi_behind_an_unnamed_pointer_gets_no_wrapper():
    # ("cuLaunchHostFunc", 13010) is cuLaunchHostFunc_v2 (a fourth argument,
    # syncMode); the fake hands it out unexported.  Our 3-argument wrapper
    # bound to it would drop syncMode: the real pointer must come back.
    plain = tputil.run("driver_calls", preload=False)
    r = tputil.run("driver_calls", env={"TRAINPROF_SCHEDULE": "all"})
    assert r.rc == 0 and plain.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    err = r.stderr.decode()
    assert re.search(r"cuLaunchHostFunc@13010 pointer in: .*libcuda\.so\.1", err), err
    assert re.search(r"cuLaunchHostFunc@10000 pointer in: .*libtrainprof\.so", err), err
    assert "host functions v2 rc=0 run=6\n" in r.stdout.decode()     # 3 steps, both forms
