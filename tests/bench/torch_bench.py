"""torch_bench.py - ms per training step of a small MLP with AdamW on the
CPU (the PyPI torch wheel), as the user of each profiler would run it.

  python torch_bench.py MODE [STEPS]
    plain       no profiler
    torchprof   torch.profiler.profile(activities=[CPU]) around the loop
                (recording only: the trace is exported after the timing)
    torchprof_shapes  the same with record_shapes=True
    nvtx        torch's NVTX operator ranges on (emit_nvtx's state) with no
                injection library: torch's own formatting, NVTX's no-op
    nvtx_shapes the same with shapes (emit_nvtx(record_shapes=True))
    itt         torch's ITT operator ranges on (emit_itt's state) with no
                collector: torch's own cost of that state, ITT's no-op
    trainprof   the loop as it is; run it under `trainprof run` with
                TRAINPROF_SCHEDULE=all, which records every step with torch's
                operators on (the optimizer hook turns them on: ITT, or NVTX
                where INTEL_LIBITTNOTIFY64 names another library, or with
                TRAINPROF_RECORD_SHAPES=1)

Prints "ms_per_step=X" (the mean over the steps after the first 20).
"""

import os
import sys
import tempfile
import time

import torch


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    prof = None
    if mode in ("nvtx", "nvtx_shapes", "itt"):
        from torch.autograd import ProfilerConfig, ProfilerState, _enable_profiler
        state = ProfilerState.ITT if mode == "itt" else ProfilerState.NVTX
        _enable_profiler(ProfilerConfig(state, mode == "nvtx_shapes", False, False, False, False,
                                        torch._C._profiler._ExperimentalConfig()), set())
    if mode in ("torchprof", "torchprof_shapes"):
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                      record_shapes=mode == "torchprof_shapes")
        prof.__enter__()
    skip = 20
    for _ in range(skip):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    ms = (time.perf_counter() - t0) * 1e3 / steps
    if prof is not None:
        prof.__exit__(None, None, None)
        with tempfile.TemporaryDirectory() as d:
            prof.export_chrome_trace(os.path.join(d, "t.json"))
    if mode in ("nvtx", "nvtx_shapes", "itt"):
        torch.autograd._disable_profiler()
    print("ms_per_step=%.4f" % ms)


if __name__ == "__main__":
    main()
