#!/usr/bin/env python3
"""Compare what two builds of the library write on the test programs.

    compare_outputs.py run BUILD OUT      run the programs with BUILD's library
    compare_outputs.py diff BEFORE... -- AFTER...

`run` runs each case below (a test program, its arguments and environment,
on the fakes of tests/fakes) in a fresh folder, with BUILD/libtrainprof.so
preloaded, and copies every file the run left (traces gunzipped, reports,
summaries) under OUT/<case>/, plus the program's stdout.

A profiler's outputs carry clock readings, process ids and durations, and
on the fakes whether CUPTI was on in time for a short program's first calls
depends on tp-flush's timing, so two runs of one build differ.  `diff`
therefore takes several runs of each build.  Every JSON value (and the key
set and length of every object and array) and every token of a text file is
a leaf; a leaf that is the same in every run of a build is that build's
stable value.  A leaf stable in both builds with different values, or stable
in one and absent from every run of the other, is a difference.  Trace
events are compared in a timing-free order.  It prints, per file, how many
leaves were compared and how many vary from run to run, and exits 1 on any
difference.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ALL = {"TRAINPROF_SCHEDULE": "all"}
CASES = [
    ("train_loop", ["--steps=12"], {"TRAINPROF_SCHEDULE": "skip_first=2,wait=1,warmup=1,active=3,repeat=2",
                                    "TRAINPROF_HANDLERS": "chrome,summary,memory",
                                    "TRAINPROF_PROFILE_MEMORY": "1"}),
    ("train_loop", ["--steps=6"], {"TRAINPROF_SCHEDULE": "all", "TRAINPROF_WITH_STACK": "1",
                                   "TRAINPROF_HANDLERS": "chrome,summary,stacks"}),
    ("all_apis", [], ALL),
    ("blas_calls", [], ALL),
    ("dnn_calls", [], ALL),
    ("backend_calls", [], ALL),
    ("conv_calls", [], ALL),
    ("gemm_calls", [], dict(ALL, TRAINPROF_PEAK_TFLOPS="100")),
    ("nccl_calls", [], ALL),
    ("mem_calls", [], dict(ALL, TRAINPROF_PROFILE_MEMORY="1")),
    ("graph_calls", [], ALL),
    ("driver_calls", [], ALL),
    ("batch12", [], ALL),
    ("library_kernels", [], ALL),
    ("triton_like", [], ALL),
    ("nvtx_ranges", [], ALL),
    ("threads", ["4", "50"], ALL),
]


def case_name(i, case):
    return "%02d-%s" % (i, case[0])


def run(build, out):
    fakes = os.path.join(build, "fakes")
    os.makedirs(out, exist_ok=True)
    for i, (prog, args, env) in enumerate(CASES):
        name = case_name(i, (prog, args, env))
        cwd = tempfile.mkdtemp(prefix="tp-cmp-")
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("TRAINPROF_") and k not in ("LD_PRELOAD", "RANK", "LOCAL_RANK",
                                                              "WORLD_SIZE", "SLURM_JOB_ID")}
        e.update(TRAINPROF_RUN_NAME="cmp", TRAINPROF_SYS="none", TRAINPROF_GZIP="0",
                 LD_PRELOAD=os.path.join(build, "libtrainprof.so"),
                 LD_LIBRARY_PATH=fakes + ":" + e.get("LD_LIBRARY_PATH", ""))
        e.update(env)
        p = subprocess.run([os.path.join(build, "programs", prog)] + args, cwd=cwd, env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        dest = os.path.join(out, name)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        with open(os.path.join(dest, "_stdout"), "wb") as f:
            f.write(p.stdout)
        with open(os.path.join(dest, "_rc"), "w") as f:
            f.write("%d\n" % p.returncode)
        for top, _, files in os.walk(cwd):
            for fn in files:
                src = os.path.join(top, fn)
                rel = os.path.relpath(src, cwd)
                # file names carry the pid and the host: keep the shape only
                rel = re.sub(r"\d+", "N", rel)
                data = open(src, "rb").read()
                if data[:2] == b"\x1f\x8b":
                    data = gzip.decompress(data)
                tgt = os.path.join(dest, rel.replace(os.sep, "__"))
                while os.path.exists(tgt):
                    tgt += "+"
                with open(tgt, "wb") as f:
                    f.write(data)
        shutil.rmtree(cwd, ignore_errors=True)
        print("%s: rc %d, %d files" % (name, p.returncode, len(os.listdir(dest)) - 2))


def leaves(v, path=()):
    """(path, repr) of every scalar of a JSON value, and the shape of its
    containers (key lists, lengths) as leaves of their own."""
    if isinstance(v, dict):
        yield path + ("{keys}",), json.dumps(sorted(v))
        for k, x in v.items():
            yield from leaves(x, path + (k,))
    elif isinstance(v, list):
        yield path + ("[len]",), str(len(v))
        for i, x in enumerate(v):
            yield from leaves(x, path + (i,))
    else:
        yield path, json.dumps(v)


def text_leaves(data):
    lines = data.decode("utf-8", "replace").splitlines()
    yield ("[lines]",), str(len(lines))
    for i, line in enumerate(lines):
        toks = re.split(r"(\s+)", line)
        yield (i, "[toks]"), str(len(toks))
        for j, t in enumerate(toks):
            yield (i, j), t


VOLATILE = ("ts", "dur", "pid", "tid")


def canonical(v):
    """The trace with traceEvents in an order that does not depend on timing:
    sorted by the event less its clock readings and ids, its other numbers
    masked (tp-flush and the CUPTI thread interleave their events
    differently from run to run; a GPU track's sort_index holds the pid, so
    the order of two tracks would follow the pids); events alike but for
    their numbers keep the order the file has them in."""
    if isinstance(v, dict) and isinstance(v.get("traceEvents"), list):
        def key(e):
            text = json.dumps({k: x for k, x in e.items() if k not in VOLATILE}, sort_keys=True) \
                if isinstance(e, dict) else json.dumps(e)
            return re.sub(r"\d+", "#", text)
        v = dict(v, traceEvents=sorted(v["traceEvents"], key=key))
    return v


def file_leaves(path):
    data = open(path, "rb").read()
    try:
        return dict(leaves(canonical(json.loads(data)))), "json"
    except ValueError:
        return dict(text_leaves(data)), "text"


def stable(runs):
    """{leaf: value} of the leaves equal in every run of `runs` (a list of
    {leaf: value}); a leaf under a container whose shape varies is left out."""
    first = runs[0]
    varying = {k for k in first if any(r.get(k) != first[k] for r in runs[1:])}
    shaky = [k[:-1] for k in varying if k and k[-1] in ("{keys}", "[len]", "[toks]", "[lines]")]
    return {k: v for k, v in first.items()
            if k not in varying and not any(k[:len(s)] == s for s in shaky)}


TIME_KEY = re.compile(r"(^ts$|^dur$|_ns$|_ms$|_us$|_s$|share|per_s|busy|mfu|bandwidth)")


def is_time(k, v, w):
    """A leaf that is a measured time or a share of one: a JSON number under
    a time-like key, or a text token printed with a decimal point or a %.
    The fakes' durations are a few microseconds, so their rounding can be
    the same in every run of one build and still differ from the other's."""
    def num(x):
        try:
            return float(x.rstrip("%"))
        except (ValueError, AttributeError):
            return None
    if num(v) is None or num(w) is None:
        return False
    last = [c for c in k if isinstance(c, str)]
    if last and not last[-1].startswith("[") and TIME_KEY.search(last[-1]):
        return True
    return isinstance(k[-1], int) and ("." in v or "%" in v)


