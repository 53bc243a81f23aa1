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
