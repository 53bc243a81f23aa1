#!/usr/bin/env python3
"""torch_parity_table.py - `trainprof run` against torch.profiler, per step,
as a table.

Runs each of tests/programs/torch_four.py's programs under `trainprof run
--record-shapes` and under torch.profiler with the same schedule (the runs
and the comparisons of tests/preload/torchparity.py, which
tests/preload/test_torch_parity.py asserts on) and prints, per recorded step:

  ops         cpu_op events in the step, ours/torch's
  names       whether the multisets of operator names are equal
  annots      user_annotation events (less the step), ours/torch's, and = if
              their names agree
  nesting     problems in our step's tree (0: every event inside the step,
              no partial overlap); the model's line counts events of ours
              inside no step or several
  dims        operators whose Input Dims equal torch's / operators compared
  seq         operators whose Sequence number (relative to the step's
              first) equals torch's / operators where torch has one
  flows       fwdbwd flows, ours/torch's, and = if the (forward op,
              backward op) pairs agree

Usage (from the repository root, with the test venv's Python):
  build/venv/bin/python tests/bench/torch_parity_table.py [MODEL ...]
  build/venv/bin/python tests/bench/torch_parity_table.py --traces OURS.json TORCH.json
Set TP_TEST_BUILD for a build folder other than build/ (the library used).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "preload"))
import torchparity as tp  # noqa: E402

HEAD = ("model", "step", "ops", "names", "annots", "nesting", "dims", "seq", "flows")


def rows(model, ours, theirs):
    p = tp.Pair(ours, theirs)
    out = []
    for n in p.steps:
        names = "=" if not p.names(n) else "DIFF"
        ao, at = len(tp.annotations(p.bo[n])), len(tp.annotations(p.bt[n]))
        dp, dc = p.dims(n)
        sp, _ = p.sequence(n)
        want = len(tp.sequence_numbers(p.bt[n]))
        have = tp.sequence_numbers(p.bo[n])
        same = sum(1 for k, v in tp.sequence_numbers(p.bt[n]).items() if have.get(k) == v)
        fp, fo, ft = p.flows(n)
        out.append((model, str(n), "%d/%d" % (len(tp.ops(p.bo[n])), len(tp.ops(p.bt[n]))), names,
                    "%d/%d %s" % (ao, at, "=" if not p.annotations(n) else "DIFF"),
                    str(len(p.nesting(n))), "%d/%d" % (dc - len(dp), dc),
                    "%d/%d%s" % (same, want, "" if not sp else " DIFF"),
                    "%d/%d %s" % (fo, ft, "=" if not fp else "DIFF")))
    return out, p


def notes(model, p):
    out = []
    out += p.step_problems()
    out.append("events of ours inside no step or several: %d" % len(p.stray_ours))
    out += p.flow_pairs()[2][:3]
    so = {k: e["args"].get("Sequence number") for n in p.steps
          for k, e in tp.occurrences(tp.ops(p.bo[n])).items()}
    st = {k: e["args"].get("Sequence number") for n in p.steps
          for k, e in tp.occurrences(tp.ops(p.bt[n])).items()}
    both = [k for k in st if st[k] is not None and so.get(k) is not None]
    if both:
        same = sum(1 for k in both if so[k] == st[k])
        out.append("absolute Sequence numbers equal on %d of %d" % (same, len(both)))
    return ["%s: %s" % (model, x) for x in out]


def table(all_rows):
    w = [max(len(r[i]) for r in [HEAD] + all_rows) for i in range(len(HEAD))]
    line = lambda r: "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |"
    print(line(HEAD))
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in all_rows:
        print(line(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=list(tp.MODELS))
    ap.add_argument("--traces", nargs=2, metavar=("OURS", "TORCH"))
    a = ap.parse_args()
    all_rows, all_notes = [], []
    if a.traces:
        r, p = rows("-", tp.load(a.traces[0]), tp.load(a.traces[1]))
        all_rows += r
        all_notes += notes("-", p)
    for model in ([] if a.traces else a.models):
        (po, _, to), (pt, _, tt) = tp.run_both(model)
        if po.returncode or pt.returncode or len(to) != 1 or len(tt) != 1:
            sys.stderr.write("%s: a run failed (%d, %d; traces %s %s)\n%s\n" % (
                model, po.returncode, pt.returncode, to, tt, (po.stderr + pt.stderr)[-2000:].decode(errors="replace")))
            return 1
        r, p = rows(model, tp.load(to[0]), tp.load(tt[0]))
        all_rows += r
        all_notes += notes(model, p)
        all_notes += ["%s: stdout %s" % (model, "the same" if po.stdout == pt.stdout else "DIFFERS")]
    table(all_rows)
    for n in all_notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
