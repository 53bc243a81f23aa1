#!/usr/bin/env python3
"""gpu_validate_torch - trainprof against torch.profiler on one PyTorch loop.

  gpu_validate_torch.py [--lib build/libtrainprof.so] [--out RESULTS.md]
                        [--workdir DIR] [--steps 40] [--timeout 180]
                        [--batch 32 --seq 1024 --dim 1024 --heads 16 --layers 2]

Part of scripts/dev/gpu-validate (needs an NVIDIA GPU and PyTorch).  One
invocation runs the same training loop three times, each in its own process
(so that no profiler state leaks between them), on the same machine:

  plain      no profiler: step times only;
  torch      torch.profiler (CPU+CUDA, record_shapes, with_flops) with the
             schedule below; its Chrome trace, the FLOPs of aten::mm, addmm,
             bmm and baddbmm from key_averages(), max_memory_reserved;
  trainprof  LD_PRELOAD=libtrainprof.so, TRAINPROF_STEP_ON=api and
             trainprof_step() called through ctypes after each optimizer
             step, the same schedule.

The loop: a conv layer (3x3, bf16 via cuDNN) feeding token embeddings, then
`--layers` transformer blocks (QKV projection, causal
F.scaled_dot_product_attention, output projection, a 4x MLP with GELU),
MSE loss, AdamW, bf16 autocast, fixed seed and data.  Each step ends with
torch.cuda.synchronize(), and its time is taken from before the forward pass
to after that synchronisation (the profilers' own step calls are outside it),
so host-side overhead shows fully.

Schedule: skip_first=10, wait=0, warmup=2, active=10, repeat=1 for both
profilers (ours counts as torch.profiler.schedule does): steps 12-21 are
recorded.  Step times compare medians over those steps (min-max spread), and
over the steps after the window (from window end + 2, when our device side
has closed) to the end: the target (README "Overhead") is the latter equal
to plain.

Then it prints one table (fixed columns) and, with --out, writes it as
Markdown for tests/bench/RESULTS.md:
  kernels per recorded step, torch.profiler vs trainprof;
  distinct kernel names and agreement both ways (share of torch.profiler's
  names present in ours and of ours present in torch.profiler's);
  GEMM FLOPs per step: torch's mm/addmm/bmm/baddbmm vs our cuBLAS/cuBLASLt
  cpu_op flops (aten::matmul is left out: it dispatches to those and has no
  formula of its own, so it would only double count);
  device-memory peak of our trace ("n/a" until memory events exist) vs
  torch.cuda.max_memory_reserved();
  step time while recording and after the window, with overhead vs plain;
  final loss of each run (bf16 kernels with atomics need not match exactly).

Exit status: 0 all ran; 1 the trainprof run failed or left no readable trace
while the plain run worked (a correctness failure: the profiler broke the job
or lost its output); 2 nothing comparable (no torch or no GPU, or the plain
run failed).  A failed torch.profiler run is reported and leaves its columns
n/a.  The torch import happens only inside the child processes, so this file
imports and compiles anywhere (tests/preload/test_nvcc.py renders the table
from synthetic results).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import gpu_validate_report as rep  # noqa: E402

SCHEDULE = dict(skip_first=10, wait=0, warmup=2, active=10, repeat=1)
MM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
MODES = ("plain", "torch", "trainprof")


def schedule_text(s=SCHEDULE):
    return ",".join("%s=%d" % (k, v) for k, v in s.items())


def window_steps(s=SCHEDULE):
    first = s["skip_first"] + s["wait"] + s["warmup"]
    return list(range(first, first + s["active"]))


def after_steps(nsteps, s=SCHEDULE):
    return list(range(window_steps(s)[-1] + 3, nsteps))


# ---- the child: one training run ------------------------------------------

def child(args):
    """Run the loop in this process in mode args.mode; write args.result."""
    import ctypes
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    res = {"mode": args.mode, "ok": False}

    def save():
        with open(args.result, "w") as f:
            json.dump(res, f)

    if not torch.cuda.is_available():
        res["error"] = "torch.cuda.is_available() is False"
        save()
        return 2
    torch.manual_seed(0)
    dev = torch.device("cuda")
    B, T, D, H, L = args.batch, args.seq, args.dim, args.heads, args.layers

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(16, 64, 3, padding=1)
            self.img_proj = nn.Linear(64, D)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.head = nn.Linear(D, D)

        def forward(self, x, img):
            c = F.relu(self.conv(img)).mean(dim=(2, 3))           # [B, 64]
            x = x + self.img_proj(c)[:, None, :]
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    model = Net().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(B, T, D, device=dev, generator=g)
    img = torch.randn(B, 16, 64, 64, device=dev, generator=g)
    target = torch.randn(B, T, D, device=dev, generator=g)

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x, img)
        loss = F.mse_loss(out.float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    step_api = None
    if args.mode == "trainprof":
        try:
            step_api = ctypes.CDLL(None).trainprof_step
            step_api.restype, step_api.argtypes = None, []
        except (AttributeError, OSError) as e:
            res["error"] = "trainprof_step not found (library not preloaded?): %s" % e
            save()
            return 1

    times, loss = [], None

    def run(after_step):
        nonlocal loss
        for _ in range(args.steps):
            t0 = time.perf_counter()
            loss = train_step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
            after_step()

    if args.mode == "torch":
        from torch.profiler import ProfilerActivity, profile, schedule
        trace_path = os.path.join(os.path.dirname(args.result), "torch.pt.trace.json")

        def ready(p):
            p.export_chrome_trace(trace_path)
            ka = p.key_averages()
            res["mm_flops_window"] = sum(e.flops or 0 for e in ka if e.key in MM_OPS)
            res["op_flops_window"] = {e.key: e.flops for e in ka if e.flops}
            res["trace"] = trace_path

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(**SCHEDULE), on_trace_ready=ready,
                     record_shapes=True, with_flops=True) as prof:
            run(prof.step)
    elif args.mode == "trainprof":
        run(step_api)
    else:
        run(lambda: None)

    res.update(ok=True, step_times_ms=times, loss=float(loss.item()),
               max_memory_reserved=torch.cuda.max_memory_reserved(),
               device=torch.cuda.get_device_name(0), torch=torch.__version__,
               active_steps=SCHEDULE["active"])
    save()
    return 0


# ---- the parent: three runs, one table -------------------------------------

def run_mode(mode, args, work):
    """Run one child; its result dict (with 'error' when it failed)."""
    d = os.path.join(work, mode)
    os.makedirs(d, exist_ok=True)
    result = os.path.join(d, "result.json")
    cmd = [sys.executable, os.path.realpath(__file__), "--mode", mode, "--result", result,
           "--steps", str(args.steps)]
    for k in ("batch", "seq", "dim", "heads", "layers"):
        cmd += ["--" + k, str(getattr(args, k))]
    # the caller's other TRAINPROF_* (e.g. TRAINPROF_CUPTI_PATH) are kept
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "TRAINPROF_STEP_ON", "TRAINPROF_SCHEDULE",
                        "TRAINPROF_FOLDER", "TRAINPROF_REPORTS", "TRAINPROF_FILENAME",
                        "TRAINPROF_ENABLED", "TRAINPROF_HANDLERS", "TRAINPROF_GZIP")}
    if mode == "trainprof":
        env.update(LD_PRELOAD=args.lib, TRAINPROF_STEP_ON="api",
                   TRAINPROF_SCHEDULE=schedule_text(), TRAINPROF_RUN_NAME="torch",
                   TRAINPROF_FOLDER=os.path.join(d, "traces"),
                   TRAINPROF_REPORTS=os.path.join(d, "reports"))
    sys.stderr.write("gpu_validate_torch: running %s (%d steps)\n" % (mode, args.steps))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=args.timeout)
        out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode("utf-8", "replace"), "timeout"
    with open(os.path.join(d, "output.txt"), "w") as f:
        f.write(out)
    res = {}
    if os.path.isfile(result):
        with open(result) as f:
            res = json.load(f)
    res["rc"], res["wall_s"] = rc, time.time() - t0
    if rc != 0 or not res.get("ok"):
        res["ok"] = False
        res.setdefault("error", "exit status %s; last output: %s"
                       % (rc, " | ".join(out.strip().splitlines()[-3:])))
    if mode == "trainprof" and res["ok"]:
        traces = sorted(glob.glob(os.path.join(d, "traces", "*.json*")))
        traces = [t for t in traces if not t.endswith(".tmp")]
        res["trace"] = traces[0] if traces else None
        if not traces:
            res["ok"] = False
            res["error"] = "no trace written under %s" % os.path.join(d, "traces")
    if res.get("trace"):
        try:
            res["analysis"] = rep.analyze(rep.load_trace(res["trace"]))
        except (OSError, ValueError) as e:
            res["ok"] = False
            res["error"] = "trace %s unreadable: %s" % (res["trace"], e)
    return res


def _stats(times, idx):
    xs = [times[i] for i in idx if i < len(times)]
    if not xs:
        return None
    return rep.median(xs), min(xs), max(xs)


def _fmt_time(st, base=None):
    if st is None:
        return "n/a"
    s = "%.2f ms [%.2f-%.2f]" % st
    if base is not None and base[0]:
        s += " %+.1f%%" % (100.0 * (st[0] - base[0]) / base[0])
    return s


def _ratio(a, b):
    return "n/a" if not a or not b else "%.3f" % (a / b)


def build_rows(results, nsteps):
    """Table rows [figure, plain, torch.profiler, trainprof, note] from the
    three result dicts (plain, torch, trainprof; missing or failed ones give
    n/a)."""
    pl, tp, ours = (results.get(m) or {} for m in MODES)
    ta, oa = tp.get("analysis"), ours.get("analysis")
    win, aft = window_steps(), after_steps(nsteps)
    nwin = len(win)
    rows = []

    tk = ta["kernels"] / max(1, len(ta["steps"]) or nwin) if ta else None
    ok_ = oa["kernels"] / max(1, len(oa["steps"])) if oa else None
    rows.append(["kernels / recorded step", "-", fmt(tk), fmt(ok_),
                 "equal expected" if tk is None or ok_ is None or tk == ok_
                 else "differ by %+.1f" % (ok_ - tk)])

    tn, on = set(ta["kernel_names"]) if ta else set(), set(oa["kernel_names"]) if oa else set()
    rows.append(["distinct kernel names", "-", str(len(tn)) if ta else "n/a",
                 str(len(on)) if oa else "n/a", ""])
    if ta and oa and tn and on:
        rows.append(["kernel name agreement", "-",
                     "%.1f%% of torch's in ours" % (100.0 * len(tn & on) / len(tn)),
                     "%.1f%% of ours in torch's" % (100.0 * len(tn & on) / len(on)), ""])
    else:
        rows.append(["kernel name agreement", "-", "n/a", "n/a", ""])

    tf = tp.get("mm_flops_window")
    tf = tf / nwin if tf is not None else None
    of = rep.per_step(oa["gemm_flops_per_step"]) if oa else None
    rows.append(["GEMM FLOPs / step", "-", rep.fmt_num(tf), rep.fmt_num(of),
                 "ratio trainprof/torch %s" % _ratio(of, tf)])

    rows.append(["memory peak", rep.fmt_num(pl.get("max_memory_reserved"), "B"),
                 rep.fmt_num(tp.get("max_memory_reserved"), "B"),
                 rep.fmt_num(oa.get("mem_peak") if oa else None, "B"),
                 "plain/torch: max_memory_reserved; trainprof: trace peak (max_memory_reserved %s)"
                 % rep.fmt_num(ours.get("max_memory_reserved"), "B")])

    base = _stats(pl.get("step_times_ms") or [], win)
    rows.append(["step time, recording (steps %d-%d)" % (win[0], win[-1]), _fmt_time(base),
                 _fmt_time(_stats(tp.get("step_times_ms") or [], win), base),
                 _fmt_time(_stats(ours.get("step_times_ms") or [], win), base),
                 "median [min-max], overhead vs plain"])
    if aft:
        base_a = _stats(pl.get("step_times_ms") or [], aft)
        rows.append(["step time, after window (steps %d-%d)" % (aft[0], aft[-1]),
                     _fmt_time(base_a),
                     _fmt_time(_stats(tp.get("step_times_ms") or [], aft), base_a),
                     _fmt_time(_stats(ours.get("step_times_ms") or [], aft), base_a),
                     "target: trainprof equal to plain"])
    rows.append(["final loss", fmt(pl.get("loss")), fmt(tp.get("loss")), fmt(ours.get("loss")),
                 "bf16 with atomics: close, not identical"])
    for m, r in zip(MODES, (pl, tp, ours)):
        if r and not r.get("ok"):
            rows.append(["%s run failed" % m, "", "", "", r.get("error", "")[:200]])
    return rows


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "%.6g" % v
    return str(v)


HEADERS = ["figure", "plain", "torch.profiler", "trainprof", "note"]


def render(results, nsteps, markdown=False):
    head = ""
    info = next((r for r in results.values() if r and r.get("device")), None)
    if info:
        head = "%s, torch %s, %d steps, schedule %s\n" % (info["device"], info.get("torch"),
                                                         nsteps, schedule_text())
        if markdown:
            head = "GPU validation (scripts/dev/gpu-validate): " + head + "\n"
    return head + rep.table(HEADERS, build_rows(results, nsteps), markdown)


def parent(args):
    work = os.path.realpath(args.workdir or tempfile.mkdtemp(prefix="gpu-validate-torch-"))
    os.makedirs(work, exist_ok=True)
    args.lib = os.path.realpath(args.lib)
    if not os.path.isfile(args.lib):
        sys.stderr.write("gpu_validate_torch: %s not found\n" % args.lib)
        return 2
    try:
        subprocess.run([sys.executable, "-c", "import torch"], check=True, timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        sys.stdout.write("gpu_validate_torch: PyTorch not importable by %s; skipped\n"
                         % sys.executable)
        return 2
    results = {m: run_mode(m, args, work) for m in MODES}
    text = render(results, args.steps)
    sys.stdout.write(text)
    for m in MODES:
        if results[m].get("ok") is False:
            sys.stdout.write("gpu_validate_torch: %s: %s (output in %s)\n"
                             % (m, results[m].get("error"), os.path.join(work, m, "output.txt")))
    if args.out:
        with open(args.out, "w") as f:
            f.write(render(results, args.steps, markdown=True))
        sys.stdout.write("gpu_validate_torch: Markdown table written to %s\n" % args.out)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    if not results["plain"].get("ok"):
        return 2
    return 0 if results["trainprof"].get("ok") else 1


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", default=os.path.join(HERE, "..", "..", "build", "libtrainprof.so"))
    p.add_argument("--out", help="also write the table as Markdown to this file")
    p.add_argument("--workdir", help="folder for the runs' outputs (default: a new temp folder)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--timeout", type=float, default=180, help="seconds per run")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.steps <= window_steps()[-1]:
        p.error("--steps must be more than %d (the schedule records steps %d-%d)"
                % (window_steps()[-1], window_steps()[0], window_steps()[-1]))
    return a


def main(argv):
    args = parse_args(argv)
    if args.mode:
        return child(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
