"""torch_client.py - real PyTorch workloads for tests/preload/test_real_clients.py.

Usage: python torch_client.py MODE
  train       an MLP trained with AdamW for ten steps on the CPU
  cnn         a small CNN (two Conv2d) trained with SGD for ten steps on the
              CPU: oneDNN runs its convolutions, and announces each
              primitive as a task in ITT domains of its own
  twoopt      ten iterations of a loop with two optimizers (a GAN's shape:
              AdamW on one model, SGD on another, both step every iteration)
  keyavg      the train loop under torch.profiler(record_shapes=True): prints
              key_averages(group_by_input_shape=True) as JSON lines (name,
              input shapes, calls), what trainprof's summary is compared with
  nvtx        the same with torch's NVTX operator ranges on (what emit_nvtx
              does, through the same _enable_profiler call, without
              torch.cuda.synchronize())
  dataloader  the same, batches from a DataLoader with num_workers=2
  spawn       the same with workers started by spawn, kept across epochs
              (persistent_workers), two epochs of five batches
  ddp         a DistributedDataParallel MLP on the gloo backend, ten steps;
              run it under torchrun (rank 0 prints the losses)
  mpspawn     the ddp loop in 2 processes started by torch.multiprocessing.spawn
              (no RANK variable: each learns its rank from init_process_group)
  lightning   a Lightning Trainer, strategy "ddp", 2 CPU devices, 10 steps
              (Lightning starts rank 1 itself, with LOCAL_RANK and WORLD_SIZE
              but no RANK; rank 0 is this process, with neither)
  compile     torch.compile of a small model, compared with eager
  sigint      the train loop, interrupted in step 2 by SIGINT sent to itself
              (os.kill), as Ctrl-C is: KeyboardInterrupt, not caught
  sigint-caught  the same, the KeyboardInterrupt caught: "interrupted", exit 0
  cuda        CUDA calls that fail on a machine with no driver: torch's
              device query and allocation, then cudaMalloc through ctypes
              in torch's own libcudart

stdout carries only what the workload computes (losses, results), so that a
run with the library and one without can be compared byte for byte.  stderr
gets "client-threads <pid> <comm,...>" lines: the thread names of the main
process at exit and of each DataLoader worker, so a test can see that no
helper thread of the profiler started where none should.
"""

import ctypes
import glob
import os
import sys

import torch

STEPS = 10


def threads_line(tag="main"):
    names = []
    for t in sorted(glob.glob("/proc/self/task/*/comm")):
        try:
            with open(t) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    sys.stderr.write("client-threads %s %d %s\n" % (tag, os.getpid(), ",".join(names)))
    sys.stderr.flush()


class Data(torch.utils.data.Dataset):
    def __init__(self, n=STEPS * 32):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 64, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def worker_init(_):
    threads_line("worker")


def model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train(batches):
    model, opt = model_and_opt()
    for step, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (step, loss.item()))
        sys.stderr.write("op-ranges %d %s\n" % (step, torch.autograd._profiler_enabled()))


def cnn():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 12 * 12, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        x, y = torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (step, loss.item()))


def two_optimizers(batches):
    torch.manual_seed(0)
    gen = torch.nn.Linear(64, 64)
    disc = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt_d = torch.optim.AdamW(disc.parameters(), lr=1e-3)
    opt_g = torch.optim.SGD(gen.parameters(), lr=1e-2)
    for step, (x, _) in enumerate(batches):
        opt_d.zero_grad()
        loss_d = disc(x).mean() - disc(gen(x).detach()).mean()
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = disc(gen(x)).mean()
        loss_g.backward()
        opt_g.step()
        print("iteration %d d %.6f g %.6f" % (step, loss_d.item(), loss_g.item()))


def fixed_batches():
    d = Data()
    return [(d.x[i * 32:(i + 1) * 32], d.y[i * 32:(i + 1) * 32]) for i in range(STEPS)]


def key_averages():
    """torch's own operator table of the train loop, by input shape."""
    import json
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        train(fixed_batches())
    for e in prof.key_averages(group_by_input_shape=True):
        print(json.dumps({"name": e.key, "input_shapes": str(e.input_shapes), "calls": e.count}))


def nvtx_on():
    from torch.autograd import ProfilerConfig, ProfilerState, _enable_profiler
    cfg = ProfilerConfig(ProfilerState.NVTX, False, False, False, False, False,
                         torch._C._profiler._ExperimentalConfig())
    _enable_profiler(cfg, set())


