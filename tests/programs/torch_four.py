"""torch_four.py - four kinds of training program, for
tests/preload/test_torch_parity.py (a trace of `trainprof run` compared,
step by step, with torch.profiler's of the same program).

Usage: python torch_four.py MODEL plain
       python torch_four.py MODEL torchprof OUTDIR [SCHEDULE]
  MODEL  mlp          an MLP (Linear, ReLU, LayerNorm) trained with AdamW
         cnn          a CNN (two Conv2d, BatchNorm, pooling) trained with SGD
                      with momentum
         transformer  a TransformerEncoderLayer with a linear head, Adam
         gan          a GAN: a discriminator and a generator, each with its
                      own Adam; both step every iteration (D first, then G)
  plain      trains ITERS iterations and prints each iteration's losses
  torchprof  the same loop under torch.profiler.profile (CPU activities,
             record_shapes=True, schedule(wait=W, warmup=1, active=A), the
             trace exported as Chrome JSON into OUTDIR when it is ready),
             prof.step() at the end of each iteration.  SCHEDULE is
             "wait=W,warmup=1,active=A" (default wait=2,warmup=1,active=3):
             pass `trainprof run` the same one, and the two record the same
             iterations (torch's ProfilerStep#N is iteration N; so is ours,
             from the second iteration on: README, step signal `api`).

An iteration runs only torch operators that both profilers see in the same
place: the batch is drawn at its start, its losses are read (.item()) before
the optimizers step, and each iteration ends with the step() of its last
optimizer, where `trainprof run`'s hook ends the step (README: work after
the last optimizer's step lands in the next step under trainprof, and in
the same one under torch.profiler, since prof.step() comes after it).

Iteration i trains on a batch of BATCH + i samples, so that the shapes
(Input Dims) of its operators say which iteration a step holds.  Small
sizes (a few seconds on two cores), fixed seeds, one thread.  stdout
carries only the losses, so runs with and without trainprof compare byte
for byte.
"""

import os
import sys

import torch

ITERS = 6
BATCH = 8


def classify(opt, logits_of, x, y):
    """One iteration of a classifier with one optimizer: the loss is read
    before the optimizer steps, so that its step ends the iteration."""
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(logits_of(x), y)
    loss.backward()
    out = [loss.item()]
    opt.step()
    return out


class MLP:
    def __init__(self):
        self.model = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.LayerNorm(64),
            torch.nn.Linear(64, 10))
        self.opts = [torch.optim.AdamW(self.model.parameters(), lr=1e-3)]

    def iteration(self, g, b):
        x = torch.randn(b, 32, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
        return classify(self.opts[0], self.model, x, y)


class CNN:
    def __init__(self):
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
        self.opts = [torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)]

    def iteration(self, g, b):
        x = torch.randn(b, 3, 16, 16, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
        return classify(self.opts[0], self.model, x, y)


class Transformer:
    def __init__(self):
        self.layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                      dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(32, 10)
        params = list(self.layer.parameters()) + list(self.head.parameters())
        self.opts = [torch.optim.Adam(params, lr=1e-3)]

    def iteration(self, g, b):
        x = torch.randn(b, 12, 32, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
        return classify(self.opts[0], lambda v: self.head(self.layer(v).mean(dim=1)), x, y)


class GAN:
    def __init__(self):
        self.gen = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 16))
        self.disc = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LeakyReLU(0.2),
                                        torch.nn.Linear(32, 1))
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.opts = [self.opt_d, self.opt_g]

    def iteration(self, g, b):
        bce = torch.nn.functional.binary_cross_entropy_with_logits
        real = torch.randn(b, 16, generator=g) * 0.5 + 1.0
        z = torch.randn(b, 8, generator=g)
        ones, zeros = torch.ones(b, 1), torch.zeros(b, 1)
        fake = self.gen(z)
        # the discriminator, on real and (detached) fake samples
        self.opt_d.zero_grad()
        loss_d = bce(self.disc(real), ones) + bce(self.disc(fake.detach()), zeros)
        loss_d.backward()
        self.opt_d.step()
        # the generator, through the discriminator
        self.opt_g.zero_grad()
        loss_g = bce(self.disc(fake), ones)
        loss_g.backward()
        out = [loss_d.item(), loss_g.item()]
        self.opt_g.step()
        return out


MODELS = {"mlp": MLP, "cnn": CNN, "transformer": Transformer, "gan": GAN}


def train(name, after=None):
    torch.manual_seed(0)
    job = MODELS[name]()
    g = torch.Generator().manual_seed(1)
    for i in range(ITERS):
        losses = job.iteration(g, BATCH + i)
        print("iteration %d losses %s" % (i, " ".join("%.5f" % v for v in losses)))
        if after:
            after(i)


def parse_schedule(text):
    kw = dict(item.split("=") for item in text.split(","))
    return {k: int(v) for k, v in kw.items()}


def main():
    torch.set_num_threads(1)
    if len(sys.argv) < 3 or sys.argv[1] not in MODELS:
        sys.stderr.write(__doc__)
        return 2
    name, mode = sys.argv[1], sys.argv[2]
    if mode == "plain":
        train(name)
        return 0
    if mode != "torchprof" or len(sys.argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    outdir = sys.argv[3]
    sched = parse_schedule(sys.argv[4] if len(sys.argv) > 4 else "wait=2,warmup=1,active=3")
    os.makedirs(outdir, exist_ok=True)

    def ready(prof):
        prof.export_chrome_trace(os.path.join(outdir, "torch.%d.pt.trace.json" % prof.step_num))

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, on_trace_ready=ready,
                                schedule=torch.profiler.schedule(repeat=1, **sched)) as prof:
        train(name, after=lambda i: prof.step())
    return 0


if __name__ == "__main__":
    sys.exit(main())
