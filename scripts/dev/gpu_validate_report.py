#!/usr/bin/env python3
"""gpu_validate_report - what a trace holds, for scripts/dev/gpu-validate.

  gpu_validate_report.py TRACE...     print the per-trace counts below

DESIGN
Reads a trace of ours or of torch.profiler (Kineto's Chrome JSON; gzip or
plain, told by magic) and reduces it to the figures gpu-validate compares:

- recorded steps (`ProfilerStep#N`);
- host launches: `cuda_runtime`/`cuda_driver` events that launch a kernel
  (a launch entry point, or a `kernel` argument, which only ours have), by
  layer (event name) and by kernel name;
- GPU kernels (cat `kernel`), by name and per step (a kernel belongs to the
  step of the host event with its correlation id);
- links: kernels whose correlation id is that of a host launch, launches
  whose correlation id some kernel has, `ac2g` flows, and whether the kernel
  name our launch event carries agrees with the kernel's (names compared after
  demangling `_Z` names with c++filt and collapsing white space);
- FLOPs per step: the sum of cpu_op `flops` inside each ProfilerStep, all
  library calls and the cuBLAS/cuBLASLt ones (GEMMs) apart;
- the device-memory peak (`Total Reserved`, else `Total Allocated`, of the
  `[memory]` instants, and the `GPU N memory reserved` counters' levels;
  None when the trace has neither), and the trace's
  `trainprof` metadata (coverage, step signal) when present.

Python standard library only, so that it runs on a GPU machine with nothing
but PyTorch installed.  tests/preload/test_nvcc.py runs it on traces made
against the fake runtime and on a synthetic trace.
"""

import collections
import gzip
import json
import re
import shutil
import subprocess
import sys

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
HOST_CATS = ("cuda_runtime", "cuda_driver")
LAUNCH_RE = re.compile(r"(^|_)(cuda|cu)(Launch|GraphLaunch)|^__cudaLaunchKernel")
GEMM_RE = re.compile(r"^cublas", re.I)


