"""A trace's top-level metadata says only what is true:
distributedInfo only where a launcher, NCCL or the framework's process
group says the process is one rank of a job, with the backend only where it
is known (a CPU job that never used torch.distributed said backend "nccl");
Kineto's trace_id, record_shapes and host_name as torch.profiler writes
them; no FLOPs or TFLOP/s track of zeros and no empty summary section in a
job without library FLOPs, API calls or launches."""

import os
import re
import socket
import subprocess
import sys

import tputil

# Launcher variables the library reads (README, Configuration): none of
# them may leak in from the machine running the tests.
LAUNCHER_VARS = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "WORLD_SIZE",
                 "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
NO_LAUNCHER = {k: None for k in LAUNCHER_VARS}

# A CPU "job" in Python: no CUDA at all, steps through trainprof_step()
# (which activates the library), and what a framework hook would say about
# its process group.
CPU_JOB = r"""
import ctypes, sys
lib = ctypes.CDLL(None)
if len(sys.argv) > 1:
    pg = lib.trainprof_process_group
    pg.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    pg.restype = None
    backend = None if sys.argv[1] == "none" else sys.argv[1].encode()
    pg(backend, int(sys.argv[2]), int(sys.argv[3]))
for i in range(6):
    sum(range(20000))
    lib.trainprof_step()
"""


def cpu_job(*pg, env=None):
    r = tputil.run(sys.executable, ["-c", CPU_JOB] + [str(x) for x in pg],
                   env=dict(NO_LAUNCHER, **(env or {})))
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1, (r.traces, r.stderr)
    return r, tputil.load_trace(r.traces[0])


def test_cpu_job_by_hand_has_no_distributed_info():
    r, t = cpu_job()
    assert "distributedInfo" not in t, t.get("distributedInfo")
    assert tputil.steps(t) == [1, 2, 3, 4]


def test_launcher_says_rank_and_size_but_no_backend():
    r, t = cpu_job(env={"RANK": 1, "WORLD_SIZE": 2})
    assert t["distributedInfo"] == {"rank": 1, "world_size": 2}


def test_process_group_names_its_backend():
    """trainprof_process_group(): the group's backend, rank and size, over
    the launcher's word; NULL forgets the group."""
    r, t = cpu_job("gloo", 1, 2, env={"RANK": 5, "WORLD_SIZE": 8})
    assert t["distributedInfo"] == {"backend": "gloo", "rank": 1, "world_size": 2}
    r, t = cpu_job("gloo", 1, 2)
    assert t["distributedInfo"] == {"backend": "gloo", "rank": 1, "world_size": 2}
    r, t = cpu_job("none", 0, 0)
    assert "distributedInfo" not in t
    # bad values are ignored, never harm the job
    r, t = cpu_job("gloo", 3, 2)
    assert "distributedInfo" not in t
    # with TRAINPROF_ENABLED=0 the call does nothing and the program runs
    r = tputil.run(sys.executable, ["-c", CPU_JOB, "gloo", "0", "1"],
                   env=dict(NO_LAUNCHER, TRAINPROF_ENABLED=0))
    assert r.rc == 0 and r.traces == [] and r.stderr == b"", r.stderr


def test_kineto_metadata_keys():
    """trace_id (32 upper-case hex digits, a uuid4, one per trace),
    record_shapes 1 only with shapes on, host_name, before traceEvents."""
    ids = set()
    for shapes in (0, 1):
        r, t = cpu_job(env={"TRAINPROF_RECORD_SHAPES": shapes})
        assert re.match(r"^[0-9A-F]{12}4[0-9A-F]{3}[89AB][0-9A-F]{15}$", t["trace_id"]), t["trace_id"]
        ids.add(t["trace_id"])
        assert t["host_name"] == socket.gethostname()
        if shapes:
            assert t["record_shapes"] == 1
        else:
            assert "record_shapes" not in t
        keys = list(t)
        assert keys.index("trace_id") < keys.index("trainprof") < keys.index("traceEvents")
    assert len(ids) == 2


def test_cpu_job_has_no_empty_tracks_or_sections():
    """No library FLOPs: no FLOPs/TFLOP/s counter track and no FLOPs
    columns; no API call or launch: no "Host API calls" or "Kernels
    launched" section (they showed with nothing in them)."""
    r, t = cpu_job()
    names = {e["name"] for e in tputil.events(t, ph="C")}
    assert not names & {"FLOPs", "TFLOP/s"}, names
    reports = os.path.join(r.cwd, "test", "reports")
    [txt] = [f for f in os.listdir(reports) if f.endswith(".summary.txt")]
    with open(os.path.join(reports, txt)) as f:
        text = f.read()
    for absent in ("Host API calls", "Kernels launched", "(no API call recorded)",
                   "(no launch recorded)", "GFLOP", "TFLOP/s", "MFU-like"):
        assert absent not in text, (absent, text)
    assert "Per-step wall time" in text
    assert "Library FLOPs: none in these steps" in text
    # `trainprof summary` renders the same window the same way
    [js] = [f for f in os.listdir(reports) if f.endswith(".summary.json")]
    p = subprocess.run([sys.executable, os.path.join(tputil.ROOT, "scripts", "trainprof"), "summary",
                        os.path.join(reports, js)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    for absent in ("GFLOP", "TFLOP/s", "MFU-like"):
        assert absent not in out, (absent, out)
    assert "Library FLOPs: none in these steps" in out and "Per-step wall time" in out, out


def test_nccl_job_says_nccl():
    """NCCL communicators seen: backend nccl, without any launcher variable
    (tests/programs/nccl_calls.c on the fake NCCL); the rank and world size
    are the largest communicator's (16 ranks, this process rank 5)."""
    r = tputil.run("nccl_calls", env=dict(NO_LAUNCHER, TRAINPROF_SCHEDULE="all"))
    assert r.rc == 0, r.stderr
    t = tputil.load_trace(r.traces[0])
    info = t["distributedInfo"]
    assert info["backend"] == "nccl"
    assert (info["rank"], info["world_size"]) == (5, 16)
    assert info["pg_count"] == 9
