"""The hang doctor end to end: TRAINPROF_HANG_S in the library
(collector/control/hang.c, the in-flight slots of collector/record/inflight.c)
and `trainprof hang` (scripts/trainprof_cli/hang.py).

Four ranks of tests/programs/ddp_loop under the fake NCCL, whose
ncclAllReduce blocks until every rank of the communicator arrives
(FAKE_NCCL_MEET); rank 2 never makes all-reduce number 5.  Every rank must write
its report within TRAINPROF_HANG_S + 5 s of the stall, and `trainprof hang`
must name rank 2, the communicator and number 5."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import tputil

CLI = os.path.join(tputil.ROOT, "scripts", "trainprof")
HANG_S = 2


def cli(*args, timeout=60):
    return subprocess.run([sys.executable, CLI] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, env=tputil.base_env(preload=False))


def start_job(cwd, ranks=4, stall_rank=2, stall_at=5, env=None, steps=12):
    meet = os.path.join(cwd, "meet")
    os.makedirs(meet, exist_ok=True)
    procs = []
    for rank in range(ranks):
        e = tputil.base_env(dict({
            "TRAINPROF_RUN_NAME": "job", "TRAINPROF_HANG_S": HANG_S, "FAKE_NCCL_MEET": meet,
            "RANK": rank, "WORLD_SIZE": ranks}, **(env or {})))
        err = open(os.path.join(cwd, "rank%d.err" % rank), "wb")
        procs.append(subprocess.Popen(
            [tputil.program("ddp_loop"), "--steps=%d" % steps, "--stall-rank=%d" % stall_rank,
             "--stall-at=%d" % stall_at, "--rendezvous=%s" % cwd],
            cwd=cwd, env=e, stdout=subprocess.DEVNULL, stderr=err))
    return procs, meet


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait(timeout=30)


def reports(cwd):
    return sorted(glob.glob(os.path.join(cwd, "job", "reports", "rank*.hang.json")))


def test_four_ranks_rank2_never_arrives_at_allreduce_5():
    cwd = tputil.new_dir()
    procs, meet = start_job(cwd)
    try:
        deadline = time.time() + HANG_S + 30
        while time.time() < deadline and len(reports(cwd)) < 4:
            time.sleep(0.05)
        found = reports(cwd)
        assert len(found) == 4, "reports: %s; rank 0 said: %s" % (
            found, open(os.path.join(cwd, "rank0.err"), "rb").read())
        # the stall: the last all-reduce every rank made is number 4 (the fake's
        # meeting files of the k-th all-reduce are c0.k.r<rank>); ranks 0, 1, 3
        # are inside number 5 from their c0.5 file on, rank 2 never makes one
        done4 = max(os.stat(p).st_mtime for p in glob.glob(os.path.join(meet, "c0.4.r*")))
        assert not os.path.exists(os.path.join(meet, "c0.5.r2"))
        late = {}
        for path in found:
            with open(path) as f:
                rep = json.load(f)
            late[rep["rank"]] = os.stat(path).st_mtime - done4
            assert rep["steps_completed"] == 4
            assert rep["communicators"][0]["last_issued"] == (4 if rep["rank"] == 2 else 5)
            calls = [t["in_flight"] for t in rep["threads"] if t["in_flight"]]
            main = rep["threads"][0]
            assert main["name"] == "ddp_loop" and isinstance(main["stack"], list), main
            if rep["rank"] == 2:
                assert calls == []
                # its own stack, walked in its signal handler: sleeping in main
                assert "sleep" in main["stack"] and "main" in main["stack"], main["stack"]
            else:
                assert [(c["call"], c["communicator"], c["seq"]) for c in calls] == \
                    [("ncclAllReduce", 0, 5)]
                assert calls[0]["for_s"] >= HANG_S - 0.5
        sys.stderr.write("stall to report, s, per rank: %s\n" % {
            r: round(t, 2) for r, t in sorted(late.items())})
        assert all(t <= HANG_S + 5 for t in late.values()), late
        txt = open(os.path.join(cwd, "job", "reports", "rank0.hang.txt")).read()
        assert "in ncclAllReduce for" in txt and "allreduce seq 5" in txt
    finally:
        stop(procs)
    r = cli("hang", os.path.join(cwd, "job"))
    out = r.stdout.decode()
    sys.stderr.write(out)
    assert r.returncode == 0, r.stderr
    last = out.strip().splitlines()[-1]
    assert last.startswith("culprit: rank 2 ("), last
    assert "communicator 0" in last and "allreduce seq 5" in last
    assert "inside seq 5: ranks 0, 1, 3" in out
    assert "never arrived: rank 2 (last issued seq 4)" in out
    # one line per rank (a newline once came out as "?", joining them)
    for rank in range(4):
        assert re.search(r"^  rank %d: no step ended for [0-9.]+ s; last step 3$" % rank, out,
                         re.M), out
    assert "stack top: " in out and "sleep < main" in out


def test_a_job_that_ends_its_steps_writes_no_report():
    cwd = tputil.new_dir()
    procs, _ = start_job(cwd, ranks=2, stall_rank=-1, steps=8, env={"DDP_SLEEP_US": 300000})
    try:
        for p in procs:
            assert p.wait(timeout=60) == 0
    finally:
        stop(procs)
    # 8 steps of 0.3 s: 2.4 s in all, longer than TRAINPROF_HANG_S, no step as long
    assert reports(cwd) == []
    for rank in range(2):
        with open(os.path.join(cwd, "rank%d.err" % rank), "rb") as f:
            assert b"TRAINPROF_HANG_S" not in f.read()     # taken, and no hang said
    r = cli("hang", os.path.join(cwd, "job"))
    assert r.returncode == 1
    assert r.stderr.decode().startswith("trainprof: no hang reports in ")


def test_a_slow_start_before_the_first_step_is_no_hang():
    """Importing, loading and compiling before the first step can outlast
    TRAINPROF_HANG_S with nothing wrong (torch's import did, on a GPU
    machine, with TRAINPROF_HANG_S=2): no report for it."""
    cwd = tputil.new_dir()
    procs, _ = start_job(cwd, ranks=1, stall_rank=-1, steps=3,
                         env={"DDP_WARMUP_US": int((HANG_S + 2) * 1e6)})
    try:
        assert procs[0].wait(timeout=60) == 0
    finally:
        stop(procs)
    assert reports(cwd) == []


def test_stuck_in_the_first_collective_is_a_hang_at_once():
    """Before the first step, a rank waiting that long inside one blocking
    call (here the first all-reduce, which rank 1 never makes) is reported at
    TRAINPROF_HANG_S; rank 1, asleep in its own code, is not yet (it would
    be after the first-step grace)."""
    cwd = tputil.new_dir()
    procs, _ = start_job(cwd, ranks=2, stall_rank=1, stall_at=1)
    try:
        t0 = time.time()
        while time.time() < t0 + HANG_S + 30 and not reports(cwd):
            time.sleep(0.05)
        found = reports(cwd)
        assert [os.path.basename(p) for p in found] == ["rank0.hang.json"], found
        with open(found[0]) as f:
            rep = json.load(f)
        assert rep["steps_completed"] == 0 and rep["last_step"] is None
        calls = [t["in_flight"] for t in rep["threads"] if t["in_flight"]]
        assert [(c["call"], c["seq"]) for c in calls] == [("ncclAllReduce", 1)]
        time.sleep(HANG_S + 1)
        assert len(reports(cwd)) == 1
    finally:
        stop(procs)


def test_flight_recorder_dumps_its_ring_at_a_hang():
    """With the flight recorder on, each rank's hang report comes with a
    flight dump, reason "hang": the steps before the stall and the step
    under way (the flush thread only tries the step lock, which the stuck
    training thread does not hold)."""
    cwd = tputil.new_dir()
    procs, _ = start_job(cwd, ranks=2, stall_rank=1, stall_at=5,
                         env={"TRAINPROF_FLIGHT": 10, "TRAINPROF_SCHEDULE": "skip_first=1000",
                              "TRAINPROF_FLIGHT_SLOW": 1000})
    traces = os.path.join(cwd, "job", "traces")
    try:
        t0 = time.time()
        # whole files only: a dump being written is "NAME.HOST.PID.tmp" until renamed
        while time.time() < t0 + HANG_S + 30 and \
                len(glob.glob(os.path.join(traces, "*flight-hang*.json.gz"))) < 2:
            time.sleep(0.05)
    finally:
        stop(procs)
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(traces, "*")))
    # steps count from 0: the fifth all-reduce is in step 4
    assert names == ["rank0.flight-hang.4.pt.trace.json.gz", "rank1.flight-hang.4.pt.trace.json.gz"], (
        names, open(os.path.join(cwd, "rank0.err"), "rb").read())
    for rank in range(2):
        t = tputil.load_trace(os.path.join(traces, names[rank]))
        assert t["trainprof"]["flight"]["reason"] == "hang"
        colls = [e for e in tputil.events(t, ph="X") if e["name"] == "ncclAllReduce"]
        assert len(colls) == 4, [e["name"] for e in tputil.events(t, ph="X")]


def test_bad_hang_s_is_one_line_and_the_job_runs_unprofiled():
    r = tputil.run("ddp_loop", ["--steps=3"], env={"TRAINPROF_HANG_S": "10s"})
    assert r.rc == 0
    lines = [l for l in r.stderr.decode().splitlines() if "TRAINPROF_HANG_S" in l]
    assert lines == ['trainprof: error: TRAINPROF_HANG_S="10s": must be a number of seconds '
                     'between 1 and 86400, or off (or 0)'], r.stderr
    assert r.traces == []


def test_one_report_per_hang_and_a_new_one_for_the_next():
    """Two stalls of 3.2 s, a step ending between them: two reports (the
    second under its own name), not one per second of either."""
    r = tputil.run("train_loop", ["--steps=4"], env={
        "TRAINPROF_HANG_S": HANG_S, "TRAIN_STALL_US": 3200000, "TRAIN_STALLS": 2})
    assert r.rc == 0, r.stderr
    folder = os.path.join(r.cwd, "test", "reports")
    names = sorted(n for n in os.listdir(folder) if ".hang." in n)
    assert names == ["rank0.hang.2.json", "rank0.hang.2.txt", "rank0.hang.json",
                     "rank0.hang.txt"], names
    reps = [json.load(open(os.path.join(folder, n))) for n in ("rank0.hang.json",
                                                               "rank0.hang.2.json")]
    assert [(x["hang"], x["steps_completed"]) for x in reps] == [(1, 2), (2, 3)]
    lines = [l for l in r.stderr.decode().splitlines() if "hang report" in l]
    assert len(lines) == 2, r.stderr


def kill_tree(p):
    """SIGKILL to `p` and its descendants, found before any dies: torchrun
    starts its workers in sessions of their own, and a worker left behind
    would wait in gloo for half an hour."""
    parent = {}
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {p.pid}, True
    while grew:
        more = {pid for pid, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    p.wait(timeout=30)


def test_real_torch_gloo_two_ranks_python_stacks():
    """The PyPI wheel on the CPU, 2 ranks of gloo under `trainprof run
    --hang` and torchrun: rank 1 sleeps in Python before its third
    all_reduce, rank 0 waits inside it.  Both reports hold the rank's Python
    stack with the line it is on; the test then kills the job."""
    pytest.importorskip("torch")
    script = os.path.join(tputil.ROOT, "tests", "programs", "torch_hang.py")
    with open(script) as f:
        src = f.read().splitlines()
    sleep_line = next(i for i, l in enumerate(src, 1) if "HANG: rank 1 sleeps" in l)
    reduce_line = next(i for i, l in enumerate(src, 1) if "HANG: rank 0 waits" in l)
    cwd = tputil.new_dir()
    err = open(os.path.join(cwd, "job.err"), "wb")
    p = subprocess.Popen(
        [sys.executable, CLI, "run", "--hang", str(HANG_S), "--", sys.executable, "-m",
         "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script],
        cwd=cwd, env=tputil.base_env({"TRAINPROF_RUN_NAME": "job"}, preload=False),
        stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.time() + 180
        while time.time() < deadline and len(reports(cwd)) < 2 and p.poll() is None:
            time.sleep(0.2)
        found = reports(cwd)
        assert len(found) == 2, (found, open(os.path.join(cwd, "job.err"), "rb").read()[-3000:])
        reps = {}
        for path in found:
            with open(path) as f:
                rep = json.load(f)
            reps[rep["rank"]] = rep
        assert p.poll() is None     # still hung: the reports changed nothing
    finally:
        kill_tree(p)
    py0, py1 = reps[0]["python_stacks"], reps[1]["python_stacks"]
    assert 'torch_hang.py", line %d in main' % sleep_line in py1, py1
    assert 'torch_hang.py", line %d in main' % reduce_line in py0, py0
    assert " in all_reduce" in py0.split("torch_hang.py")[0], py0
    # the native stack of rank 1's main thread is in time.sleep's C code
    assert "time_sleep" in reps[1]["threads"][0]["stack"], reps[1]["threads"][0]
    r = cli("hang", os.path.join(cwd, "job"))
    assert r.returncode == 0, r.stderr
    assert "Python: torch_hang.py:%d in main" % sleep_line in r.stdout.decode(), r.stdout


def test_unwritable_reports_folder_is_one_line_and_the_job_is_untouched():
    """The reports folder cannot be made (a file is where a folder would
    be): one `trainprof:` line for the hang, the program's output and
    status as without the library, nothing else written there."""
    env = {"TRAIN_STALL_US": 3200000}
    plain = tputil.run("train_loop", ["--steps=3"], env=env, preload=False)
    cwd = tputil.new_dir()
    with open(os.path.join(cwd, "blocker"), "w") as f:
        f.write("x")
    r = tputil.run("train_loop", ["--steps=3"], cwd=cwd, env=dict(env, **{
        "TRAINPROF_HANG_S": HANG_S, "TRAINPROF_SCHEDULE": "none", "TRAINPROF_TRIGGER": "none",
        "TRAINPROF_REPORTS": "blocker/reports"}))
    assert r.rc == plain.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    lines = [l for l in r.stderr.decode().splitlines() if "hang" in l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("trainprof: error: no step ended for ") and \
        ("hang report not written to %s/blocker/reports: Not a directory" % cwd) in lines[0], lines
    assert sorted(os.listdir(cwd)) == ["blocker"], tputil.files_under(cwd)


def test_hang_cli_asynchronous_collectives():
    """Real NCCL returns from a collective once it is queued: the ranks that
    issued seq 9 wait in cudaStreamSynchronize, the one that did not is
    still the culprit."""
    d = tputil.new_dir()

    def rep(rank, last, call):
        return json.dumps({
            "kind": "trainprof-hang", "rank": rank, "world_size": 2, "stalled_s": 5.0,
            "last_step": 3, "communicators": [{"id": 0, "size": 2, "rank": rank,
                                               "last_issued": last}],
            "threads": [{"tid": 1, "name": "python", "state": "S", "wchan": "", "syscall": "7",
                         "in_flight": call}]})
    write(os.path.join(d, "reports", "rank0.hang.json"), rep(0, 9, {
        "call": "cudaStreamSynchronize", "for_s": 5.0, "bytes": 0, "handle": "0x1"}))
    write(os.path.join(d, "reports", "rank1.hang.json"), rep(1, 8, None))
    r = cli("hang", d)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "issued seq 9, not inside it: rank 0: in cudaStreamSynchronize for 5.0 s" in out, out
    assert out.strip().splitlines()[-1].startswith("culprit: rank 1 (communicator 0, collective "
                                                   "seq 9)"), out


# ---- the command's bad input -------------------------------------------------


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_hang_cli_bad_input():
    d = tputil.new_dir()
    cases = {
        "notjson": ("{", "not JSON"),
        "notreport": (json.dumps({"rank": 0}), "not a hang report"),
        "badrank": (json.dumps({"kind": "trainprof-hang", "rank": "0", "communicators": [],
                                "threads": []}), "'rank' is not an integer"),
        "badcomm": (json.dumps({"kind": "trainprof-hang", "rank": 0, "threads": [],
                                "communicators": [{"id": 0}]}), "'size' is not an integer"),
    }
    for name, (text, why) in cases.items():
        folder = os.path.join(d, name)
        write(os.path.join(folder, "reports", "rank0.hang.json"), text)
        r = cli("hang", folder)
        lines = r.stderr.decode().splitlines()
        assert r.returncode == 2, (name, r.stderr)
        assert len(lines) == 1 and lines[0].startswith("trainprof: ") and why in lines[0], lines
        assert r.stdout == b""
    # a link where a report should be is not followed
    folder = os.path.join(d, "link")
    os.makedirs(os.path.join(folder, "reports"))
    os.symlink("/etc/passwd", os.path.join(folder, "reports", "rank0.hang.json"))
    r = cli("hang", folder)
    assert r.returncode == 2 and b"symbolic link" in r.stderr
    r = cli("hang", os.path.join(d, "missing"))
    assert r.returncode == 2 and r.stderr.decode() == "trainprof: %s: not a folder\n" % \
        os.path.join(d, "missing")
    r = cli("hang")
    assert r.returncode == 2
    os.makedirs(os.path.join(d, "empty"))
    r = cli("hang", os.path.join(d, "empty"))
    assert r.returncode == 1


def test_hang_cli_dead_rank_and_later_report():
    """A rank that wrote no report is listed; a process's second hang
    (rank0.hang.2.json) is the one judged."""
    d = tputil.new_dir()
    th = lambda seq: [{"tid": 1, "name": "python", "state": "S", "wchan": "", "syscall": "202",
                       "in_flight": {"call": "ncclAllReduce", "for_s": 3.0, "communicator": 0,
                                     "collective": "allreduce", "seq": seq, "bytes": 4,
                                     "handle": "0x0"}}]
    rep = lambda rank, last, seq: json.dumps({
        "kind": "trainprof-hang", "rank": rank, "world_size": 3, "stalled_s": 3.0,
        "last_step": 1, "communicators": [{"id": 0, "size": 3, "rank": rank,
                                           "last_issued": last}], "threads": th(seq)})
    write(os.path.join(d, "reports", "rank0.hang.json"), rep(0, 1, 1))
    write(os.path.join(d, "reports", "rank0.hang.2.json"), rep(0, 7, 7))
    write(os.path.join(d, "reports", "rank1.hang.json"), rep(1, 6, 6))
    r = cli("hang", d)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "no report: rank 2 (dead, or not hung)" in out
    assert "inside seq 7: rank 0" in out
    assert out.strip().splitlines()[-1].startswith("culprit: rank 1 (communicator 0, allreduce seq 7)")


def test_hang_report_racing_the_programs_exit():
    """The report is being written while the program exits (its last step
    lasts about TRAINPROF_HANG_S, then it returns): the exit status and
    stdout are the program's, and every report there is whole (its text
    and its JSON, no temporary file left), whichever wins."""
    written = 0
    plain = tputil.run("ddp_loop", ["--steps=2"], env={"RANK": 0, "WORLD_SIZE": 1}, preload=False)
    for extra_ms in (0, 50, 100, 150, 200, 300):
        cwd = tputil.new_dir()
        env = {"TRAINPROF_RUN_NAME": "job", "TRAINPROF_HANG_S": 1, "RANK": 0, "WORLD_SIZE": 1,
               "DDP_SLEEP_US": (1000 + extra_ms) * 1000}
        r = tputil.run("ddp_loop", ["--steps=2"], env=env, cwd=cwd)
        assert r.rc == plain.rc == 0 and r.stdout == plain.stdout, r.stderr
        folder = os.path.join(cwd, "job", "reports")
        left = os.listdir(folder) if os.path.isdir(folder) else []
        assert not [n for n in left if n.endswith(".tmp")], left
        for j in glob.glob(os.path.join(folder, "rank0.hang*.json")):
            with open(j) as f:
                json.load(f)
            assert os.path.exists(j[:-len(".json")] + ".txt")
            written += 1
    sys.stderr.write("reports written before the exit: %d of 6 runs\n" % written)
