"""Coverage of what torch calls: every function of the
CUDA runtime, driver, cuBLAS/cuBLASLt, cuDNN and NCCL families that the PyPI
torch wheel's own libraries (torch/lib/*.so*) import is either interposed by
build/libtrainprof.so (one of its exported functions) or listed, with a
reason, in collector/record/apis/not_intercepted.txt.  The list stays honest both
ways: a line for a function we interpose is stale, and so is a line for a
function torch does not import (the file describes the pinned wheel of
tests/requirements-torch.txt; a torch that drops a function drops its line,
and one that imports a new function fails here until someone decides).

The families go by name: cuda* and __cuda* (runtime), cu[A-Z]* (driver),
cublas* (cuBLAS and cuBLASLt), cudnn*, nccl*.  cuFile* also matches cu[A-Z]*
but is libcufile's API (GPUDirect Storage file I/O, which torch's
libtorch_cuda.so imports), not the driver's: outside the families we
interpose, so it is left out here rather than listed.  Only torch's own
libraries count: the nvidia-* libraries it loads import each other's
internals, which no program calls.

Dynamic symbols are read with binutils' nm -D (build-essential brings
binutils; test_real_clients.py and scripts/dev/modgraph use it too).  Skipped
only when torch is not installed."""

import glob
import importlib.util
import os
import re
import shutil
import subprocess

import pytest

import tputil

LIST = os.path.join(tputil.ROOT, "collector", "record", "apis", "not_intercepted.txt")

# (family, pattern), in the file's order
FAMILIES = [
    ("runtime", re.compile(r"^(cuda|__cuda)")),
    ("driver", re.compile(r"^cu[A-Z]")),
    ("cublas", re.compile(r"^cublas")),
    ("cudnn", re.compile(r"^cudnn")),
    ("nccl", re.compile(r"^nccl")),
]
NOT_OURS = re.compile(r"^cuFile")   # libcufile (GPUDirect Storage), not the driver

_TORCH = importlib.util.find_spec("torch")
if _TORCH is None or not _TORCH.origin:
    pytest.skip("torch is not installed in this venv (tests/requirements-torch.txt): "
                "no imports to check", allow_module_level=True)
TORCH_LIB = os.path.join(os.path.dirname(_TORCH.origin), "lib")


def family(name):
    """Index of the family of "name" in FAMILIES, None if none (or cuFile*)."""
    if NOT_OURS.match(name):
        return None
    for i, (_, pat) in enumerate(FAMILIES):
        if pat.match(name):
            return i
    return None


def nm(path, *flags):
    """(type, name) of the dynamic symbols nm -D lists for "path", names
    without their @version."""
    assert shutil.which("nm"), "binutils' nm is missing (build-essential brings it)"
    out = subprocess.run(["nm", "-D"] + list(flags) + [path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=True).stdout.decode()
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms.append((parts[-2], parts[-1].split("@")[0]))
    return syms


def torch_libraries():
    seen, out = set(), []
    for path in sorted(glob.glob(os.path.join(TORCH_LIB, "*.so*"))):
        real = os.path.realpath(path)
        if os.path.isfile(real) and real not in seen:
            seen.add(real)
            out.append(real)
    return out


def torch_imports():
    """{name: [library basenames]} of the family functions torch imports."""
    got = {}
    for lib in torch_libraries():
        for kind, name in nm(lib, "--undefined-only"):
            if kind in ("U", "w") and family(name) is not None:
                got.setdefault(name, []).append(os.path.basename(lib))
    return got


def interposed():
    """The functions libtrainprof.so exports."""
    lib = tputil.lib_path()
    assert os.path.isfile(lib), "build the library first (make lib)"
    return {name for kind, name in nm(lib, "--defined-only") if kind in ("T", "W", "i")}


def read_list():
    """[(line number, line)] of the file's entries (not comments, not blank)."""
    out = []
    with open(LIST) as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            out.append((no, line))
    return out


def entries():
    return {line.split("\t", 1)[0]: line for _, line in read_list()}


def test_the_list_is_well_formed():
    """name<TAB>reason, one per line: a family's name, a reason, no name
    twice; families in FAMILIES' order, names sorted within each."""
    seen, order = set(), []
    for no, line in read_list():
        parts = line.split("\t")
        assert len(parts) == 2, "line %d: not name<TAB>reason: %r" % (no, line)
        name, reason = parts
        assert re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name), "line %d: %r" % (no, name)
        assert reason.strip() == reason and reason, "line %d: no reason: %r" % (no, line)
        fam = family(name)
        assert fam is not None, "line %d: %s is in no family we interpose" % (no, name)
        assert name not in seen, "line %d: %s listed twice" % (no, name)
        seen.add(name)
        order.append((fam, name, no))
    assert order, "the list is empty"
    bad = [(FAMILIES[f][0], n, no) for (f, n, no), prev in zip(order[1:], order)
           if (f, n) < prev[:2]]
    assert not bad, "out of order (family, then name): %s" % bad


def test_every_import_is_interposed_or_listed():
    """A torch import that we neither interpose nor list must be decided:
    intercept it, or list it with the reason."""
    imports = torch_imports()
    assert len(imports) > 100, "torch imports too few CUDA functions: %d" % len(imports)
    missing = sorted(set(imports) - interposed() - set(entries()))
    assert not missing, "neither interposed nor in %s:\n%s" % (
        os.path.relpath(LIST, tputil.ROOT),
        "\n".join("%s (%s)" % (n, ", ".join(imports[n])) for n in missing))


def test_no_listed_function_is_interposed():
    stale = sorted(set(entries()) & interposed())
    assert not stale, "interposed, yet listed as not intercepted: %s" % stale


def test_every_listed_function_is_imported_by_torch():
    extra = sorted(set(entries()) - set(torch_imports()))
    assert not extra, "listed, but torch does not import them: %s" % extra
