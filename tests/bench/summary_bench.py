#!/usr/bin/env python3
"""summary_bench - how fast `trainprof summary` reads a big job.

  tests/bench/summary_bench.py files [N]        N summary.json files (default
                                                4096), then `trainprof summary`
                                                over their folder, 3 times
  tests/bench/summary_bench.py trace [MB]       a generated gzip trace of about
                                                MB MiB (default 200), then the
                                                streaming trace summary: time
                                                and peak memory (ru_maxrss)

The summary.json files are realistic: the handler's schema, 8 steps, 20
rows in the kernel and operator tables with long template names, 10 in the
others, a memory row and two collective rows, one rank slowed by 30%; about
7 KiB each, like a real window's.  The trace repeats a step of a
data-parallel job (launches, library calls with FLOPs, operators, an NCCL
call, kernels and copies on two streams, memory instants) with moving
timestamps, in our writer's layout (one event per line).  Python standard
library only; prints the figures, asserts nothing.
"""

import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINPROF = os.path.join(ROOT, "scripts", "trainprof")
KERNEL = ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8"
          "<float, cutlass::arch::Sm80, %d>>(Params)")


def summary_doc(rank, world, slow):
    steps = []
    start = 1_700_000_000_000_000_000
    for i in range(8):
        wall = int(100_000_000 * (1.3 if rank == slow else 1.0) * (1 + 0.01 * ((rank * 7 + i) % 5)))
        steps.append({"step": 10 + i, "wall_ns": wall, "flops": 40_000_000_000_000,
                      "tflops_per_s": 40_000_000_000_000 / wall / 1e3, "gpu_busy_ns": wall * 8 // 10})
    wall = sum(s["wall_ns"] for s in steps)

    def table(n, fmt, extra):
        top = [dict({"name": fmt % k, "calls": 1000 - k, "total_ns": 10_000_000 - k * 1000}, **extra)
               for k in range(n)]
        return {"distinct": n + 17, "calls": 50_000, "total_ns": 300_000_000, "top": top}

    return {
        "schema": "trainprof.summary/1", "trace": "rank%d.18.pt.trace.json.gz" % rank,
        "run": "bench", "rank": rank, "local_rank": rank % 8, "world_size": world,
        "local_world_size": 8, "node_rank": rank // 8, "host": "node%04d" % (rank // 8),
        "pid": 1000 + rank, "program": "python3",
        "window": {"batch": 18, "first_step": 10, "last_step": 17, "steps_recorded": 8,
                   "step_signal": "api", "partial": False, "partial_reason": None,
                   "start_ns": start, "end_ns": start + wall},
        "steps": steps,
        "totals": {"steps": 8, "wall_ns": wall, "mean_step_ns": wall // 8, "flops": 320_000_000_000_000,
                   "tflops_per_s": 320_000_000_000_000 / wall / 1e3, "peak_tflops": 989.0,
                   "mfu_like": 320_000_000_000_000 / wall / 1e3 / 989.0, "gpu_busy_ns": wall * 8 // 10,
                   "gpu_busy_share": 0.8, "window_flops": 320_000_000_000_000,
                   "library_flops": 320_000_000_000_000, "graph_flops": 0},
        "host_launch_count": 50_000, "host_api_ns": 300_000_000, "gpu_ns": wall * 8 // 10,
        "gpu_work": table(20, KERNEL, {"max_ns": 20_000}),
        "launches": table(20, KERNEL, {}),
        "operators": table(20, "aten::op_%d", {"self_ns": 1_000_000, "gpu_ns": 2_000_000}),
        "library_calls": table(10, "cublasLtMatmul_%d", {"flops": 1_000_000_000}),
        "api_calls": table(10, "cudaLaunchKernel_%d", {"max_ns": 20_000}),
        "memory": [{"device": rank % 8, "class": "device", "where": "GPU%d" % (rank % 8),
                    "start_bytes": 40 << 30, "peak_bytes": 70 << 30, "peak_at_ns": start + 5,
                    "end_bytes": 40 << 30, "process_peak_bytes": 71 << 30, "allocs": 100, "frees": 100,
                    "failed": 0, "largest_failed_bytes": 0}],
        "collectives": {"basis": "device", "captured_calls": 0, "rows": [
            {"kind": "allreduce", "ranks": world, "calls": 80, "bytes": 8e9, "time_ns": 80_000_000 + rank,
             "host_ns": 1_000_000, "device_ns": 80_000_000 + rank, "basis": "device",
             "algbw_gbps": 100.0, "busbw_gbps": 199.9},
            {"kind": "allgather", "ranks": 8, "calls": 16, "bytes": 1e9, "time_ns": 10_000_000,
             "host_ns": 100_000, "device_ns": 10_000_000, "basis": "device",
             "algbw_gbps": 100.0, "busbw_gbps": 87.5}],
            "calls": 96, "bytes": 9e9, "time_ns": 90_000_000 + rank},
        "events": {"records": 400_000, "dropped": 0, "late": 0, "device_dropped": 0, "incomplete": False},
        "gpu": True, "gpu_activity": "active (CUPTI 130001)",
        "coverage": {"host_launches": 50_000, "gpu_kernels": 50_000, "gpu_kernels_linked": 50_000,
                     "ratio": 1},
    }


def bench_files(n):
    d = tempfile.mkdtemp(prefix="tp-sumbench-")
    rep = os.path.join(d, "bench", "reports")
    os.makedirs(rep)
    size = 0
    for r in range(n):
        text = json.dumps(summary_doc(r, n, slow=n // 3), indent=1)
        size += len(text)
        with open(os.path.join(rep, "rank%d.18.pt.trace.summary.json" % r), "w") as f:
            f.write(text)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, TRAINPROF, "summary", os.path.join(d, "bench")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t0)
        assert p.returncode == 0, p.stderr
    last = p.stdout.decode().strip().splitlines()[-1]
    print("%d summary.json files (%.1f KiB each): trainprof summary %.2f s median of 3 (%s); %s"
          % (n, size / n / 1024, statistics.median(times), ", ".join("%.2f" % t for t in times), last))


def step_lines(step, t0, pid):
    """One step of a DDP job as trace lines (ts in us)."""
    out = []
    t = t0
    out.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %d, "tid": %d, '
               '"ts": %.3f, "dur": %.3f, "args": {"External id": %d}},' % (step, pid, pid, t, 9000.0, 1 << 48))
    corr = step * 1000
    for k in range(200):
        c = corr + k
        ts = t + k * 40
        out.append('{"ph": "X", "cat": "cpu_op", "name": "aten::op_%d", "pid": %d, "tid": %d, "ts": %.3f, '
                   '"dur": 30.125, "args": {"External id": %d, "Record function id": %d, "Input Dims": '
                   '[[4096, 4096], [4096, 4096]]}},' % (k % 40, pid, pid, ts, c, c))
        out.append('{"ph": "X", "cat": "cpu_op", "name": "cublasLtMatmul", "pid": %d, "tid": %d, "ts": %.3f, '
                   '"dur": 12.500, "args": {"External id": %d, "flops": 137438953472, "precision": "bf16"}},'
                   % (pid, pid, ts + 2, c))
        out.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": %d, "tid": %d, '
                   '"ts": %.3f, "dur": 4.250, "args": {"correlation": %d, "External id": %d, "cbid": 211, '
                   '"kernel": "%s", "grid": [132, 1, 1], "block": [256, 1, 1], "shared memory": 49152, '
                   '"cuda stream": 7}},' % (pid, pid, ts + 5, c, c, KERNEL % (k % 30)))
        out.append('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %.3f, "dur": 35.000, '
                   '"args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": 7, '
                   '"correlation": %d, "registers per thread": 168, "shared memory": 49152, '
                   '"blocks per SM": 1.0, "warps per SM": 8.0, "grid": [132, 1, 1], "block": [256, 1, 1], '
                   '"est. achieved occupancy %%": 12}},' % (KERNEL % (k % 30), ts + 10, c, c))
        if k % 50 == 0:
            out.append('{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": %d, '
                       '"tid": %d, "ts": %.3f, "args": {"Device Type": 1, "Device Id": 0, "Addr": %d, '
                       '"Bytes": 1048576, "Total Allocated": %d, "Total Reserved": %d}},'
                       % (pid, pid, ts, 140000000000 + k, (40 << 30) + k, (40 << 30) + k))
    out.append('{"ph": "X", "cat": "cpu_op", "name": "ncclAllReduce", "pid": %d, "tid": %d, "ts": %.3f, '
               '"dur": 3.000, "args": {"External id": %d, "Collective name": "allreduce", "In msg nelems": '
               '65536000, "Out msg nelems": 65536000, "Group size": 8, "dtype": "BFloat16", '
               '"busbw factor": 1.75}},' % (pid, pid, t + 8100, corr + 999))
    out.append('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, '
               '"tid": 9, "ts": %.3f, "dur": 100.000, "args": {"External id": %d, "device": 0, '
               '"stream": 9, "correlation": %d, "bytes": 8388608}},' % (t + 50, corr, corr))
    return "\n".join(out) + "\n"


def make_trace(path, mb):
    header = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "distributedInfo": {"backend": "nccl", '
              '"rank": 0, "world_size": 8},\n  "trainprof": {"version": "0.1.0", "configuration": '
              '{"TRAINPROF_RUN_NAME": "bench"}, "step_signal": "api", "steps_recorded": %d, "first_step": 0, '
              '"last_step": %d, "batch": %d, "partial": false, "partial_reason": null, "records": 0, '
              '"dropped_events": 0, "late_events": 0, "flops": 0, "gpu_activity": "active (CUPTI 130001)", '
              '"coverage": {"launches_seen_by_wrappers": 0, "kernels_seen_by_cupti": 0, '
              '"kernels_linked_to_launches": 0, "ratio": 1, "device_records": 0, '
              '"device_records_dropped": 0}, "steps": [%s]},\n  "displayTimeUnit": "ms",\n'
              '  "baseTimeNanoseconds": 1700000000000000000,\n  "traceEvents": [\n')
    target = mb << 20
    # how many steps: write until the compressed size reaches the target
    with open(path + ".body", "wb") as raw:
        gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0)
        step = 0
        events = 0
        while raw.tell() < target:
            text = step_lines(step, 1000.0 + step * 10000.0, 4242)
            events += text.count("\n")
            gz.write(text.encode())
            step += 1
        gz.write(b'{"ph": "M", "name": "process_labels", "pid": 4242, "tid": 0, "args": {"labels": "CPU"}}\n'
                 b'  ],\n  "traceName": "bench"\n}\n')
        gz.close()
    steps = ", ".join('{"step": %d, "wall_ms": 9, "flops": 27487790694400, "tflops_per_s": 3054}' % i
                      for i in range(step))
    with open(path, "wb") as out:
        hz = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0)
        hz.write((header % (step, step - 1, step, steps)).encode())
        hz.close()
        with open(path + ".body", "rb") as body:
            while True:
                b = body.read(1 << 20)
                if not b:
                    break
                out.write(b)          # a second gzip member: gzip readers concatenate them
    os.unlink(path + ".body")
    return step, events


