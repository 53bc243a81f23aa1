"""The summary's collectives table against the trace it summarises:
nccl_calls (tests/programs/nccl_calls.c, fake NCCL); per (collective, group
size) the calls, the nccl-tests size, the time and the bandwidths must follow
from the trace's NCCL cpu_op events and the kernels linked by External id to
the "nccl:..." annotation around each (torch's layering: the call itself is
inside that annotation and record_param_comms, over the same span).
The fake ncclAllReduce launches one kernel; when the fake CUPTI was enabled in
time (it is enabled asynchronously, so either may happen in a short run),
those rows use the kernels' device time and the other collectives fall back to
their host durations, each row naming its basis; without device records every
row is host-enqueue based and the heading says so."""

import collections
import glob
import os
import re

import pytest

import tputil

# bytes per element of the trace's dtype names (torch's)
DTYPE_SIZE = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Float8_e4m3fn": 1,
              "Float8_e5m2": 1, "Char": 1, "Byte": 1, "Int": 4, "UInt32": 4, "Long": 8,
              "UInt64": 8, "unknown": 0}

ROW = re.compile(r"^([a-z_]+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+|--)\s+"
                 r"([\d.]+|--)\s+(device|host-enqueue)$")


def _rows(text):
    sec = text[text.index("\nCollectives (NCCL)"):]
    sec = sec[:sec.index("\n\n")] if "\n\n" in sec else sec
    rows = {}
    for line in sec.splitlines():
        m = ROW.match(line)
        if m:
            rows[(m.group(1), int(m.group(2)))] = m.groups()[2:]
    return sec, rows


@pytest.mark.parametrize("schedule", ["all", "warmup=1,active=1"])
def test_collectives_table_follows_the_trace(schedule):
    r = tputil.run("nccl_calls", env={"TRAINPROF_SCHEDULE": schedule})
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1
    trace = tputil.load_trace(r.traces[0])
    summary = glob.glob(os.path.join(r.cwd, "test", "reports", "*.summary.txt"))
    assert len(summary) == 1
    sec, rows = _rows(open(summary[0]).read())

    kernels = collections.defaultdict(float)
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel" and e["args"].get("External id"):
            kernels[e["args"]["External id"]] += e["dur"] * 1000.0      # ns
    notes = {(e["tid"], e["ts"], e["dur"]): e["args"]["External id"] for e in trace["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:")}
    # calls, size, size x busbw factor, host ns, device ns
    want = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for e in trace["traceEvents"]:
        a = e.get("args", {})
        if e.get("cat") != "cpu_op" or "Collective name" not in a or e["name"] == "record_param_comms":
            continue
        # nccl-tests' size: the larger of a rank's input and output
        size = max(a["In msg nelems"], a["Out msg nelems"]) * DTYPE_SIZE[a["dtype"]]
        w = want[(a["Collective name"], a["Group size"])]
        w[0] += 1
        w[1] += size
        w[2] += size * a["busbw factor"]
        w[3] += e["dur"] * 1000.0
        w[4] += kernels.get(notes[(e["tid"], e["ts"], e["dur"])], 0.0)
    assert len(want) >= 8
    assert set(rows) == set(want), (sorted(rows), sorted(want))

    device = any(w[4] > 0 for w in want.values())
    if device:
        assert "time: device (kernel) time" in sec, sec
    else:
        assert "host-enqueue based (no device time" in sec, sec
    for key, (calls, size_mb, time_ms, mean_us, algbw, busbw, basis) in rows.items():
        n, size, bus, host_ns, dev_ns = want[key]
        assert basis == ("device" if dev_ns > 0 else "host-enqueue"), (key, sec)
        ns = dev_ns if dev_ns > 0 else host_ns
        assert int(calls) == n, key
        assert abs(float(size_mb) - size / 1e6) <= 0.0005, key
        assert abs(float(time_ms) - ns / 1e6) <= 0.0015, key
        assert abs(float(mean_us) - ns / n / 1e3) <= 0.0015 + 1e-6 * ns / n, key
        if ns == 0:
            assert algbw == busbw == "--", key
            continue
        # GB/s = bytes/ns; the trace keeps ns exactly (3 decimals of us)
        assert abs(float(algbw) - size / ns) <= 0.005 + 1e-3 * size / ns, (key, algbw, size / ns)
        assert abs(float(busbw) - bus / ns) <= 0.005 + 1e-3 * bus / ns, (key, busbw, bus / ns)
    # allreduce over 4 ranks: busbw = 2(4-1)/4 = 1.5 x algbw
    _, _, _, _, algbw, busbw, _ = rows[("allreduce", 4)]
    if algbw != "--":
        assert abs(float(busbw) - 1.5 * float(algbw)) <= 0.011
