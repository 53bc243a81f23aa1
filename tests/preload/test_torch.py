"""The real PyTorch (the PyPI wheel, on the CPU) under `trainprof run`: how
steps are counted from its optimizers.  The workloads are
tests/programs/torch_client.py's; the helpers are test_real_clients.py's."""

import os
import glob

import tputil
from test_real_clients import client, plain, listing


def run_all(mode):
    """`trainprof run --schedule all` of MODE: (process, the one trace)."""
    p, cwd, _ = client(mode, via_cli=True, env={"TRAINPROF_SCHEDULE": "all"})
    assert p.returncode == 0, p.stderr[-3000:]
    traces = glob.glob(os.path.join(cwd, "*", "traces", "*"))
    assert len(traces) == 1, listing(cwd)
    return p, tputil.load_trace(traces[0])


def test_two_optimizers_count_one_step_per_iteration():
    """A GAN-shaped loop (two optimizers, both stepping every iteration)
    counts one step per iteration, as a one-optimizer loop of as many
    iterations does: the first optimizer that steps owns the steps."""
    base, _ = plain("twoopt")
    p, two = run_all("twoopt")
    assert p.stdout == base.stdout
    _, one = run_all("train")
    steps_two, steps_one = tputil.steps(two), tputil.steps(one)
    assert len(steps_one) >= 9, steps_one
    assert steps_two == steps_one, (steps_two, steps_one)
