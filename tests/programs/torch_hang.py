"""A 2-rank gloo job that hangs: rank 1 sleeps in Python before its third
dist.all_reduce while rank 0 waits inside it (tests/cli/test_hang.py).
Run under `trainprof run --hang S -- torchrun --nproc-per-node 2`; steps
are counted by the Python hook at each optimizer step."""

import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        t = torch.ones(4)
        if rank == 1 and step == 2:
            time.sleep(600)                         # HANG: rank 1 sleeps here
        dist.all_reduce(t)                          # HANG: rank 0 waits here
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
