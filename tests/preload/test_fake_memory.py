"""The fakes' device memory, checked on the fakes alone (no preload).

FAKE_CUDA_MEM_BUDGET=N gives the fake device N bytes, shared by the fake
driver (tests/fakes/cuda.c) and the fake runtime (tests/fakes/cudart.c):
tests/programs/mem_budget.c allocates blocks through both in turn until one
fails, and prints what each call answered and what cuMemGetInfo_v2 and
cudaMemGetInfo then say.  tests/programs/mem_owners.c holds memory through
the fake NCCL, cuBLAS and PyTorch caching allocator and its own calls; its
top comment gives the bytes, which these tests recompute."""
import re

import pytest

import tputil

MIB = 1 << 20
GIB80 = 80 << 30
# mem_budget.c's order of allocation calls
APIS = ["cuMemAlloc_v2", "cudaMalloc", "cuMemCreate", "cudaMallocAsync",
        "cuMemAllocPitch_v2", "cudaMallocPitch", "cuMemAllocAsync", "cudaMalloc3D"]
MAX_BLOCKS = 64


def _budget_run(size, env):
    r = tputil.run("mem_budget", [size], env=env, preload=False)
    assert r.rc == 0, r.stderr
    return r.stdout.decode().splitlines()


def _field(line, name):
    return int(re.search(r"\b%s (-?\d+)" % name, line).group(1))