def load_trace(path):
    """A parsed trace (dict) from a gzip or plain JSON file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data.decode("utf-8"))


_demangled = {}


def demangle_all(names):
    """Fill the demangling cache for `names` with one c++filt call (names
    not starting with _Z, or no c++filt, are kept as they are)."""
    todo = sorted({n for n in names if n.startswith("_Z") and n not in _demangled})
    if not todo:
        return
    out = None
    if shutil.which("c++filt"):
        try:
            p = subprocess.run(["c++filt"], input="\n".join(todo) + "\n", stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
            out = p.stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            out = None
    for i, n in enumerate(todo):
        _demangled[n] = out[i] if out is not None and i < len(out) and out[i] else n


def norm_name(name):
    """A kernel name for comparison: demangled, white space collapsed."""
    name = name or ""
    if name.startswith("_Z"):
        demangle_all([name])
        name = _demangled.get(name, name)
    return " ".join(name.split())


def is_launch(ev):
    """Whether a host event launches work on the GPU."""
    if ev.get("cat") not in HOST_CATS or ev.get("ph") != "X":
        return False
    return "kernel" in (ev.get("args") or {}) or bool(LAUNCH_RE.search(ev.get("name", "")))


def _corr(ev):
    c = (ev.get("args") or {}).get("correlation")
    return c if isinstance(c, int) else None


def _step_of(ts, pid, step_spans):
    for n, s in step_spans:
        if s.get("pid") == pid and s["ts"] <= ts <= s["ts"] + s.get("dur", 0) + 1e-3:
            return n
    return None


def analyze(trace):
    """The figures of one parsed trace, as a dict (see the module comment)."""
    evs = trace.get("traceEvents", [])
    # host-side step spans only: Kineto repeats them on the GPU tracks
    # (cat gpu_user_annotation); the first per step wins
    spans = {}
    for e in evs:
        m = STEP_RE.match(e.get("name", "")) if e.get("ph") == "X" else None
        if m and e.get("cat") != "gpu_user_annotation":
            spans.setdefault(int(m.group(1)), e)
    step_spans = sorted(spans.items(), key=lambda p: p[0])
    steps = [n for n, _ in step_spans]
    host = [e for e in evs if e.get("ph") == "X" and e.get("cat") in HOST_CATS]
    launches = [e for e in host if is_launch(e)]
    kernels = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel"]
    demangle_all([(e.get("args") or {}).get("kernel", "") for e in launches] +
                 [e.get("name", "") for e in kernels])

    host_by_corr = {}
    for e in host:
        c = _corr(e)
        if c is not None:
            host_by_corr.setdefault(c, e)
    launch_corr = {_corr(e) for e in launches} - {None}
    # kernels launched before the window and still running in it (CUPTI
    # numbers calls in order: below every host call of the window) are not
    # this window's work: shown in the trace, not counted here, as trainprof's
    # own coverage does
    first = min((c for c in host_by_corr if c < 1 << 32), default=None)
    kernels = [k for k in kernels
               if first is None or _corr(k) is None or not 0 < _corr(k) < first]
    kernel_corr = collections.Counter(_corr(e) for e in kernels)

    linked = 0
    named = agree = 0
    mismatches = []
    kernels_per_step = collections.Counter()
    for k in kernels:
        c = _corr(k)
        h = host_by_corr.get(c) if c is not None else None
        if h is None:
            continue
        linked += 1
        st = _step_of(h["ts"], h.get("pid"), step_spans)
        if st is not None:
            kernels_per_step[st] += 1
        hn = (h.get("args") or {}).get("kernel")
        if hn is not None:
            named += 1
            if norm_name(hn) == norm_name(k.get("name")):
                agree += 1
            elif len(mismatches) < 5:
                mismatches.append((hn, k.get("name")))

    flops = {n: 0 for n in steps}
    gemm_flops = {n: 0 for n in steps}
    for e in evs:
        if e.get("ph") != "X" or e.get("cat") != "cpu_op":
            continue
        f = (e.get("args") or {}).get("flops")
        if not isinstance(f, (int, float)) or f <= 0:
            continue
        st = _step_of(e["ts"], e.get("pid"), step_spans)
        if st is None:
            continue
        flops[st] += f
        if GEMM_RE.match(e.get("name", "")):
            gemm_flops[st] += f

    mem_peak = None
    for e in evs:
        a = e.get("args") or {}
        if e.get("name") == "[memory]":
            v = a.get("Total Reserved", a.get("Total Allocated"))
        elif e.get("ph") == "C" and re.match(r"GPU \d+ memory reserved$", e.get("name", "")):
            # the track's level at the window's start and end: a window in
            # which the caching allocator allocates nothing has no [memory]
            # instant (an H100 torch run: "n/a" where 4.40 GiB were held)
            v = a.get("bytes")
        else:
            continue
        if isinstance(v, (int, float)) and (mem_peak is None or v > mem_peak):
            mem_peak = v

    meta = trace.get("trainprof") or {}
    return {
        "steps": steps,
        "host_launches": len(launches),
        "launch_layers": dict(collections.Counter(e.get("name") for e in launches)),
        "launch_names": dict(collections.Counter(norm_name((e.get("args") or {}).get("kernel"))
                                                 for e in launches
                                                 if "kernel" in (e.get("args") or {}))),
        "kernels": len(kernels),
        "kernel_names": dict(collections.Counter(norm_name(e.get("name")) for e in kernels)),
        "kernels_per_step": {n: kernels_per_step.get(n, 0) for n in steps},
        "kernels_linked": linked,
        "launches_with_kernel": len(launch_corr & set(kernel_corr)),
        "names_compared": named,
        "names_agree": agree,
        "name_mismatches": mismatches,
        "flows": sum(1 for e in evs if e.get("cat") == "ac2g" and e.get("ph") == "s"),
        "flops_per_step": flops,
        "gemm_flops_per_step": gemm_flops,
        "mem_peak": mem_peak,
        "coverage": meta.get("coverage"),
        "step_signal": meta.get("step_signal"),
        "devices": [d.get("name") for d in trace.get("deviceProperties") or []
                    if isinstance(d, dict)],
    }


def fully_covered(a):
    """Every GPU kernel linked to a host launch and every launch to a kernel
    (False when there are no kernels at all: nothing was seen on the GPU)."""
    return (a["kernels"] > 0 and a["kernels_linked"] == a["kernels"]
            and a["launches_with_kernel"] == a["host_launches"])


def per_step(d):
    """Mean of a {step: value} dict over its steps (0 when empty)."""
    return sum(d.values()) / len(d) if d else 0


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def fmt_num(v, unit=""):
    """A short human number: 1.23G, 45.6M, 7 (None -> n/a)."""
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    for div, suf in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return "%.3g%s%s" % (v / div, suf, unit)
    return ("%d%s" % (v, unit)) if float(v).is_integer() else ("%.3g%s" % (v, unit))


def table(headers, rows, markdown=False):
    """rows (lists of str) under headers, as fixed columns or a Markdown table."""
    rows = [[str(c) for c in r] for r in rows]
    if markdown:
        rows = [[c.replace("|", "\\|") for c in r] for r in rows]
        out = ["| " + " | ".join(headers) + " |",
               "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out) + "\n"
    w = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h))
         for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w[i]) for i, c in enumerate(cells)).rstrip()
    out = [line(headers), line(["-" * x for x in w])] + [line(r) for r in rows]
    return "\n".join(out) + "\n"


def describe(path, a):
    """Plain-text lines describing one analysed trace."""
    pct = lambda x, n: "%d/%d" % (x, n)
    lines = ["%s:" % path,
             "  steps recorded:        %s" % (",".join(map(str, a["steps"])) or "none"),
             "  step signal:           %s" % (a["step_signal"] or "n/a"),
             "  host launches:         %d %s" % (a["host_launches"],
                                                 json.dumps(a["launch_layers"], sort_keys=True)),
             "  GPU kernels:           %d" % a["kernels"],
             "  kernels linked:        %s (launches with a kernel %s, ac2g flows %d)"
             % (pct(a["kernels_linked"], a["kernels"]),
                pct(a["launches_with_kernel"], a["host_launches"]), a["flows"]),
             "  kernel names agree:    %s" % pct(a["names_agree"], a["names_compared"]),
             "  fully covered:         %s" % ("yes" if fully_covered(a) else "no"),
             "  coverage (metadata):   %s" % (json.dumps(a["coverage"]) if a["coverage"]
                                               is not None else "n/a"),
             "  library FLOPs/step:    %s" % fmt_num(per_step(a["flops_per_step"])),
             "  GEMM FLOPs/step:       %s" % fmt_num(per_step(a["gemm_flops_per_step"])),
             "  memory peak:           %s" % fmt_num(a["mem_peak"], "B")]
    for hn, kn in a["name_mismatches"]:
        lines.append("  name mismatch:         launch %r, kernel %r" % (hn, kn))
    names = a["launch_names"] or a["kernel_names"]
    for n, c in sorted(names.items(), key=lambda p: (-p[1], p[0]))[:20]:
        lines.append("  %6d  %s" % (c, n))
    return "\n".join(lines) + "\n"


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write(__doc__.split("\n\n")[0] + "\n")
        return 0 if argv else 2
    rc = 0
    for path in argv:
        try:
            a = analyze(load_trace(path))
        except (OSError, ValueError) as e:
            sys.stderr.write("gpu_validate_report: %s: %s\n" % (path, e))
            rc = 1
            continue
        sys.stdout.write(describe(path, a))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
