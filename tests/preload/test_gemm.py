"""cuBLAS and cuBLASLt wrappers (collector/record/apis/cublas.def, cublaslt.def):
every GEMM entry point is recorded once per call as a cpu_op event with the
FLOPs computed here by hand from the shapes the program prints, the
precision class, and the sizes with TRAINPROF_RECORD_SHAPES=1."""

import collections
import re

import tputil


# The data type each call of gemm_calls.c uses decides complex or not.
COMPLEX = re.compile(r"^cublas(C|Z)gemm|^cublasGemmEx_64$")

# Precision class of each call of gemm_calls.c (collector/record/flops/gemm.h), handle math mode
# CUBLAS_DEFAULT_MATH.
PRECISION = {
    "cublasSgemm_v2": "fp32", "cublasDgemm_v2": "fp64", "cublasCgemm_v2": "fp32",
    "cublasZgemm_v2": "fp64", "cublasHgemm": "fp16", "cublasCgemm3m": "fp32",
    "cublasZgemm3m": "fp64",
    "cublasSgemmEx": "fp16",            # Atype CUDA_R_16F
    "cublasSgemmEx_64": "fp32", "cublasCgemmEx": "fp32", "cublasCgemm3mEx": "fp32",
    "cublasGemmEx": "bf16",             # CUDA_R_16BF, CUBLAS_COMPUTE_32F
    "cublasGemmEx_64": "fp32",          # CUDA_C_32F, CUBLAS_COMPUTE_32F
    "cublasSgemmBatched": "fp32", "cublasDgemmBatched": "fp64", "cublasCgemmBatched": "fp32",
    "cublasZgemmBatched": "fp64", "cublasHgemmBatched": "fp16", "cublasCgemm3mBatched": "fp32",
    "cublasGemmBatchedEx": "fp16",      # CUDA_R_16F, CUBLAS_COMPUTE_32F
    "cublasGemmBatchedEx_64": "fp64",   # CUDA_R_64F, CUBLAS_COMPUTE_64F
    "cublasSgemmStridedBatched": "fp32", "cublasDgemmStridedBatched": "fp64",
    "cublasCgemmStridedBatched": "fp32", "cublasZgemmStridedBatched": "fp64",
    "cublasHgemmStridedBatched": "fp16", "cublasCgemm3mStridedBatched": "fp32",
    "cublasGemmStridedBatchedEx": "tf32",     # CUDA_R_32F, COMPUTE_32F_FAST_TF32
    "cublasGemmStridedBatchedEx_64": "bf16",  # CUDA_R_16BF, COMPUTE_32F_FAST_16BF
    "cublasSgemmGroupedBatched": "fp32", "cublasDgemmGroupedBatched": "fp64",
    "cublasGemmGroupedBatchedEx": "fp16",     # CUDA_R_16F, COMPUTE_32F
    "cublasGemmGroupedBatchedEx_64": "fp32",  # CUDA_R_32F, COMPUTE_32F_PEDANTIC
    "cublasLtMatmul": "bf16",                 # A CUDA_R_16BF, COMPUTE_32F
}


def _precision(name):
    return PRECISION.get(name, PRECISION.get(re.sub(r"_64$", "", name)))


def _def_names():
    """The matrix products: cublas.def's lines of the GEMM record forms (one,
    grouped32, grouped64; the other routines are test_blas.py's) and
    cublaslt.def's."""
    return [name for name, line in tputil.def_entries("cublas.def", "cublaslt.def").items()
            if re.search(r"TP_R_GEMM\((one|grouped32|grouped64),|cublasLtMatmul", line)]


def _expected(stdout):
    """{name: (flops, m, n, k, batch)} of the calls of the last step printed."""
    out = {}
    for line in stdout.decode().splitlines():
        if line.startswith("step "):
            out = {}
            continue
        f = line.split()
        if len(f) < 3 or not f[0].startswith("cublas") or f[-1] != "ok":
            continue
        per = 8 if COMPLEX.match(f[0]) else 2
        if f[1] == "G":
            groups = [tuple(int(x) for x in g.split(",")) for g in f[2:4]]
            flops = sum(per * m * n * k * s for m, n, k, s in groups)
            m, n, k, _ = groups[0]
            out[f[0]] = (flops, m, n, k, sum(g[3] for g in groups))
        else:
            m, n, k, b = (int(x) for x in f[1:5])
            out[f[0]] = (per * m * n * k * b, m, n, k, b)
    return out


def _run(args=(), env=None):
    e = {"TRAINPROF_SCHEDULE": "warmup=1,active=1", "TRAINPROF_RECORD_SHAPES": "1"}
    e.update(env or {})
    r = tputil.run("gemm_calls", args, env=e)
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, (r.traces, r.stderr)
    return r, tputil.load_trace(r.traces[0])


