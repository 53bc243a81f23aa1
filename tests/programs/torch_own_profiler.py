"""torch_own_profiler.py - PyTorch programs that run torch's own profiler,
for tests/preload/test_own_profiler.py.

Usage: python torch_own_profiler.py MODE OUTDIR
  schedule   torch.profiler.profile with schedule(wait=1, warmup=1, active=3)
             and prof.step() each iteration (its window, iterations 2-4,
             overlaps trainprof's default window, steps 1-4)
  late       the same schedule with skip_first=6 (its window, iterations
             8-10, after trainprof's)
  byhand     torch.profiler.profile().start() at iteration 2, .stop() at 6
  before     a profiler started before the first iteration, stopped at 3
  autograd   `with torch.autograd.profiler.profile()` over iterations 2-4
  legacy     `with torch.autograd.profiler_legacy.profile()` over 2-4
  emit_itt   `with torch.autograd.profiler.emit_itt()` over iterations 2-4
  emit_nvtx  `with torch.autograd.profiler.emit_nvtx()` over iterations 2-4
             (on a machine without CUDA it fails in torch.cuda.synchronize()
             with or without trainprof; the program says so and goes on)
  lightning  PyTorch Lightning's Trainer(profiler="pytorch"), 12 steps

stdout carries what the program computes and what its own profiler saw
(whether its trace holds the model's operators, its ProfilerStep numbers):
a run under trainprof must print exactly what a run without it prints.
The profilers' files go to OUTDIR.
"""

import glob
import gzip
import json
import os
import sys

import torch

ITERS = 12


def model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g))
            for _ in range(ITERS)]


def one_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def loop(before=None, after=None):
    """Train for ITERS iterations; before(i) and after(i) run around each."""
    model, opt = model_and_opt()
    for i, (x, y) in enumerate(batches()):
        if before:
            before(i)
        loss = one_step(model, opt, x, y)
        print("iteration %d loss %.4f" % (i, loss))
        if after:
            after(i)


def say_events(names):
    """What a profiler's own events show: the model's operators, and its steps."""
    names = list(names)
    print("own profiler: aten::addmm %s, aten::relu %s" %
          ("aten::addmm" in names, "aten::relu" in names))
    steps = sorted(int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#"))
    print("own profiler: steps %s" % sorted(set(steps)))


def say_trace_files(outdir):
    for path in sorted(glob.glob(os.path.join(outdir, "**", "*.json*"), recursive=True)):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            t = json.load(f)
        print("own trace %s:" % os.path.basename(path).split(".")[0][:8])
        say_events(e.get("name", "") for e in t.get("traceEvents", []))


def with_schedule(outdir, skip_first=0):
    def ready(prof):
        path = os.path.join(outdir, "own.%d.json" % prof.step_num)
        prof.export_chrome_trace(path)

    sched = torch.profiler.schedule(skip_first=skip_first, wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched, on_trace_ready=ready) as prof:
        loop(after=lambda i: prof.step())
    say_trace_files(outdir)


def by_hand(outdir, start, stop):
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    state = {}

    def before(i):
        if i == start:
            prof.start()
        if i == stop:
            prof.stop()
            state["stopped"] = True

    if start < 0:
        prof.start()
    loop(before=before)
    if "stopped" not in state:
        prof.stop()
    say_events(e.name for e in prof.events())


def context(make):
    """make() is a context manager entered at iteration 2 and left at 5.
    One that fails to enter (emit_nvtx without CUDA) is said and skipped."""
    box = {}

    def before(i):
        if i == 2:
            try:
                cm = make()
                box["prof"] = cm.__enter__()
                box["cm"] = cm
            except Exception as e:
                print("%s: %s" % (make.__name__, type(e).__name__))
        if i == 5 and "cm" in box:
            box.pop("cm").__exit__(None, None, None)

    loop(before=before)
    return box.get("prof")


def lightning(outdir):
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    import pytorch_lightning as pl
    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model, _ = model_and_opt()

        def training_step(self, batch, _i):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            print("loss %.4f" % loss.item())
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(*map(torch.cat, zip(*batches()))), batch_size=16)
    trainer = pl.Trainer(max_steps=ITERS, profiler="pytorch", default_root_dir=outdir,
                         accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), data)
    files = glob.glob(os.path.join(outdir, "**", "*.json*"), recursive=True)
    print("lightning profiler wrote a trace: %s" % bool(files))


def main():
    mode, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    if mode == "schedule":
        with_schedule(outdir)
    elif mode == "late":
        with_schedule(outdir, skip_first=6)
    elif mode == "byhand":
        by_hand(outdir, 2, 6)
    elif mode == "before":
        by_hand(outdir, -1, 3)
    elif mode == "autograd":
        prof = context(torch.autograd.profiler.profile)
        say_events(e.name for e in prof.function_events)
    elif mode == "legacy":
        prof = context(torch.autograd.profiler_legacy.profile)
        say_events(e.name for e in prof.function_events)
    elif mode == "emit_itt":
        context(torch.autograd.profiler.emit_itt)
    elif mode == "emit_nvtx":
        context(torch.autograd.profiler.emit_nvtx)
    elif mode == "lightning":
        lightning(outdir)
    else:
        sys.stderr.write("torch_own_profiler: unknown mode %r\n" % mode)
        return 2
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