@pytest.mark.parametrize("budget_mib,size_mib", [(20, 3), (20, 4), (21, 7), (64, 1)])
def test_budget_refuses_the_allocation_that_does_not_fit(budget_mib, size_mib):
    budget, size = budget_mib * MIB, size_mib * MIB
    lines = _budget_run(size, {"FAKE_CUDA_MEM_BUDGET": budget})
    assert lines[0] == "info total %d free %d" % (budget, budget)
    assert lines[1] == "rtinfo total %d free %d" % (budget, budget)
    assert lines[2] == "devtotal %d" % budget
    allocs = [l for l in lines if l.startswith("alloc ")]
    fit = min(budget // size, MAX_BLOCKS)
    for i, line in enumerate(allocs[:fit]):
        assert line.split()[2] == APIS[i % len(APIS)], line
        assert _field(line, "rc") == 0 and _field(line, "last") == 0, line
        assert _field(line, "used") == _field(line, "rtused") == (i + 1) * size, line
    if fit == MAX_BLOCKS:
        assert len(allocs) == MAX_BLOCKS
        return
    # the first allocation that does not fit fails with status 2
    # (CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation) and takes nothing;
    # a runtime call also leaves it as the thread's last error
    assert len(allocs) == fit + 1
    bad = allocs[fit]
    api = APIS[fit % len(APIS)]
    assert bad.split()[2] == api
    assert _field(bad, "rc") == 2
    assert _field(bad, "last") == (2 if api.startswith("cuda") else 0), bad
    assert _field(bad, "used") == _field(bad, "rtused") == fit * size
    # managed, host memory and address reservations are not device memory
    others = [l for l in lines if l.startswith("other ")]
    assert len(others) == 5
    for line in others:
        assert _field(line, "rc") == 0 and _field(line, "used") == fit * size, line
    assert [l for l in lines if l.startswith("bad ")] == [
        "bad cuMemFree_v2 rc 1", "bad cuMemAddressFree rc 1"]
    # a free gives its bytes back: the same call then fits
    assert "retry %s rc 0 used %d" % (api, fit * size) in lines
    assert lines[-1] == "end used 0"


def test_without_a_budget_the_device_has_80_gib():
    lines = _budget_run(MIB, {"FAKE_CUDA_MEM_BUDGET": None})
    assert lines[0] == "info total %d free %d" % (GIB80, GIB80)
    assert lines[1] == "rtinfo total %d free %d" % (GIB80, GIB80)
    assert lines[2] == "devtotal %d" % GIB80
    allocs = [l for l in lines if l.startswith("alloc ")]
    assert len(allocs) == MAX_BLOCKS
    assert all(_field(l, "rc") == 0 for l in allocs)
    # cuMemGetInfo_v2 still counts what is live
    assert _field(allocs[-1], "used") == _field(allocs[-1], "rtused") == MAX_BLOCKS * MIB
    assert lines[-1] == "end used 0"


def test_oom_bytes_still_refuses_large_allocations():
    lines = _budget_run(3 * MIB, {"FAKE_CUDA_OOM_BYTES": 2 * MIB})
    allocs = [l for l in lines if l.startswith("alloc ")]
    assert len(allocs) == 1 and _field(allocs[0], "rc") == 2
    lines = _budget_run(MIB, {"FAKE_CUDA_OOM_BYTES": 2 * MIB})
    assert len([l for l in lines if l.startswith("alloc ")]) == MAX_BLOCKS


# ---- mem_owners -------------------------------------------------------------

NCCL_INIT, NCCL_CONN, CUBLAS, C10_BLOCK, VMM, OWN = 4 * MIB, 2 * MIB, MIB, 8 * MIB, 2 * MIB, 16 * MIB


def _owners_expected(steps, nccl_init=NCCL_INIT, leak=False):
    setup = nccl_init + CUBLAS + 3 * C10_BLOCK + VMM + OWN
    # a step: NCCL connects (first all-reduce), c10 holds a fourth block (cached)
    step = setup + NCCL_CONN + C10_BLOCK
    return (["setup: used %d" % setup] + ["step %d: used %d" % (s, step) for s in range(steps)]
            + ["end: used %d" % (OWN if leak else 0), "done"])


@pytest.mark.parametrize("args,env,kw", [
    ([], {}, {"steps": 5}),
    (["--steps=3", "--leak"], {}, {"steps": 3, "leak": True}),
    (["2"], {"FAKE_NCCL_INIT_BYTES": 0}, {"steps": 2, "nccl_init": 0}),
    (["--steps=4"], {"FAKE_CUDA_MEM_BUDGET": 57 * MIB}, {"steps": 4}),
])
def test_mem_owners_holds_what_its_comment_says(args, env, kw):
    r = tputil.run("mem_owners", args, env=env, preload=False)
    assert r.rc == 0, r.stderr
    assert r.stdout.decode().splitlines() == _owners_expected(**kw)
    assert r.stderr == b""


@pytest.mark.parametrize("budget_mib,grow_mib,grow_from", [(80, 8, 1), (80, 12, 2), (100, 3, 1), (57, 1, 3)])
def test_mem_owners_grows_until_out_of_memory(budget_mib, grow_mib, grow_from):
    budget, grow = budget_mib * MIB, grow_mib * MIB
    peak = _owners_expected(1)[1].split()[-1]
    peak = int(peak)
    # the first step s >= K at which peak + (s - K + 1) * G exceeds the budget
    dies = next(s for s in range(grow_from, 1000) if peak + (s - grow_from + 1) * grow > budget)
    steps = dies + 3
    r = tputil.run("mem_owners", ["--steps=%d" % steps, "--grow=%d" % grow, "--grow-from=%d" % grow_from],
                   env={"FAKE_CUDA_MEM_BUDGET": budget}, preload=False)
    assert r.rc == 1
    err = r.stderr.decode().splitlines()
    assert len(err) == 1 and err[0].startswith("torch.OutOfMemoryError: CUDA out of memory."), err
    assert "(step %d, libc10_cuda.so" % dies in err[0]
    out = r.stdout.decode().splitlines()
    assert out[-1] == "step %d: used %d" % (dies - 1, peak + max(0, dies - grow_from) * grow)
    # with room for every step the same run ends normally, the grown bytes held
    r = tputil.run("mem_owners", ["--steps=%d" % steps, "--grow=%d" % grow, "--grow-from=%d" % grow_from],
                   env={"FAKE_CUDA_MEM_BUDGET": budget + steps * grow}, preload=False)
    assert r.rc == 0, r.stderr
    assert r.stdout.decode().splitlines()[-2] == "end: used %d" % ((steps - grow_from) * grow)
