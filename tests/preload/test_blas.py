"""cuBLAS routines that are not matrix products (collector/record/apis/cublas.def,
collector/record/flops/blas.c): every entry point is recorded once per call under its
own name, with the FLOPs computed here from LAPACK Working Note 41's operation
counts for the sizes the program prints, its precision class, its own sizes
(no GEMM "Input Dims"), and for the copies the bytes, direction and stream.
The summary counts their FLOPs in its totals."""

import collections
import pathlib
import re
from fractions import Fraction as F

import tputil

U32 = 2 ** 32 - 1
U64 = 2 ** 64 - 1

LEVEL3 = {"symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm", "trsmBatched"}
# real scalars or results on complex data: counted in real operations
MIXED = {"Csscal": ("C", "rscal"), "Zdscal": ("Z", "rscal"), "Csrot": ("C", "rrot"),
         "Zdrot": ("Z", "rrot"), "Scnrm2": ("C", "nrm2"), "Dznrm2": ("Z", "nrm2"),
         "Scasum": ("C", "asum"), "Dzasum": ("Z", "asum")}
DTYPE = {"S": "Float", "D": "Double", "C": "ComplexFloat", "Z": "ComplexDouble"}
ELEM = {"S": 4, "D": 8, "C": 8, "Z": 16}


def _def_names():
    """cublas.def's entry points that are not GEMMs (test_gemm.py has those)."""
    return [name for name, line in tputil.def_entries("cublas.def").items()
            if not re.search(r"TP_R_GEMM\((one|grouped32|grouped64),", line)]


def _routine(name):
    """(type letter, routine) of an entry point, from its name alone."""
    core = re.sub(r"(_v2)?(_64)?$", "", name[len("cublas"):])
    if core == "DotEx":
        return ("H" if not name.endswith("_64") else "Z"), "dotex"
    if core in MIXED:
        return MIXED[core]
    m = re.match(r"^I([sdcz])(amax|amin)$", core)
    if m:
        return m.group(1).upper(), m.group(2)
    return core[0], core[1:]


def _counts(r, m, n, k, right, cplx):
    """(multiplications, additions, mixed) of one call, LAWN 41 style."""
    mixed = False
    if r in ("dot", "dotc", "dotu", "dotex", "axpy"):
        mu, ad = n, n
    elif r == "scal":
        mu, ad = n, 0
    elif r == "rscal":                     # real alpha x complex: 2 real products
        mu, ad, mixed = 2 * n, 0, True
    elif r == "nrm2":                      # sum of squares of n (2n) reals
        mu, ad, mixed = (2 * n, 2 * n, True) if cplx else (n, n, False)
    elif r == "asum":                      # sum of |Re| + |Im|
        mu, ad, mixed = (0, 2 * n, True) if cplx else (0, n, False)
    elif r in ("amax", "amin", "copy", "swap", "rotg", "rotmg"):
        mu, ad = 0, 0
    elif r == "rot" and cplx:              # c real, s complex: 2 x (2) + 2 x (4 mul, 2 add) + 2 x 2
        mu, ad, mixed = 12 * n, 8 * n, True
    elif r in ("rot", "rotm"):             # rotm: the full 2x2 H, an upper bound
        mu, ad = 4 * n, 2 * n
    elif r == "rrot":                      # real rot on 2n reals
        mu, ad, mixed = 8 * n, 4 * n, True
    elif r in ("gemv", "ger", "gerc", "geru"):
        mu, ad = m * n, m * n
    elif r in ("symv", "hemv"):
        mu, ad = n * n, n * n
    elif r in ("syr", "her"):
        mu = ad = F(n * (n + 1), 2)
    elif r in ("syr2", "her2"):
        mu = ad = n * (n + 1)
    elif r in ("trmv", "trsv"):
        mu, ad = F(n * (n + 1), 2), F(n * (n - 1), 2)
    elif r in ("symm", "hemm"):
        mu = ad = m * n * n if right else m * m * n
    elif r in ("syrk", "herk"):
        mu = ad = F(k * n * (n + 1), 2)
    elif r in ("syr2k", "her2k"):
        mu, ad = k * n * n, k * n * n + n
    elif r in ("trmm", "trsm", "trsmBatched"):
        if right:
            mu, ad = F(m * n * (n + 1), 2), F(m * n * (n - 1), 2)
        else:
            mu, ad = F(n * m * (m + 1), 2), F(n * m * (m - 1), 2)
    elif r == "getrfBatched":              # LAWN 41 xGETRF with m = n
        mu = F(1, 2) * n * n * n - F(1, 6) * n ** 3 + F(1, 2) * n * n - F(1, 2) * n * n + F(2, 3) * n
        ad = F(1, 2) * n * n * n - F(1, 6) * n ** 3 - F(1, 2) * n * n + F(1, 6) * n
    elif r == "getrsBatched":              # k is nrhs
        mu, ad = k * n * n, k * n * (n - 1)
    elif r in ("geqrfBatched", "gelsBatched"):
        if m >= n:
            mu = n * (n * (F(1, 2) - F(n, 3) + m) + m + F(23, 6))
            ad = n * (n * (F(1, 2) - F(n, 3) + m) + F(5, 6))
        else:
            mu = m * (m * (F(-1, 2) - F(m, 3) + n) + 2 * n + F(23, 6))
            ad = m * (m * (F(-1, 2) - F(m, 3) + n) + n + F(5, 6))
        if r == "gelsBatched":             # + xGEQRS: Q^T b and the triangular solve
            mu += k * n * (2 * m - F(n, 2) + F(5, 2))
            ad += k * n * (2 * m - F(n, 2) + F(1, 2))
    else:
        raise AssertionError("no count for " + r)
    return F(mu), F(ad), mixed


