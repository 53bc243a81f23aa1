#!/usr/bin/env python3
"""trigger_latency - how long `trainprof trigger` takes to start a window in a
running job: a job of two train_loop processes on the fake
runtime (TRAINPROF_SCHEDULE=none, --sleep-us per step), triggered with
`trainprof trigger --run`, several times.

  tests/bench/trigger_latency.py [--runs N] [--sleep-us U] [--signal]

Per run: the wall time from the command's start to the start of the first
recorded step (ProfilerStep of the trace, both ranks), the same in steps
(divided by the recorded steps' mean duration), the margin the command chose,
whether both ranks started at the same step, and whether any was late.
Prints the medians.  Runs from a temporary folder, never the worktree.
"""

import argparse
import glob
import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = os.environ.get("B", os.path.join(ROOT, "build"))
CLI = os.path.join(ROOT, "scripts", "trainprof")


def one(cwd, sleep_us, use_signal):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
    env.update(TRAINPROF_RUN_NAME="job", TRAINPROF_SCHEDULE="none", TRAINPROF_SYS="none",
               WORLD_SIZE="2")
    if use_signal:
        env["TRAINPROF_TRIGGER_SIGNAL"] = "SIGUSR2"
    procs = []
    for rank in (0, 1):
        e = dict(env, RANK=str(rank), LD_PRELOAD=os.path.join(B, "libtrainprof.so"))
        procs.append(subprocess.Popen([os.path.join(B, "programs", "train_loop"), "--steps=1000000",
                                       "--sleep-us=%d" % sleep_us], cwd=cwd, env=e,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            st = []
            for p in glob.glob(os.path.join(cwd, "job", "status", "*.json")):
                try:
                    st.append(json.load(open(p)))
                except ValueError:
                    pass
            if len(st) == 2 and all(s.get("steps_per_s") for s in st):
                break
            time.sleep(0.1)
        t_cmd = time.time()
        out = subprocess.run([sys.executable, CLI, "trigger", "--run", os.path.join(cwd, "job"),
                              "--steps", "2", "--wait", "0"], stdout=subprocess.PIPE, check=True,
                             env=env).stdout.decode()
        margin = int(out.split("margin ")[1].split()[0])
        deadline = time.time() + 30
        while time.time() < deadline and len(glob.glob(os.path.join(cwd, "job", "traces", "*.gz"))) < 2:
            time.sleep(0.1)
        firsts, walls, steps = set(), [], []
        for p in glob.glob(os.path.join(cwd, "job", "traces", "*.gz")):
            t = json.load(gzip.open(p))
            evs = sorted((e for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")),
                         key=lambda e: e["ts"])
            start_s = t["baseTimeNanoseconds"] / 1e9 + evs[0]["ts"] / 1e6
            step_s = statistics.mean(e["dur"] for e in evs) / 1e6
            walls.append(start_s - t_cmd)
            steps.append((start_s - t_cmd) / step_s)
            firsts.add(t["trainprof"]["first_step"])
        late = any((json.load(open(p)).get("last_trigger") or {}).get("late")
                   for p in glob.glob(os.path.join(cwd, "job", "status", "*.json")))
        return max(walls), max(steps), margin, len(firsts) == 1, late
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--sleep-us", type=int, default=10000)
    ap.add_argument("--signal", action="store_true")
    a = ap.parse_args()
    rows = []
    for i in range(a.runs):
        cwd = tempfile.mkdtemp(prefix="tp-trig-bench-")
        try:
            rows.append(one(cwd, a.sleep_us, a.signal))
        finally:
            shutil.rmtree(cwd, True)
        sys.stderr.write("run %d: %.3f s, %.1f steps, margin %d, same step %s, late %s\n"
                         % ((i,) + rows[-1]))
    walls = [r[0] for r in rows]
    steps = [r[1] for r in rows]
    print("step %.0f ms, %d runs%s: wall %.3f s median (%.3f, %.3f); %.1f steps median (%.1f, %.1f); "
          "margin %d steps; same step in both ranks %d/%d; late %d"
          % (a.sleep_us / 1000, a.runs, ", signal" if a.signal else "", statistics.median(walls),
             min(walls), max(walls), statistics.median(steps), min(steps), max(steps),
             statistics.median(r[2] for r in rows), sum(r[3] for r in rows), a.runs,
             sum(r[4] for r in rows)))


if __name__ == "__main__":
    main()
