#!/usr/bin/env python3
"""gen_trace.py - a large trace in trainprof's layout, for `trainprof merge` timings.

usage: gen_trace.py OUT.json.gz --mb 200 [--rank R] [--world W] [--seed S]

Writes a gzip trace of about MB megabytes (compressed) laid out as
handlers/chrome.c writes it: the header keys (chrome_header.c: distributedInfo, trainprof
with its clock triples), then one event per line: per step a ProfilerStep,
aten/cuBLAS cpu_ops, cudaLaunchKernel runtime calls with correlation, cbid
and launch details, their kernels on device 0's streams with Kineto's
kernel args, ac2g flow starts and ends, memcpys, syncs, [memory] instants
and counters; thread and process metadata at the end.  Numbers vary as in a
real run (jittered durations, growing correlation ids and addresses, a few
hundred kernel names), so gzip compresses it as it does a real trace.
Python standard library only; gzip level 1 as the library writes.
"""

import argparse
import gzip
import json
import random
import time

KERNEL_BASES = [
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_%dx%d_16x4_nn_align%d>(Params)",
    "ampere_sgemm_%dx%d_nn_%d",
    "void at::native::vectorized_elementwise_kernel<%d, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, %d> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, %d>)",
    "void at::native::reduce_kernel<%d, %d, at::native::ReduceOp<float, at::native::MeanOps<float, float>, "
    "unsigned int, float, %d> >(at::native::ReduceOp<float>)",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*) /* %d %d %d */",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<%d, %d, %d, 4, false, false, cutlass::half_t> >(Params)",
]
OPS = ["aten::linear", "aten::addmm", "aten::relu", "aten::layer_norm", "aten::softmax",
       "aten::matmul", "aten::add_", "aten::mul", "aten::dropout", "aten::gelu", "aten::mm",
       "aten::bmm", "aten::_foreach_add_", "aten::copy_", "aten::empty"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed + a.rank)
    kernels = [b % tuple(rnd.choice([32, 64, 128, 256]) for _ in range(b.count("%d")))
               for b in KERNEL_BASES for _ in range(40)]
    pid = 40000 + a.rank
    tid = pid
    base = 1795233648000000000 // (7889238 * 10**9) * (7889238 * 10**9)
    now = time.time_ns()
    mono = 10**13 + a.rank * 1000
    start = now - base
    header = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": a.rank, "world_size": a.world},
        "trainprof": {"version": "0.1.0", "clock": {
            "source": "tsc", "ns_per_tick": 0.3571428571, "host": "bench", "boot_id": "bench-%d" % a.rank,
            "start": {"tick": 10**12, "realtime_ns": now, "monotonic_ns": mono, "bracket_ns": 60,
                      "trace_ns": now + 12},
            "end": {"tick": 10**12 + 10**9, "realtime_ns": now + 10**9, "monotonic_ns": mono + 10**9,
                    "bracket_ns": 60, "trace_ns": now + 10**9 + 9}}},
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base,
    }
    target = int(a.mb * 1e6)
    raw = open(a.out, "wb")
    f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1)
    f.write(b"{\n" + b"".join(b"  %s: %s,\n" % (json.dumps(k).encode(), json.dumps(v).encode())
                              for k, v in header.items()) + b'  "traceEvents": [')
    t = start // 1000 * 1000
    corr = 1
    ext = 1
    addr = 0x7f0000000000
    step = 0
    first = True
    lines = []

    def us(ns):
        return "%d.%03d" % (ns // 1000, ns % 1000)

    while raw.tell() < target:
        step_start = t
        for _ in range(40):
            op = rnd.choice(OPS)
            op_t = t
            t += rnd.randint(2000, 9000)
            ext += 1
            for _ in range(rnd.randint(1, 3)):
                k = rnd.choice(kernels)
                rt = t
                rdur = rnd.randint(3000, 12000)
                corr += 1
                lines.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": %d, '
                             '"tid": %d, "ts": %s, "dur": %s, "args": {"External id": %d, "cbid": 211, '
                             '"correlation": %d, "cuda stream": 7, "grid": [%d, 1, 1], "block": [%d, 1, 1]}}'
                             % (pid, tid, us(rt), us(rdur), ext, corr, rnd.randint(1, 4096),
                                rnd.choice([128, 256, 512])))
                lines.append('{"ph": "s", "cat": "ac2g", "name": "ac2g", "pid": %d, "tid": %d, "ts": %s, '
                             '"id": %d}' % (pid, tid, us(rt), corr))
                kt = rt + rnd.randint(5000, 40000)
                kd = rnd.randint(2000, 300000)
                stream = 7 if "nccl" not in k else 13
                lines.append('{"ph": "X", "cat": "kernel", "name": %s, "pid": 0, "tid": %d, "ts": %s, '
                             '"dur": %s, "args": {"External id": %d, "queued": 0, "device": 0, '
                             '"context": 1, "stream": %d, "correlation": %d, "registers per thread": %d, '
                             '"shared memory": %d, "blocks per SM": %.6f, "warps per SM": %.6f, '
                             '"grid": [%d, 1, 1], "block": [%d, 1, 1], "est. achieved occupancy %%": %d}}'
                             % (json.dumps(k), stream, us(kt), us(kd), ext, stream, corr,
                                rnd.randint(16, 255), rnd.choice([0, 1024, 49152]),
                                rnd.random() * 8, rnd.random() * 64, rnd.randint(1, 4096),
                                rnd.choice([128, 256, 512]), rnd.randint(5, 100)))
                lines.append('{"ph": "f", "bp": "e", "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": %d, '
                             '"ts": %s, "id": %d}' % (stream, us(kt), corr))
                t += rdur + rnd.randint(500, 3000)
            if rnd.random() < 0.2:
                addr += rnd.randint(1, 1 << 20) * 512
                lines.append('{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", '
                             '"pid": %d, "tid": %d, "ts": %s, "args": {"Device Type": 1, "Device Id": 0, '
                             '"Addr": %d, "Bytes": %d, "Total Allocated": %d, "Total Reserved": %d}}'
                             % (pid, tid, us(t), addr, rnd.randint(512, 1 << 26), addr & 0xffffffff,
                                (addr & 0xffffffff) + (1 << 30)))
            lines.append('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d, "ts": %s, '
                         '"dur": %s, "args": {"External id": %d, "Input Dims": [[%d, %d], [%d, %d]], '
                         '"Input type": ["float", "float"], "flops": %d}}'
                         % (op, pid, tid, us(op_t), us(t - op_t), ext, rnd.randint(1, 8192),
                            rnd.randint(1, 8192), rnd.randint(1, 8192), rnd.randint(1, 8192),
                            rnd.randint(0, 1 << 40)))
        lines.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %d, "tid": %d, '
                     '"ts": %s, "dur": %s, "args": {"External id": %d}}'
                     % (step, pid, tid, us(step_start), us(t - step_start), (1 << 48) + step))
        lines.append('{"ph": "C", "cat": "trainprof", "name": "TFLOP/s", "pid": %d, "tid": %d, "ts": %s, '
                     '"args": {"TFLOP/s": %.3f}}' % (pid, tid, us(t), rnd.random() * 400))
        step += 1
        text = (",\n".join(lines)).encode()
        f.write((b"\n" if first else b",\n") + text)
        first = False
        lines = []
    meta = []
    for p, label in ((pid, "CPU"), (0, "GPU 0")):
        meta.append('{"ph": "M", "name": "process_name", "pid": %d, "tid": 0, "ts": %s, "args": {"name": "python3"}}'
                    % (p, us(start)))
        meta.append('{"ph": "M", "name": "process_labels", "pid": %d, "tid": 0, "ts": %s, "args": {"labels": "%s"}}'
                    % (p, us(start), label))
        meta.append('{"ph": "M", "name": "process_sort_index", "pid": %d, "tid": 0, "ts": %s, '
                    '"args": {"sort_index": %d}}' % (p, us(start), p if p else 0x1000000))
    for s in (7, 13):
        meta.append('{"ph": "M", "name": "thread_name", "pid": 0, "tid": %d, "ts": %s, "args": {"name": "stream %d "}}'
                    % (s, us(start), s))
    meta.append('{"ph": "M", "name": "thread_name", "pid": %d, "tid": %d, "ts": %s, "args": {"name": "thread %d (python3)"}}'
                % (pid, tid, us(start), tid))
    f.write(b",\n" + ",\n".join(meta).encode() + b'\n  ],\n  "traceName": "bench.json.gz"\n}\n')
    f.close()
    raw.close()


if __name__ == "__main__":
    main()