def _flops(name, m, n, k, batch, right):
    t, r = _routine(name)
    cplx = t in "CZ"
    mu, ad, mixed = _counts(r, m, n, k, right, cplx)
    f = 6 * mu + 2 * ad if cplx and not mixed else mu + ad
    assert f.denominator == 1, (name, f)
    return min(int(f) * batch, U64)


def _sizes(name, m, n, k):
    """The size args the trace must show, by the routine's own names."""
    r = _routine(name)[1]
    if r in ("rotg", "rotmg"):
        return {}
    if r in ("gemv", "ger", "gerc", "geru", "symm", "hemm", "trmm", "trsm", "trsmBatched",
             "geqrfBatched"):
        return {"m": m, "n": n}
    if r in ("syrk", "herk", "syr2k", "her2k"):
        return {"n": n, "k": k}
    if r == "getrsBatched":
        return {"n": n, "nrhs": k}
    if r == "gelsBatched":
        return {"m": m, "n": n, "nrhs": k}
    return {"n": n}


def _printed(stdout):
    """{name: (m, n, k, batch, right)} of the calls of the last step printed,
    and of cublasCreate_v2/cublasDestroy_v2."""
    out = {}
    for line in stdout.decode().splitlines():
        if line.startswith("step "):
            out = {k: v for k, v in out.items() if k in ("cublasCreate_v2",)}
            continue
        f = line.split()
        assert f[-1] == "ok", line
        out[f[0]] = tuple(int(x) for x in f[1:5]) + (f[5] == "R",)
    return out


def _run(args=(), env=None):
    e = {"TRAINPROF_SCHEDULE": "all", "TRAINPROF_RECORD_SHAPES": "1"}
    e.update(env or {})
    r = tputil.run("blas_calls", args, env=e)
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, (r.traces, r.stderr)
    return r, tputil.load_trace(r.traces[0])


def _precision(name, tf32=False):
    t, r = _routine(name)
    if name == "cublasDotEx":              # CUDA_R_16F data, CUDA_R_32F execution
        return "fp32"
    if t in "DZ":
        return "fp64"
    return "tf32" if tf32 and r in LEVEL3 else "fp32"