def bench_trace(mb):
    d = tempfile.mkdtemp(prefix="tp-sumbench-")
    path = os.path.join(d, "rank0.1.pt.trace.json.gz")
    t0 = time.perf_counter()
    steps, events = make_trace(path, mb)
    gen = time.perf_counter() - t0
    size = os.path.getsize(path)
    code = ("import resource, sys, time; sys.path.insert(0, %r); from trainprof_cli import summary as s; "
            "t = time.perf_counter(); d = s.summarize_trace(%r); t = time.perf_counter() - t; "
            "print(t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, d['totals']['steps'], "
            "d['gpu_work']['calls'])" % (os.path.join(ROOT, "scripts"), path))
    base = subprocess.run([sys.executable, "-c", "import resource, json, gzip, codecs; "
                           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                          stdout=subprocess.PIPE, check=True).stdout.split()
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, check=True)
    t, rss, nsteps, kernels = p.stdout.split()
    print("trace %.1f MiB gzip (%d steps, %d events; generated in %.0f s): streaming summary %.1f s "
          "(%.1f MiB/s of gzip), peak RSS %.0f MiB (interpreter alone %.0f MiB); %s steps, %s device events"
          % (size / 2**20, steps, events, gen, float(t), size / 2**20 / float(t), int(rss) / 1024,
             int(base[0]) / 1024, nsteps, kernels))
    os.unlink(path)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "files"
    if what == "files":
        bench_files(int(sys.argv[2]) if len(sys.argv) > 2 else 4096)
    elif what == "trace":
        bench_trace(int(sys.argv[2]) if len(sys.argv) > 2 else 200)
    else:
        sys.exit("usage: summary_bench.py files [N] | trace [MB]")