def diff(before, after):
    """Each of `before` and `after` a list of run folders of one build: a
    leaf is a difference when it is stable in every run of both builds with
    two values, or stable in one build and missing from every run of the other."""
    bad = 0
    total_cmp = total_noise = total_timed = 0
    for case in sorted(os.listdir(before[0])):
        sets = [set(os.listdir(os.path.join(d, case))) for d in before + after]
        if any(s != sets[0] for s in sets):
            print("%s: the files differ between runs: %s" % (case, [sorted(s) for s in sets]))
            bad += 1
            continue
        for fn in sorted(sets[0]):
            lb = [file_leaves(os.path.join(d, case, fn)) for d in before]
            la = [file_leaves(os.path.join(d, case, fn)) for d in after]
            kind = lb[0][1]
            sb, sa = stable([x for x, _ in lb]), stable([x for x, _ in la])
            diffs = [(k, v, sa[k]) for k, v in sb.items() if k in sa and sa[k] != v]
            timed = [d for d in diffs if is_time(*d)]
            diffs = [d for d in diffs if not is_time(*d)]
            total_timed += len(timed)
            gone = [k for k in sb if all(k not in x for x, _ in la)]
            new = [k for k in sa if all(k not in x for x, _ in lb)]
            compared = sum(1 for k in sb if k in sa)
            noise = len(lb[0][0]) - compared
            total_cmp += compared
            total_noise += noise
            status = "same" if not (diffs or gone or new) else "DIFFERENT"
            print("%s/%s (%s): %s, %d values compared, %d vary from run to run%s"
                  % (case, fn, kind, status, compared, noise,
                     ", %d measured times differ" % len(timed) if timed else ""))
            for k, v, w in diffs[:5]:
                print("    %s: before %s, after %s" % ("/".join(map(str, k)), v[:100], w[:100]))
            for k in gone[:5]:
                print("    %s: only before" % "/".join(map(str, k)))
            for k in new[:5]:
                print("    %s: only after" % "/".join(map(str, k)))
            bad += bool(diffs or gone or new)
    print("total: %d values compared, %d vary from run to run, %d measured times differ, "
          "%d files different" % (total_cmp, total_noise, total_timed, bad))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "run":
        run(os.path.abspath(argv[2]), os.path.abspath(argv[3]))
        return 0
    if len(argv) >= 6 and argv[1] == "diff" and "--" in argv[3:-1]:
        cut = argv.index("--")
        return diff(argv[2:cut], argv[cut + 1:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