def test_every_entry_point_once_with_its_flops_sizes_and_precision():
    plain = tputil.run("blas_calls", preload=False)
    r, trace = _run()
    assert plain.rc == 0 and r.stdout == plain.stdout
    want = _printed(r.stdout)
    assert set(want) == set(_def_names()), set(want) ^ set(_def_names())
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    got = collections.Counter(ev["name"] for ev in ops)
    assert got == collections.Counter(set(want)), (got, want)
    copies = 0
    for ev in ops:
        name, a = ev["name"], ev["args"]
        m, n, k, batch, right = want[name]
        if name in ("cublasCreate_v2", "cublasDestroy_v2"):
            assert set(a) == {"External id"}, a
            continue
        if re.match(r"^cublas(Set|Get)(Matrix|Vector)Async", name):
            copies += 1
            # rows x cols x elemSize; Set: host to device on cudaStreamPerThread (2),
            # Get: device to host on cudaStreamLegacy (1)
            up = name.startswith("cublasSet")
            assert a["bytes"] == m * n * k, (name, a)
            assert a["kind"] == ("HtoD" if up else "DtoH"), (name, a)
            assert a["cuda stream"] == (2 if up else 1), (name, a)
            assert "flops" not in a, a
            continue
        t, rt = _routine(name)
        assert a["flops"] == _flops(name, m, n, k, batch, right), (name, a, want[name])
        assert a["precision"] == _precision(name), (name, a)
        sizes = {key: min(v, U32) for key, v in _sizes(name, m, n, k).items()}
        assert {key: a[key] for key in ("m", "n", "k", "nrhs") if key in a} == sizes, (name, a)
        assert a["batch"] == batch, (name, a)
        assert "Input Dims" not in a and "Input type" not in a, a
        assert a["dtype"] == ("Half" if t == "H" else DTYPE[t]), (name, a)
        if rt in ("copy", "swap"):
            assert a["bytes"] == n * ELEM[t], (name, a)
        else:
            assert "bytes" not in a, (name, a)
    assert copies == 8
    by = {ev["name"]: ev["args"] for ev in ops}
    # a few by hand, independent of the program's printout and of _counts
    s = want["cublasSgemv_v2"]
    assert by["cublasSgemv_v2"]["flops"] == 2 * s[0] * s[1]
    s = want["cublasCaxpy_v2"]
    assert by["cublasCaxpy_v2"]["flops"] == 8 * s[1]
    s = want["cublasCsscal_v2"]
    assert by["cublasCsscal_v2"]["flops"] == 2 * s[1]
    s = want["cublasDgetrfBatched"]
    assert by["cublasDgetrfBatched"]["flops"] == \
        (4 * s[1] ** 3 - 3 * s[1] ** 2 + 5 * s[1]) // 6 * s[3]      # 2/3 n^3 - n^2/2 + 5n/6
    assert by["cublasSaxpy_v2_64"]["n"] == U32 and by["cublasSaxpy_v2_64"]["flops"] > 2 * U32
    # both sides of symm and trsm were called
    assert {want[x][4] for x in want if re.match(r"^cublas.(symm|hemm|trsm)", x)} == {True, False}
    # both branches of geqrf
    assert {want[x][0] < want[x][1] for x in want if "geqrf" in x} == {True, False}


def test_shapes_only_when_asked_and_copy_bytes_always():
    _, trace = _run(env={"TRAINPROF_RECORD_SHAPES": None})
    by = {ev["name"]: ev["args"] for ev in tputil.events(trace, ph="X", cat="cpu_op")}
    assert not {"m", "n", "k", "nrhs", "dtype", "batch"} & set(by["cublasSgelsBatched"])
    assert "flops" in by["cublasSgelsBatched"] and "precision" in by["cublasSgelsBatched"]
    assert by["cublasScopy_v2"]["bytes"] > 0 and by["cublasSetMatrixAsync"]["bytes"] > 0


def test_level3_follows_the_tf32_math_mode():
    r, trace = _run(["tf32"])
    by = {ev["name"]: ev["args"] for ev in tputil.events(trace, ph="X", cat="cpu_op")}
    seen = set()
    for name in _def_names():
        a = by[name]
        if "precision" not in a:
            continue
        assert a["precision"] == _precision(name, tf32=True), (name, a)
        seen.add(a["precision"])
    assert seen == {"fp32", "fp64", "tf32"}


def test_summary_counts_their_flops():
    r, trace = _run()
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    total = sum(ev["args"].get("flops", 0) for ev in ops)
    assert trace["trainprof"]["flops"] == total
    reports = sorted(pathlib.Path(r.cwd, "test", "reports").glob("*.summary.txt"))
    assert len(reports) == 1
    text = reports[0].read_text()
    assert f"Library FLOPs total: {total / 1e9:.3f} GFLOP" in text.splitlines()
    rows = {}
    for line in text.split("Library calls")[1].splitlines():
        cols = line.split()
        if cols and cols[0].startswith("cublas"):
            rows[cols[0]] = cols
    for ev in ops:
        cols = rows[ev["name"]]
        assert cols[1] == "1", cols
        flops = ev["args"].get("flops", 0)
        assert cols[4] == (f"{flops / 1e9:.3f}" if flops else "--"), (ev["name"], cols, flops)