def test_every_entry_point_once_with_flops_precision_and_shapes():
    plain = tputil.run("gemm_calls", preload=False)
    r, trace = _run()
    assert plain.rc == 0 and r.stdout == plain.stdout
    want = _expected(r.stdout)
    assert set(want) == set(_def_names()), set(want) ^ set(_def_names())
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    # two steps ran; only the recorded one (step 1) is in the trace
    got = collections.Counter(ev["name"] for ev in ops)
    assert got == collections.Counter(set(want)), (got, want)
    for ev in ops:
        flops, m, n, k, b = want[ev["name"]]
        a = ev["args"]
        assert a["flops"] == flops, (ev["name"], a, flops)
        assert a["precision"] == _precision(ev["name"]), (ev["name"], a)
        assert (a["m"], a["n"], a["k"], a["batch"]) == (m, n, k, b), (ev["name"], a)
        assert a["Input Dims"] == [[m, k], [k, n]], a
    by = {ev["name"]: ev["args"] for ev in ops}
    # hand-computed, independent of the program's printout
    assert by["cublasSgemm_v2"]["flops"] == 2 * 10 * 20 * 30
    assert by["cublasCgemm_v2"]["flops"] == 8 * 14 * 24 * 34
    assert by["cublasSgemmGroupedBatched"]["flops"] == \
        2 * 60 * 70 * 80 * 2 + 2 * 61 * 71 * 81 * 3
    assert by["cublasLtMatmul"]["flops"] == 2 * 100 * 200 * 300 * 4
    assert by["cublasHgemm"]["Input type"] == ["c10::Half", "c10::Half"]
    assert by["cublasZgemm_v2"]["Input type"] == ["c10::complex<double>", "c10::complex<double>"]


def test_shapes_only_when_asked():
    _, trace = _run(env={"TRAINPROF_RECORD_SHAPES": None})
    for ev in tputil.events(trace, ph="X", cat="cpu_op"):
        assert "flops" in ev["args"] and "precision" in ev["args"]
        assert not {"m", "Input Dims", "Input type"} & set(ev["args"]), ev


def test_tf32_math_mode_of_the_handle():
    _, trace = _run(["tf32"])
    by = {ev["name"]: ev["args"]["precision"] for ev in tputil.events(trace, ph="X", cat="cpu_op")}
    for name in ("cublasSgemm_v2", "cublasSgemm_v2_64", "cublasCgemm_v2", "cublasSgemmBatched",
                 "cublasSgemmStridedBatched", "cublasSgemmGroupedBatched", "cublasSgemmEx_64",
                 "cublasGemmEx_64"):
        assert by[name] == "tf32", (name, by[name])
    # explicit classes do not follow the math mode
    assert by["cublasGemmGroupedBatchedEx_64"] == "fp32"        # pedantic
    assert by["cublasDgemm_v2"] == "fp64" and by["cublasGemmEx"] == "bf16"
    assert by["cublasLtMatmul"] == "bf16"                       # Lt has no math mode


def test_lt_descriptors_transposes_batches_and_types():
    _, trace = _run(["lt"])
    ops = tputil.events(trace, ph="X", cat="cpu_op", name="cublasLtMatmul")
    got = [(a["m"], a["n"], a["k"], a["batch"], a["flops"], a["precision"], a["Input type"][0])
           for a in (ev["args"] for ev in ops)]
    u32 = 2 ** 32 - 1
    assert got == [
        (64, 48, 40, 1, 2 * 64 * 48 * 40, "tf32", "float"),
        (96, 80, 72, 1, 2 * 96 * 80 * 72, "fp16", "c10::Half"),           # TRANSA=T
        (33, 17, 9, 6, 2 * 33 * 17 * 9 * 6, "fp64", "double"),       # TRANSB=T, batch 6
        (128, 256, 512, 1, 2 * 128 * 256 * 512, "fp8", "c10::Float8_e4m3fn"),
        (u32, 2, 3, 1, 2 * 5000000000 * 2 * 3, "fp32", "float"),     # m saturates, FLOPs exact
    ], got


def test_nested_lt_call_is_one_event_and_launches_inside_are_recorded():
    r, trace = _run()
    # cublasGemmEx called cublasLtMatmul in the library: 2 steps x (1 direct + 1 nested)
    assert b"cublasLtMatmul reached the library 4 times" in r.stdout
    ops = tputil.events(trace, ph="X", cat="cpu_op")
    assert [ev["name"] for ev in ops].count("cublasLtMatmul") == 1
    assert [ev["name"] for ev in ops].count("cublasGemmEx") == 1
    # cpu_ops carry their own External id and, as Kineto's, no correlation
    assert all("correlation" not in ev["args"] and ev["args"]["External id"] > 0 for ev in ops)
    # the fake cublasSgemm_v2 launches one kernel: its own runtime event,
    # inside the library call in time
    (sgemm,) = [ev for ev in ops if ev["name"] == "cublasSgemm_v2"]
    launches = tputil.events(trace, ph="X", cat="cuda_runtime", name="cudaLaunchKernel")
    assert len(launches) == 1, launches
    la = launches[0]
    assert la["tid"] == sgemm["tid"]
    assert sgemm["ts"] <= la["ts"] and la["ts"] + la["dur"] <= sgemm["ts"] + sgemm["dur"] + 1e-3


def test_nothing_recorded_outside_windows():
    # one step, which is the warmup: the GEMMs all ran outside the window
    # (what exit saves holds only the unfinished step after it)
    r = tputil.run("gemm_calls", env={"GEMM_STEPS": "1", "TRAINPROF_SCHEDULE": "warmup=1,active=1"})
    assert r.rc == 0, r.stderr
    # (the program's cublasDestroy_v2 comes after its last step: recorded there)
    gemms = set(_def_names())
    for path in r.traces:
        assert [ev for ev in tputil.events(tputil.load_trace(path), cat="cpu_op")
                if ev["name"] in gemms] == []
    # wait=1: step 0 not recorded, step 1 recorded -> one event per entry point
    _, trace = _run(env={"TRAINPROF_SCHEDULE": "wait=1,warmup=0,active=1", "GEMM_STEPS": "3"})
    got = collections.Counter(ev["name"] for ev in tputil.events(trace, ph="X", cat="cpu_op")
                              if ev["name"] in gemms)
    assert set(got.values()) == {1} and len(got) == len(_def_names())