def nvtx_off():
    from torch.autograd import _disable_profiler
    _disable_profiler()


def spawned(rank, port):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    ddp_loop(dist)


def mpspawn():
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:          # a free port for this job's rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(spawned, args=(port,), nprocs=2, join=True)


def lightning():
    import pytorch_lightning as pl

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                           torch.nn.Linear(128, 10))

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    data = torch.utils.data.TensorDataset(torch.randn(320, 64), torch.randint(0, 10, (320,)))
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=10,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=16))
    if trainer.global_rank == 0:
        print("lightning done, %d steps" % trainer.global_step)


def ddp():
    import torch.distributed as dist
    dist.init_process_group("gloo")
    ddp_loop(dist)


def ddp_loop(dist):
    rank = dist.get_rank()
    model, _ = model_and_opt()
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(fixed_batches()):
        part = slice(rank * 16, rank * 16 + 16)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[part]), y[part])
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0:
            print("step %d loss %.6f" % (step, total.item() / dist.get_world_size()))
    dist.barrier()
    dist.destroy_process_group()


def compiled():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    cm = torch.compile(m)
    x = torch.randn(8, 16)
    with torch.no_grad():
        a, b = cm(x), m(x)
    print("compiled matches eager: %s" % bool(torch.allclose(a, b, atol=1e-5)))


def interrupted(catch):
    import signal
    try:      # under plain LD_PRELOAD nothing else counts a CPU job's steps
        step_api = ctypes.CDLL(None).trainprof_step
    except AttributeError:
        step_api = None
    # under `trainprof run` its Python hook counts the steps already
    hooked = "trainprof" in (getattr(sys.modules.get("sitecustomize"), "__file__", "") or "")
    model, opt = model_and_opt()
    try:
        for step, (x, y) in enumerate(fixed_batches()):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            print("step %d loss %.6f" % (step, loss.item()))
            sys.stdout.flush()
            if step_api and not hooked:
                step_api()
            if step == 2:
                os.kill(os.getpid(), signal.SIGINT)
    except KeyboardInterrupt:
        if not catch:
            raise
        print("interrupted")


def cudart_path():
    import torch.cuda  # noqa: F401  (loads libcudart through libtorch_cuda)
    for line in open("/proc/self/maps"):
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if os.path.basename(path).startswith("libcudart.so"):
            return path
    return None


def failing_cuda():
    print("cuda available: %s" % torch.cuda.is_available())
    print("device count: %d" % torch.cuda.device_count())
    try:
        torch.zeros(4, device="cuda")
        print("allocation: ok")
    except (RuntimeError, AssertionError) as e:
        print("allocation: %s" % type(e).__name__)
    path = cudart_path()
    if path:
        rt = ctypes.CDLL(path)
        p = ctypes.c_void_p()
        print("cudaMalloc: %d" % rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(256)))
        print("cudaDeviceSynchronize: %d" % rt.cudaDeviceSynchronize())
    else:
        print("cudaMalloc: no libcudart loaded")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "train"
    if mode == "train":
        train(fixed_batches())
    elif mode == "keyavg":
        key_averages()
    elif mode == "twoopt":
        two_optimizers(fixed_batches())
    elif mode == "cnn":
        cnn()
    elif mode == "nvtx":
        nvtx_on()
        train(fixed_batches())
        nvtx_off()
    elif mode == "dataloader":
        loader = torch.utils.data.DataLoader(Data(), batch_size=32, num_workers=2,
                                             worker_init_fn=worker_init)
        train(loader)
    elif mode == "spawn":
        loader = torch.utils.data.DataLoader(Data(n=5 * 32), batch_size=32, num_workers=2,
                                             multiprocessing_context="spawn",
                                             persistent_workers=True, worker_init_fn=worker_init)
        model, opt = model_and_opt()
        for epoch in range(2):
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                print("epoch %d step %d loss %.6f" % (epoch, step, loss.item()))
    elif mode == "ddp":
        ddp()
    elif mode == "sigint":
        interrupted(False)
    elif mode == "sigint-caught":
        interrupted(True)
    elif mode == "mpspawn":
        mpspawn()
    elif mode == "lightning":
        lightning()
    elif mode == "compile":
        compiled()
    elif mode == "cuda":
        failing_cuda()
    else:
        sys.stderr.write("torch_client: unknown mode %r\n" % mode)
        return 2
    threads_line()
    return 0


if __name__ == "__main__":
    sys.exit(main())
