"""The library as the process's ITT collector, with tasks from several ITT
domains (build/programs/itt_domains plays ittnotify's static part: domains
made before the collector loads, __itt_api_init, then domains made through
the collector).  Only torch's domain ("PyTorch") becomes operators; the
others' tasks (oneDNN's, a user's) are dropped, and their domains disabled
so that ittnotify's macros skip them; torch's own ProfilerStep#N ranges are
not written: the trace has each step once."""

import collections
import re

import tputil

PROG = "itt_domains"
EPS = 1e-3


def _inside(child, parent):
    return (parent["ts"] - EPS <= child["ts"] and
            child["ts"] + child.get("dur", 0) <= parent["ts"] + parent["dur"] + EPS)


def _flags(stderr):
    m = re.search(rb"^itt_flags (.*)$", stderr, re.M)
    assert m, stderr
    return {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).decode().split())}


def test_only_torch_domain_becomes_operators():
    r, t = tputil.run_beside_plain(PROG, {}, args=[6])
    flags = _flags(r.stderr)
    # ittnotify's own domains: torch's enabled, oneDNN's disabled; and
    # those made through the collector alike
    assert flags["torch"] not in (0, 1) and flags["torch_after"] == flags["torch"], flags
    assert flags["dnnl"] == 0 and flags["my_app"] == 0, flags
    assert flags["table"] == 4 and flags["frame_null"] == 1, flags
    x = tputil.events(t, ph="X")
    assert tputil.steps(t) == [1, 2, 3, 4]
    names = collections.Counter(e["name"] for e in x if not tputil.STEP_RE.match(e["name"]))
    assert names == {"aten::conv2d": 4, "aten::mm": 4}, names
    assert all(e["cat"] == "cpu_op" for e in x if e["name"].startswith("aten::"))
    convs = [e for e in x if e["name"] == "aten::conv2d"]
    for mm in (e for e in x if e["name"] == "aten::mm"):
        assert any(_inside(mm, c) for c in convs), mm
    # every task's end matched its own begin: nothing popped twice or lost
    assert t["trainprof"]["unmatched_range_pops"] == 0
    assert t["trainprof"]["ranges_lost"] == 0
