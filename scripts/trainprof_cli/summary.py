"""trainprof_cli.summary - `trainprof summary PATH...`.

DESIGN
Every input becomes one dict in the schema of the summary handler's
"<trace base>.summary.json" (trainprof.summary/1.x, README "summary.json"):
read as it is when the handler wrote one, else computed from the trace
alone (the operator tables as summary_agg.c builds them: torch's
record_function annotations are rows, the steps one row ProfilerStep*,
whose self time is the time of the step's thread in no top-level operator,
and a table by (name, input shapes)).  One window prints the tables of the
live .summary.txt from that dict; several ranks print a job table (per step the median and the
slowest rank, per rank GPU busy, collective time and the wait over the
fastest rank, the MFU-like spread) and name the ranks whose steps are more
than 10% slower than the median.  Folders are walked: each trace is
paired with the summary.json of the same base name anywhere under the
arguments, which is preferred (a few KiB instead of the whole trace), so
4,096 ranks are read in seconds.

Where the Python aggregation remains, and why (scripts/README.md, the
section on where the figures come from): _TraceSummary runs only for a trace with no
summary.json within reach (written by torch.profiler itself, by a library
from before summary.json, or copied without its reports folder).  It fills
the summary.json schema from the same table definitions (NAME_TABLES) that
render_one prints, and render_one prints summary.c's columns, units and
rounding; tests/cli/test_summary_sources.py holds them together.

A trace is streamed, never loaded whole, by the reader merge shares
(trainprof_cli.trace.stream_trace): the events come in batches of whole lines.
Memory is the batch, the name tables, and the few per-window lists (steps,
collectives waiting for their kernels), not the trace.  Python standard
library only.

Hostile input (README "What `merge`, `summary`, `trigger` and `status`
accept"): only regular files are read (trainprof_cli.files; a
FIFO would block, a link to /dev/zero never ends; names met in a folder are
not followed if links), a summary.json of at most MAX_SUMMARY bytes, a
trace's header values and events of at most MAX_HEADER and MAX_EVENT
(trainprof_cli.trace, whose errors name the file).
A file that fails, or whose fields job() reads are not of the schema's
types (check_summary), is refused with one line naming it; the others are
still summarised, and the exit status is 2.
"""

from array import array
import bisect
import collections
import io
import json
import math
import os
import re
import stat
import statistics
import sys
import zlib

try:
    from trainprof_cli.files import FileError, read_regular
    from trainprof_cli.trace import TraceError, stream_trace
except ImportError:                     # loaded by path (tests): the package from its parent folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from trainprof_cli.files import FileError, read_regular
    from trainprof_cli.trace import TraceError, stream_trace

SCHEMA = "trainprof.summary/1"
BUSY_BATCH = 65536                # device spans merged and folded at a time
OP_FOLD_MIN = 65536               # operators looked up in a dict before a fold (op_add)
BUSY_DISORDER = 4096              # how far out of time order device records may arrive
STRAGGLER = 0.10                  # slower than the median by more than this
DTYPE_SIZE = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Float8_e4m3fn": 1,
              "Float8_e5m2": 1, "Char": 1, "Byte": 1, "Int": 4, "UInt32": 4, "Long": 8,
              "UInt64": 8}
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
STEP_ROW = "ProfilerStep*"          # the operator tables' row of the steps (summary_impl.h)
MAX_SUMMARY = 16 << 20            # a summary.json at most (the handler writes a few KiB)


# ---- the tables: one definition for the aggregation and the printing ------------
#
# Where the figures come from (README "summary.json"): the library's
# summary.json when it exists, which is summary.c's aggregates (summary_agg.c)
# cut to their largest rows; a Python aggregation of the trace (_TraceSummary)
# only where there is none: a trace written by torch.profiler itself, an
# older trace, a trace copied without its reports folder.  Both end as one dict
# in summary.json's schema, and one renderer (render_one) prints it in the
# columns, units, rounding and row order of the library's text report
# (summary.c): the name tables below are defined once, for the aggregation
# (which table, rows kept, order, fields: summary_json.c's put_table) and the
# printing (heading, columns, cells, total line: summary.c's put_libs,
# put_apis, put_kernels, put_gpu).  tests/cli/test_summary_sources.py
# holds the three to each other.
TOP = 20                        # rows kept of the kernel and operator tables (summary_json.c)
TOP_SMALL = 10                  # of the library and host API tables
OPS_TOP = TOP
NAME_MAX = 100                  # bytes of a left-aligned cell before it is cut (TP_TABLE_NAME_MAX)

NameTable = collections.namedtuple("NameTable", "key agg top by_calls fields heading titles cells total")


def _fmt3(ns, unit):
    """"ns" in units of "unit" ns, three decimals, rounded half away from
    zero in integer arithmetic: table.c's tp_fmt3, so that the figures are
    the text report's to the last digit."""
    if ns is None:
        return "--"
    ns = int(round(ns))
    milli = unit // 1000
    q = (ns + milli // 2) // milli if ns >= 0 else -((-ns + milli // 2) // milli)
    return "%s%d.%03d" % ("-" if q < 0 else "", abs(q) // 1000, abs(q) % 1000)


def _ms(ns):
    return _fmt3(ns, 1000000)


def _us(ns):
    return _fmt3(ns, 1000)


def _pct(x):
    return "--" if x is None else "%.1f%%" % (100.0 * x)


def _pct_of(part, whole):
    """summary.c's fmt_pct: one decimal, 0.0% of nothing."""
    return "%.1f%%" % (100.0 * part / whole if whole and whole > 0 else 0.0)


def _pct2_of(part, whole):
    """summary.c's fmt_pct2 (torch's two decimals), integer arithmetic."""
    if part is None:
        return "--"
    p = (int(part) * 10000 + int(whole) // 2) // int(whole) if whole and whole > 0 else 0
    return "%d.%02d%%" % (p // 100, p % 100)


def _gflop(flops):
    return "%.3f" % (flops / 1e9)


def _lib_cells(d, r):
    f, all_f = r.get("flops"), (d.get("totals") or {}).get("library_flops") or 0
    return [r["calls"], _ms(r["total_ns"]), _us(r["total_ns"] // r["calls"])] + \
        ([_gflop(f), "%.2f%%" % (100.0 * f / all_f if all_f else 0.0)] if f else ["--", "--"])


NAME_TABLES = (
    NameTable("library_calls", "lib", TOP_SMALL, False, (("flops", "extra"),),
              "Library calls (cuBLAS, cuBLASLt, cuDNN, NCCL)",
              ("Name", "Calls", "Total (ms)", "Mean (us)", "GFLOP", "% FLOPs"), _lib_cells,
              lambda d: "Library FLOPs total: %s GFLOP" % _gflop((d.get("totals") or {}).get("library_flops") or 0)),
    NameTable("api_calls", "api", TOP_SMALL, False, (("max_ns", "max"),), "Host API calls",
              ("Name", "Calls", "Total (ms)", "Mean (us)", "Max (us)", "% Host"),
              lambda d, r: [r["calls"], _ms(r["total_ns"]), _us(r["total_ns"] // r["calls"]),
                            _us(r.get("max_ns")), _pct2_of(r["total_ns"], d.get("host_api_ns"))],
              lambda d: "Host API time total (ms): %s" % _ms(d.get("host_api_ns"))),
    NameTable("launches", "launch", TOP, True, (), "Kernels launched", ("Kernel", "Launches"),
              lambda d, r: [r["calls"]], lambda d: "Launches total: %s" % d.get("host_launch_count")),
    NameTable("gpu_work", "gpu", TOP, False, (("max_ns", "max"),), None,
              ("Device work", "Count", "GPU total (ms)", "Mean (us)", "Max (us)", "% GPU"),
              lambda d, r: [r["calls"], _ms(r["total_ns"]), _us(r["total_ns"] // r["calls"]),
                            _us(r.get("max_ns")), _pct_of(r["total_ns"], d.get("gpu_ns"))],
              lambda d: "GPU time total (ms): %s" % _ms(d.get("gpu_ns"))),
)
OP_TITLES = ("Name", "Calls", "Host total (ms)", "Host total %", "Self host (ms)", "Self host %", "Mean (us)")
STEP_TITLES = ("Step", "Wall (ms)", "GFLOP", "TFLOP/s", "GPU busy")
MEMORY_TITLES = ("Memory", "Start", "Peak", "Peak at (ms)", "End", "Process peak", "Allocs", "Frees",
                 "Failed", "Largest failed")
COLL_TITLES = ("Collective", "Ranks", "Calls", "Size (MB)", "Time (ms)", "Mean (us)", "algbw (GB/s)",
               "busbw (GB/s)", "Basis")


class SummaryError(Exception):
    pass


# What a broken or hostile input raises on its way through the readers and
# the aggregates (a string where a number belongs, a number of 5,000 digits,
# 1e999, a corrupt gzip, nesting deeper than Python's json reads): the file
# is refused with one line naming it, and the others are still summarised.
DATA_ERRORS = (SummaryError, TraceError, FileError, OSError, EOFError, zlib.error, ValueError, TypeError,
               KeyError, IndexError, AttributeError, OverflowError, ZeroDivisionError,
               RecursionError)


# ---- a trace to the summary.json schema ----------------------------------------

class _Agg:
    __slots__ = ("calls", "total", "max", "extra", "extra2", "kind")

    def __init__(self):
        self.calls = 0
        self.total = 0
        self.max = 0
        self.extra = 0
        self.extra2 = 0
        self.kind = "operator"


def _ns(us):
    return int(round(us * 1000.0))


def _merge_spans(spans):
    spans.sort()
    out = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


class _TraceSummary:
    """The aggregates summary_agg.c keeps, from trace events."""

    def __init__(self):
        self.header = {}
        self.tables = {k: {} for k in ("api", "launch", "lib", "gpu", "op", "shape")}
        self.steps = {}               # index -> (start_ns, end_ns)
        self.step_tid = {}            # index -> the thread it was recorded on
        self.step_cov = {}            # index -> ns in top-level operators of its thread (op_roots)
        self.step_order = None        # (starts, [(start, end, index)]) by start, for op_roots
        self.ops_with_shapes = 0
        self.busy = []                # merged spans not yet folded (fold_busy)
        self.pending_busy = []        # spans in arrival order since the last fold
        self.busy_mark = -(1 << 62)
        self.busy_late = 0
        self.busy_total = 0
        self.busy_steps = {}          # step index -> busy ns folded so far
        self.busy_folded = False
        self.steps_after_fold = False
        self.pid = None
        self.program = None
        self.op_done = {}             # tid -> [(start, end, dur)]
        # External id -> operator name, compact (12 bytes an operator, not a
        # dict entry: a window holds millions): ids, and indexes into the
        # distinct names, sorted by id (op_add)
        self.op_ids = array("q")
        self.op_idx = array("l")
        # the operators since the last fold into op_ids (op_add): in file
        # order, and by id (the later of one id wins) for lookups
        self.op_tail_ids = array("q")
        self.op_tail_idx = array("l")
        self.op_tail = {}
        self.op_name_list = []        # (name, by-shape key)
        self.op_name_index = {}
        self.coll = {}                # (kind, ranks) -> [calls, bytes, bus, host_ns, dev_ns]
        self.coll_by_span = {}        # (tid, ts, dur) -> key, waiting for its annotation
        self.annot_by_span = {}       # (tid, ts, dur) -> External id, waiting for its call
        self.coll_ext = {}            # annotation External id -> key
        self.mem = {}                 # device -> dict
        self.launches = 0
        self.t_min = None
        self.t_max = None

    def agg(self, table, name, dur):
        t = self.tables[table]
        a = t.get(name)
        if a is None:
            a = t[name] = _Agg()
        a.calls += 1
        a.total += dur
        if dur > a.max:
            a.max = dur
        return a

    def add_busy(self, a, b):
        self.pending_busy.append([a, b])
        if len(self.pending_busy) > BUSY_BATCH:
            self.fold_busy(final=False)

    def fold_busy(self, final):
        """Merge the device spans (streams overlap) and add those that end
        before the watermark to the busy time of each step, so that memory
        does not grow with the trace: the watermark is the earliest start
        among the last BUSY_DISORDER spans, assuming that later records
        start after it (CUPTI delivers them roughly in time order); a span
        that starts before an earlier watermark is counted in
        busy_late_spans (it may overlap time already counted)."""
        if not final:
            mark = min(x[0] for x in self.pending_busy[-BUSY_DISORDER:])
        for x in self.pending_busy:
            if x[0] < self.busy_mark:
                self.busy_late += 1
        spans = _merge_spans(self.busy + self.pending_busy)
        self.pending_busy = []
        keep = []
        order = sorted((lo, hi, idx) for idx, (lo, hi) in self.steps.items())
        los = [x[0] for x in order]
        for a, b in spans:
            if final or b <= mark:
                self.busy_total += b - a
                i = max(bisect.bisect_right(los, a) - 1, 0)
                while i < len(order) and order[i][0] < b:
                    lo, hi, idx = order[i]
                    lo2, hi2 = max(a, lo), min(b, hi)
                    if hi2 > lo2:
                        self.busy_steps[idx] = self.busy_steps.get(idx, 0) + hi2 - lo2
                    i += 1
                self.busy_folded = True
            else:
                keep.append([a, b])
        self.busy = keep
        if not final:
            self.busy_mark = max(self.busy_mark, mark)

    def events(self, batch):
        for e in batch:
            ph = e.get("ph")
            if ph == "X":
                self.complete(e)
            elif ph == "i" and e.get("name") == "[memory]":
                self.memory(e)
            elif ph == "M" and e.get("name") == "process_labels":
                if e.get("args", {}).get("labels") == "CPU":
                    self.pid = e.get("pid")
            elif ph == "M" and e.get("name") == "process_name" and self.program is None:
                self.program = e.get("args", {}).get("name")

    def complete(self, e):
        cat = e.get("cat")
        ts = e.get("ts", 0.0)
        durus = e.get("dur", 0.0) or 0.0
        dur = max(_ns(durus), 0)
        start = _ns(ts)
        if self.t_min is None or start < self.t_min:
            self.t_min = start
        if self.t_max is None or start + dur > self.t_max:
            self.t_max = start + dur
        args = e.get("args") or {}
        name = e.get("name") or "unknown"
        if cat in DEVICE_WORK:
            self.agg("gpu", name, dur)
            self.add_busy(start, start + dur)
            ext = args.get("External id")
            if ext is not None:
                op = self.op_name_of(ext)
                if op is not None:
                    self.tables["op"][op[0]].extra2 += dur
                    self.tables["shape"][op].extra2 += dur
                key = self.coll_ext.get(ext)
                if key is not None and cat == "kernel":
                    self.coll[key][4] += dur
        elif cat in ("cuda_runtime", "cuda_driver"):
            self.agg("api", name, dur)
            if "kernel" in args or name in ("cudaGraphLaunch", "cuGraphLaunch"):
                self.launches += 1
                k = args.get("kernel") or "(graph)"
                self.agg("launch", k, dur)
        elif cat == "cpu_op":
            if name == "record_param_comms":
                return
            if "Record function id" in args:
                self.operator(e, name, start, dur, args)
                return
            a = self.agg("lib", name, dur)
            f = args.get("flops")
            if isinstance(f, (int, float)):
                a.extra += int(f)
            if "Collective name" in args:
                self.collective(e, args, dur)
        elif cat == "user_annotation":
            m = STEP_RE.match(name)
            if m:
                # the trace writes steps 3 ns short (chrome.c): the header's
                # wall time gives the end (finish() corrects it); a step
                # that comes after device work was folded has no busy time
                self.steps[int(m.group(1))] = (start, start + dur + 3)
                self.step_tid[int(m.group(1))] = e.get("tid")
                self.step_order = None
                if self.busy_folded:
                    self.steps_after_fold = True
            elif name.startswith("nccl:") and "Input type" in args:
                # the annotation chrome.c writes around one of our
                # collective calls (torch's own record_function of that
                # name has no "Input type": an annotation row, below)
                span = (e.get("tid"), ts, durus)
                key = self.coll_by_span.pop(span, None)
                ext = args.get("External id")
                if key is not None:
                    self.coll_ext[ext] = key
                else:
                    self.annot_by_span[span] = ext
            elif "Record function id" in args:
                # torch's record_function annotations (Optimizer.step#...,
                # a user's): rows of the operator table, as summary_agg.c
                self.operator(e, name, start, dur, args, "annotation")

    def operator(self, e, name, start, dur, args, kind="operator"):
        a = self.agg("op", name, dur)
        if a.calls == 1:
            a.kind = kind
        dims = args.get("Input Dims")
        if dims is not None:
            self.ops_with_shapes += 1
        skey = (name, str(dims) if dims is not None else "[]")   # torch's own spelling of int lists
        b = self.agg("shape", skey, dur)
        if b.calls == 1:
            b.kind = kind
        tid = e.get("tid")
        done = self.op_done.setdefault(tid, [])
        end = start + dur
        children = 0
        while done and done[-1][0] >= start and done[-1][1] <= end:
            children += done.pop()[2]
        a.extra += max(dur - children, 0)
        b.extra += max(dur - children, 0)
        done.append((start, end, dur))
        if len(done) > 4096:          # unclaimed roots: keep the recent ones
            self.op_roots(tid, done[:2048])
            del done[:2048]
        ext = args.get("External id")
        if isinstance(ext, int) and -(1 << 63) <= ext < (1 << 63):
            k = self.op_name_index.get(skey)
            if k is None:
                k = self.op_name_index[skey] = len(self.op_name_list)
                self.op_name_list.append(skey)
            self.op_add(ext, k)

    def op_roots(self, tid, roots):
        """Adds the time of top-level operators and annotations (those no
        parent claimed) to the steps of their thread that they fall in: a
        step's self time is the rest, as summary_agg.c's.  The trace writes
        its steps before any other event (chrome.c), so they are known."""
        if not self.steps:
            return
        if self.step_order is None:
            order = sorted((lo, hi, idx) for idx, (lo, hi) in self.steps.items())
            self.step_order = ([x[0] for x in order], order)
        starts, order = self.step_order
        for a, b, _ in roots:
            i = max(bisect.bisect_right(starts, a) - 1, 0)
            while i < len(order) and order[i][0] < b:
                lo, hi, idx = order[i]
                x, y = max(a, lo), min(b, hi)
                if y > x and self.step_tid.get(idx) == tid:
                    self.step_cov[idx] = self.step_cov.get(idx, 0) + y - x
                i += 1

    def op_add(self, ext, k):
        """Operators are looked up by External id while they are still read
        (a kernel names its operator).  Re-sorting every id at a lookup that
        follows an id out of order (a parent ends after its children) cost
        the square of their number: 126 s for 20,000 operators interleaved
        with their kernels.  The ids since the last fold are looked up in a
        dict instead, and folded into the sorted arrays (a stable sort, so
        that the later of one id stays last) once they outnumber an eighth of
        them: O(n log n) in all, and the dict stays small beside the arrays."""
        self.op_tail_ids.append(ext)
        self.op_tail_idx.append(k)
        self.op_tail[ext] = k
        if len(self.op_tail_ids) > max(OP_FOLD_MIN, len(self.op_ids) // 8):
            ids = self.op_ids + self.op_tail_ids
            idx = self.op_idx + self.op_tail_idx
            order = sorted(range(len(ids)), key=ids.__getitem__)
            self.op_ids = array("q", (ids[i] for i in order))
            self.op_idx = array("l", (idx[i] for i in order))
            self.op_tail_ids, self.op_tail_idx, self.op_tail = array("q"), array("l"), {}

    def op_name_of(self, ext):
        """(name, by-shape key) of the operator with External id "ext", or None."""
        if not isinstance(ext, int):
            return None
        k = self.op_tail.get(ext)
        if k is not None:
            return self.op_name_list[k]
        i = bisect.bisect_right(self.op_ids, ext) - 1     # the last one of that id, as a dict
        if i >= 0 and self.op_ids[i] == ext:
            return self.op_name_list[self.op_idx[i]]
        return None

    def collective(self, e, args, dur):
        try:
            size = max(args["In msg nelems"], args["Out msg nelems"]) * DTYPE_SIZE.get(args.get("dtype"), 0)
        except (KeyError, TypeError):
            size = 0
        key = (args["Collective name"], args.get("Group size", 0))
        row = self.coll.setdefault(key, [0, 0.0, 0.0, 0, 0])
        row[0] += 1
        row[1] += size
        row[2] += size * float(args.get("busbw factor", 1.0) or 0.0)
        row[3] += dur
        span = (e.get("tid"), e.get("ts"), e.get("dur"))
        ext = self.annot_by_span.pop(span, None)
        if ext is not None:
            self.coll_ext[ext] = key
        else:
            self.coll_by_span[span] = key

    def memory(self, e):
        a = e.get("args") or {}
        dev = a.get("Device Id", 0)
        total = a.get("Total Reserved", 0)
        nbytes = a.get("Bytes", 0)
        m = self.mem.get(dev)
        if m is None:
            start = max(total - nbytes, 0)
            m = self.mem[dev] = {"device": dev, "class": "device", "where": "GPU%d" % dev,
                                 "start_bytes": start, "peak_bytes": start, "peak_at_ns": None,
                                 "end_bytes": start, "process_peak_bytes": None, "allocs": 0,
                                 "frees": 0, "failed": None, "largest_failed_bytes": None}
        if nbytes > 0:
            m["allocs"] += 1
        elif nbytes < 0:
            m["frees"] += 1
        if total > m["peak_bytes"]:
            m["peak_bytes"] = total
            m["peak_at_ns"] = _ns(e.get("ts", 0.0))
        m["end_bytes"] = total

    def finish_ops(self):
        """The steps' row, STEP_ROW (summary_agg.c's tp_sumagg_finish_ops
        says why one row), once every event is in; returns the self time
        of all rows, which the shares divide by."""
        t = self.tables["op"]
        if not t:
            return 0
        self.step_order = None            # the steps' ends as finish() corrected them
        for tid, done in self.op_done.items():
            self.op_roots(tid, done)
        self.op_done = {}
        for idx, (lo, hi) in sorted(self.steps.items()):
            dur = hi - lo
            own = max(dur - self.step_cov.get(idx, 0), 0)
            for table, key in (("op", STEP_ROW), ("shape", (STEP_ROW, "[]"))):
                if table == "shape" and not self.ops_with_shapes:
                    continue
                a = self.agg(table, key, dur)
                a.kind = "step"
                a.extra += own
        return sum(a.extra for a in t.values())

    def finish(self, path):
        h = self.header
        tp = h.get("trainprof") or {}
        if not isinstance(tp, dict) or "steps" not in tp:
            raise SummaryError("not a trainprof trace (no trainprof.steps in its metadata)")
        base = int(h.get("baseTimeNanoseconds") or 0)
        dist = h.get("distributedInfo") or {}
        cfg = tp.get("configuration") or {}
        gpu = (tp.get("coverage") or {}).get("kernels_seen_by_cupti") is not None
        for st in tp.get("steps") or []:
            if st["step"] in self.steps:
                a = self.steps[st["step"]][0]
                self.steps[st["step"]] = (a, a + _ns(st.get("wall_ms", 0) * 1000.0))
        self.fold_busy(final=True)
        ops_self = self.finish_ops()
        steps, sum_wall, sum_flops, sum_busy = [], 0, 0, 0
        for s in tp.get("steps") or []:
            idx = s["step"]
            wall = _ns(s.get("wall_ms", 0) * 1000.0)
            flops = int(s.get("flops", 0))
            bz = None
            if gpu and idx in self.steps and not self.steps_after_fold:
                bz = self.busy_steps.get(idx, 0)
                sum_busy += bz
            steps.append({"step": idx, "wall_ns": wall, "flops": flops,
                          "tflops_per_s": flops / wall / 1e3 if wall > 0 else 0,
                          "gpu_busy_ns": bz})
            sum_wall += wall
            sum_flops += flops
        peak = None
        try:
            peak = float(cfg.get("TRAINPROF_PEAK_TFLOPS") or "") or None
        except ValueError:
            pass
        tf = sum_flops / sum_wall / 1e3 if sum_wall > 0 else 0
        run = cfg.get("TRAINPROF_RUN_NAME") or ""
        if not run or "{" in run:
            parent = os.path.dirname(os.path.dirname(os.path.abspath(path)))
            run = os.path.basename(parent)
        coll_rows, coll_time, coll_bytes, coll_calls = [], 0, 0.0, 0
        dev_any = gpu and any(r[4] > 0 for r in self.coll.values())
        mixed = dev_any and any(r[4] <= 0 for r in self.coll.values())
        for (kind, ranks), (calls, size, bus, host_ns, dev_ns) in sorted(self.coll.items()):
            on_dev = dev_any and dev_ns > 0
            t = dev_ns if on_dev else host_ns
            coll_rows.append({"kind": kind, "ranks": ranks, "calls": calls, "bytes": size,
                              "time_ns": t, "host_ns": host_ns, "device_ns": dev_ns if gpu else None,
                              "basis": "device" if on_dev else "host-enqueue",
                              "algbw_gbps": size / t if t > 0 else None,
                              "busbw_gbps": bus / t if t > 0 else None})
            coll_time += t
            coll_bytes += size
            coll_calls += calls
        cov = tp.get("coverage") or {}
        t = self.tables
        return {
            "schema": SCHEMA, "trace": os.path.basename(path), "source": "trace",
            "run": run, "rank": dist.get("rank", 0), "local_rank": None,
            "world_size": dist.get("world_size", 1), "local_world_size": None, "node_rank": None,
            "host": None, "pid": self.pid, "program": self.program,
            "window": {"batch": tp.get("batch"), "first_step": tp.get("first_step"),
                       "last_step": tp.get("last_step"), "steps_recorded": tp.get("steps_recorded", 0),
                       "step_signal": tp.get("step_signal", ""), "partial": bool(tp.get("partial")),
                       "partial_reason": tp.get("partial_reason"),
                       "start_ns": base + self.t_min if self.t_min is not None else None,
                       "end_ns": base + self.t_max if self.t_max is not None else None},
            "steps": steps,
            "totals": {"steps": len(steps), "wall_ns": sum_wall,
                       "mean_step_ns": sum_wall // len(steps) if steps else None,
                       "flops": sum_flops, "tflops_per_s": tf, "peak_tflops": peak,
                       "mfu_like": tf / peak if peak else None,
                       "gpu_busy_ns": sum_busy if gpu else None,
                       "gpu_busy_share": (sum_busy / sum_wall if sum_wall > 0 else None) if gpu else None,
                       "window_flops": tp.get("flops", 0),
                       "library_flops": sum(a.extra for a in t["lib"].values()), "graph_flops": None},
            "host_launch_count": self.launches,
            "host_api_ns": sum(a.total for a in t["api"].values()),
            "gpu_ns": sum(a.total for a in t["gpu"].values()) if gpu else None,
            **{tb.key: _table(t[tb.agg], tb) for tb in NAME_TABLES},
            "operators": _op_table(t["op"], ops_self),
            "operators_by_shape": _op_table(t["shape"], ops_self) if self.ops_with_shapes else None,
            "memory": [dict(self.mem[d], peak_at_ns=None if self.mem[d]["peak_at_ns"] is None
                            else base + self.mem[d]["peak_at_ns"]) for d in sorted(self.mem)],
            "collectives": {"basis": "none" if not self.coll else "host-enqueue" if not dev_any
                            else "mixed" if mixed else "device",
                            "captured_calls": None, "rows": coll_rows, "calls": coll_calls,
                            "bytes": coll_bytes, "time_ns": coll_time},
            "busy_late_spans": self.busy_late,
            "events": {"records": tp.get("records"), "dropped": tp.get("dropped_events", 0),
                       "late": tp.get("late_events", 0),
                       "device_dropped": cov.get("device_records_dropped", 0), "incomplete": False},
            "gpu": gpu, "gpu_activity": tp.get("gpu_activity", "off"),
            "coverage": {"host_launches": cov.get("launches_seen_by_wrappers"),
                         "gpu_kernels": cov.get("kernels_seen_by_cupti"),
                         "gpu_kernels_linked": cov.get("kernels_linked_to_launches"),
                         "ratio": cov.get("ratio")},
        }


def _op_table(t, self_ns):
    """The operator table of summary_json.c (put_op_table): rows by total
    time, each with its kind, self and device time and their shares of
    "self_ns", the self time of all rows."""
    rows = []
    for key, a in sorted(t.items(), key=lambda kv: (-kv[1].total, kv[0]))[:OPS_TOP]:
        r = {"name": key} if isinstance(key, str) else {"name": key[0], "input_shapes": key[1]}
        r.update({"kind": a.kind, "calls": a.calls, "total_ns": a.total, "self_ns": a.extra,
                  "gpu_ns": a.extra2,
                  "total_share": a.total / self_ns if self_ns > 0 else None,
                  "self_share": a.extra / self_ns if self_ns > 0 else None})
        rows.append(r)
    return {"distinct": len(t), "calls": sum(a.calls for a in t.values()),
            "total_ns": sum(a.total for a in t.values()), "self_ns": self_ns, "top": rows}


def _table(t, tb):
    """A name table of summary_json.c (put_table) by its definition "tb"
    (NAME_TABLES): its rows kept, in its order, with its fields."""
    key = (lambda kv: (-kv[1].calls, kv[0])) if tb.by_calls else (lambda kv: (-kv[1].total, kv[0]))
    rows = []
    for name, a in sorted(t.items(), key=key)[:tb.top]:
        r = {"name": name, "calls": a.calls, "total_ns": a.total}
        r.update((field, getattr(a, attr)) for field, attr in tb.fields)
        rows.append(r)
    return {"distinct": len(t), "calls": sum(a.calls for a in t.values()),
            "total_ns": sum(a.total for a in t.values()), "top": rows}


def summarize_trace(path, follow=True):
    """The summary.json dict of one trace file, streamed."""
    s = _TraceSummary()
    stream_trace(path, s.header.__setitem__, s.events, follow)
    return s.finish(path)


def _no_constant(name):
    raise ValueError("%s is not a number JSON allows" % name)


def load_summary(path, follow=True):
    data, _ = read_regular(path, MAX_SUMMARY, follow)
    try:
        d = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise SummaryError("nested too deeply for Python's json")
    if not isinstance(d, dict) or not str(d.get("schema", "")).startswith("trainprof.summary/"):
        raise SummaryError("not a trainprof summary.json (no \"schema\": \"%s\")" % SCHEMA)
    d.setdefault("source", "summary.json")
    return d


def _int(v):
    return type(v) is int and abs(v) < 1 << 63


def _num(v):
    return type(v) in (int, float) and math.isfinite(v) and abs(v) < 1 << 63


def check_summary(d):
    """None when the fields the job table reads (job()) have the schema's
    types, else what is wrong: a malformed summary.json among thousands is
    refused alone instead of ending the job table with a traceback."""
    if not _int(d.get("rank", 0)):
        return "rank %.40r is not an integer" % (d.get("rank"),)
    if d.get("world_size") is not None and not _int(d["world_size"]):
        return "world_size %.40r is not an integer" % (d["world_size"],)
    if not isinstance(d.get("source", ""), str):
        return "source is not a string"
    steps = d.get("steps")
    if steps is not None and not isinstance(steps, list):
        return "steps is not a list"
    for i, st in enumerate(steps or []):
        if not isinstance(st, dict) or not _int(st.get("step")) or not _num(st.get("wall_ns")):
            return "steps[%d] has no integer step and number wall_ns" % i
        if ("flops" in st and not _num(st["flops"])) or \
                (st.get("gpu_busy_ns") is not None and not _num(st["gpu_busy_ns"])):
            return "steps[%d]: flops or gpu_busy_ns is not a number" % i
    for key, sub in (("collectives", "time_ns"), ("totals", "peak_tflops")):
        v = d.get(key)
        if v and not isinstance(v, dict):
            return "%s is not an object" % key
        if v and v.get(sub) is not None and not _num(v[sub]):
            return "%s.%s is not a number" % (key, sub)
    return None


# ---- finding inputs ------------------------------------------------------------

def _base(name):
    for ext in (".summary.json", ".json.gz", ".json"):
        if name.endswith(ext):
            return name[:-len(ext)]
    return None


def _is_report(name):
    return name.endswith((".summary.json", ".memory.json"))


def _regular(path, say):
    """Whether a name met while walking a folder is a regular file (not a
    link, FIFO, device); says why not.  open_regular checks again when the
    file is read: this only keeps such a name from standing for a rank."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        say("%s: %s, not a regular file: skipped" % (path, "a symbolic link" if os.path.islink(path)
                                                      else "a FIFO, socket or device"))
        return False
    return True


def collect(paths, say=lambda msg: None):
    """[(kind, path, follow)]: a summary.json where one exists for a trace,
    else the trace; follow: whether a symbolic link is followed (a path
    given on the command line, not one met in a folder)."""
    explicit, summaries, traces = [], {}, {}
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    full = os.path.join(d, f)
                    if f.endswith(".summary.json"):
                        if _regular(full, say):
                            summaries.setdefault(_base(f), full)
                    elif f.endswith((".json", ".json.gz")) and not _is_report(f) \
                            and not f.endswith(".tmp"):
                        if _regular(full, say):
                            traces.setdefault(_base(f), full)
        elif os.path.exists(p):
            explicit.append(p)
        else:
            raise SummaryError("%s: no such file or folder" % p)
    out = []
    for p in explicit:
        f = os.path.basename(p)
        if f.endswith(".summary.json"):
            out.append(("summary", p, True))
        else:
            # a trace named on the command line: its summary.json if it sits in
            # the run's reports folder (or beside it)
            b = _base(f) or f
            rep = [os.path.join(os.path.dirname(p), b + ".summary.json"),
                   os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(p))), "reports",
                                b + ".summary.json")]
            found = [r for r in rep if os.path.isfile(r) and not os.path.islink(r)]
            out.append(("summary", found[0], False) if found else ("trace", p, True))
    for b, p in sorted(summaries.items()):
        out.append(("summary", p, False))
    for b, p in sorted(traces.items()):
        if b not in summaries:
            out.append(("trace", p, False))
    return out


# ---- printing ------------------------------------------------------------------

def _cut(c):
    """A left-aligned cell cut to NAME_MAX bytes on a UTF-8 boundary, "..."
    appended (table.c's cut_utf8)."""
    b = c.encode("utf-8")
    if len(b) <= NAME_MAX:
        return c
    return b[:NAME_MAX].decode("utf-8", "ignore") + "..."


def _table_text(titles, rows, left=1, left_last=False):
    """Columns as table.c lays them out: the first "left" (and the last,
    with left_last: torch's "Input Shapes") left-aligned and cut to NAME_MAX
    bytes, the others right-aligned."""
    n = len(titles)

    def is_left(i):
        return i < left or (left_last and i == n - 1)

    rows = [[_cut(c) if is_left(i) else c for i, c in enumerate("--" if c is None else str(c) for c in r)]
            for r in rows]
    w = [len(t) for t in titles]
    for r in rows:
        for i, c in enumerate(r):
            w[i] = max(w[i], len(c))
    rule = "  ".join("-" * x for x in w)

    def line(cells):
        return "  ".join(c.ljust(w[i]) if is_left(i) else c.rjust(w[i])
                         for i, c in enumerate(cells)).rstrip()

    out = [rule, line(titles), rule] + [line(r) for r in rows] + [rule]
    return "\n".join(out) + "\n"


def _human(n):
    if n is None:
        return "--"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return "%.2f %s" % (n / k, unit)
    return "%d B" % n


def _left_out(out, tb, rows, what):
    """The rows of a table summary.json did not keep: counted, as summary.c
    counts the operator rows past its 100."""
    more = (tb.get("distinct") or 0) - len(rows)
    if more > 0:
        out.write("%d more rows left out (the %d with the most %s are shown)\n" % (more, len(rows), what))


def _owner_where(device, cls):
    """A (device, class) as the owner tables' headings name it (summary.c owner_where)."""
    if cls == "host_pinned" or not isinstance(device, int) or device < 0:
        return "host pinned"
    return "GPU %d managed" % device if cls == "managed" else "GPU %d" % device


def _mem_where(device, cls):
    """A (device, class) as the memory tables' cells name it (tp_memory_where)."""
    if cls == "host_pinned" or not isinstance(device, int) or device < 0:
        return "host pinned"
    return "GPU%d managed" % device if cls == "managed" else "GPU%d" % device


def _render_owners(d, out):
    """The memory ledger's tables (summary.c put_memory_owners): per (device,
    class) its owners, each with its call sites indented under it (rows of
    nothing left out); the coverage and exactness lines; what was held at exit."""
    groups = collections.OrderedDict()
    for o in d.get("memory_owners") or []:
        if not isinstance(o, dict):
            continue
        key = (o.get("device"), o.get("class"))
        groups.setdefault(key, [])
        if not any(o.get(k) for k in ("start_bytes", "end_bytes", "peak_bytes", "allocs", "frees")):
            continue
        groups[key].append([o.get("owner"), _human(o.get("end_bytes")), _human(o.get("peak_bytes")),
                            o.get("allocs"), o.get("frees")])
        for st in [x for x in o.get("sites") or [] if isinstance(x, dict)]:
            groups[key].append(["  " + (st.get("site") or "(call site unknown)"), _human(st.get("bytes")), "",
                                st.get("allocs"), ""])
    tables = False
    for (device, cls), rows in groups.items():
        if rows:
            out.write("\nMemory by owner (%s)\n" % _owner_where(device, cls))
            out.write(_table_text(("Owner / call site", "Held at end", "Peak", "Allocs", "Frees"), rows))
            tables = True
    cov = d.get("memory_coverage")
    if tables and isinstance(cov, (int, float)) and cov >= 0:
        out.write("Owner named for %.1f %% of the bytes allocated through intercepted calls since activation\n"
                  % (100.0 * cov))
    if tables and d.get("memory_owners_exact") is False:
        out.write("These owner tables are the ledger's best account: records were lost, or the"
                  " window's starting levels were no longer kept\n")
    held = [h for h in d.get("memory_held_at_exit") or [] if isinstance(h, dict)]
    if held:
        out.write("\nMemory held at exit\n")
        out.write(_table_text(("Owner", "Memory", "Bytes", "Blocks"),
                              [[h.get("owner"), _mem_where(h.get("device"), h.get("class")),
                                _human(h.get("bytes")), h.get("blocks")] for h in held], left=2))


def render_one(d, out):
    """One window's report from its summary.json dict, in summary.c's
    sections, columns, units and row order (the rows summary.json keeps)."""
    w = d.get("window") or {}
    t = d.get("totals") or {}
    out.write("trainprof summary of %s (from %s)\n\n" % (d.get("trace"), d.get("source", "summary.json")))
    out.write("Run:          %s\n" % d.get("run"))
    out.write("Program:      %s (pid %s) on %s\n" % (d.get("program"), d.get("pid"), d.get("host") or "?"))
    out.write("Rank:         %s of %s (local rank %s)\n" % (d.get("rank"), d.get("world_size"),
                                                          "?" if d.get("local_rank") is None else d["local_rank"]))
    if w.get("steps_recorded"):
        out.write("Steps:        %s..%s (%s recorded), batch %s\n" % (w.get("first_step"), w.get("last_step"),
                                                                  w.get("steps_recorded"), w.get("batch")))
    else:
        out.write("Steps:        none recorded, batch %s\n" % w.get("batch"))
    out.write("Step signal:  %s\n" % (w.get("step_signal") or "(none fired)"))
    if w.get("start_ns") is not None and w.get("end_ns") is not None:
        out.write("Window (ms):  %s wall time%s\n" % (
            _ms(w["end_ns"] - w["start_ns"]),
            ", partial (cut short by %s)" % (w.get("partial_reason") or "exit") if w.get("partial") else ""))
    steps = d.get("steps") or []
    out.write("\nPer-step wall time\n")
    if not steps:
        out.write("(no step recorded)\n")
    else:
        gpu = d.get("gpu")
        flops = bool(t.get("flops"))        # no FLOPs columns of zeros (a CPU job), as the library's report
        titles = [x for x in STEP_TITLES if (flops or x not in ("GFLOP", "TFLOP/s")) and (gpu or x != "GPU busy")]
        rows = []
        for s in steps:
            r = [s["step"], _ms(s["wall_ns"])]
            if flops:
                r += [_gflop(s["flops"]), "%.3f" % s["tflops_per_s"]]
            if gpu:
                r.append(_pct_of(s["gpu_busy_ns"], s["wall_ns"]) if s.get("gpu_busy_ns") is not None else "--")
            rows.append(r)
        out.write(_table_text(titles, rows))
        if gpu:
            out.write("GPU busy share of the steps: %s (kernels, copies and sets on any stream)\n"
                      % _pct(t.get("gpu_busy_share") or 0.0))
        out.write("Mean step wall time (ms): %s over %d steps\n" % (_ms(t.get("mean_step_ns")), len(steps)))
        if not flops:
            out.write("Library FLOPs: none in these steps (counted from cuBLAS, cuBLASLt and cuDNN calls only)\n")
        else:
            out.write("Library FLOPs in these steps: %s GFLOP, achieved %.3f TFLOP/s\n"
                      % (_gflop(t.get("flops", 0)), t.get("tflops_per_s", 0)))
            if t.get("mfu_like") is not None:
                out.write("Library FLOP utilisation (MFU-like): %.2f%% of %.1f TFLOP/s (TRAINPROF_PEAK_TFLOPS);"
                          " counts cuBLAS/cuDNN work only, recompute included\n"
                          % (100 * t["mfu_like"], t["peak_tflops"]))
            else:
                out.write("Library FLOP utilisation (MFU-like): set TRAINPROF_PEAK_TFLOPS to the GPU's"
                          " dense peak\n")

    ops = d.get("operators") or {}
    all_self = ops.get("self_ns")

    def op_cells(r):
        # a summary.json of before the shares: the shares it wrote, "--" without
        share = [_pct2_of(r["total_ns"], all_self), _ms(r.get("self_ns")), _pct2_of(r.get("self_ns"), all_self)] \
            if all_self is not None else [_pct2(r.get("total_share")), _ms(r.get("self_ns")),
                                         _pct2(r.get("self_share"))]
        return [r["calls"], _ms(r["total_ns"])] + share + [_us(r["total_ns"] // r["calls"] if r["calls"] else 0)] + \
            ([_ms(r.get("gpu_ns"))] if d.get("gpu") else [])

    op_titles = list(OP_TITLES) + (["GPU (ms)"] if d.get("gpu") else [])
    if ops.get("top"):
        out.write("\nOperators (PyTorch)\n")
        out.write(_table_text(op_titles, [[r["name"]] + op_cells(r) for r in ops["top"]]))
        _left_out(out, ops, ops["top"], "host total time")
        out.write("Host total %% and Self host %%: shares of the self host time of all rows, %s ms"
                  " (torch's CPU total %% and Self CPU %%)" % _ms(all_self or 0))
        if steps:
            out.write("; %s: the %d steps, self the time outside any top-level operator or annotation"
                      % (STEP_ROW, len(steps)))
        out.write("\n")
        shapes = d.get("operators_by_shape") or {}
        if shapes.get("top"):
            out.write("\nOperators by input shape\n")
            out.write(_table_text(op_titles + ["Input Shapes"],
                                  [[r["name"]] + op_cells(r) + [r.get("input_shapes")] for r in shapes["top"]],
                                  left=1, left_last=True))
            _left_out(out, shapes, shapes["top"], "host total time")
    for tb in NAME_TABLES:
        rows = (d.get(tb.key) or {}).get("top") or []
        if tb.key == "gpu_work":
            out.write("\nGPU activity: %s\n" % d.get("gpu_activity", "off"))
            if not d.get("gpu"):
                continue
            if not rows:
                out.write("(no device work recorded)\n")
        elif not rows and not (tb.key == "library_calls" and t.get("graph_flops")):
            continue
        else:
            out.write("\n%s\n" % tb.heading)
        if rows:
            out.write(_table_text(tb.titles, [[r["name"]] + tb.cells(d, r) for r in rows]))
            _left_out(out, d[tb.key], rows, "calls" if tb.by_calls else "total time")
            out.write(tb.total(d) + "\n")
        if tb.key == "library_calls" and t.get("graph_flops"):
            out.write("Library FLOPs run by CUDA graph launches: %s GFLOP (captured calls count at each launch)\n"
                      % _gflop(t["graph_flops"]))
        if tb.key == "gpu_work":
            c = d.get("coverage") or {}
            out.write("Coverage: %s kernels seen by CUPTI, %s linked to a launch seen by the wrappers (%s);"
                      " %s launches seen by the wrappers\n"
                      % (c.get("gpu_kernels"), c.get("gpu_kernels_linked"),
                         "n/a" if c.get("ratio") is None else _pct_of(c.get("gpu_kernels_linked"), c.get("gpu_kernels")),
                         c.get("host_launches")))
            if (d.get("events") or {}).get("device_dropped"):
                out.write("Device records dropped: %s (CUPTI buffers full)\n" % d["events"]["device_dropped"])
    mem = d.get("memory") or []
    if mem:
        start = w.get("start_ns")
        out.write("\nMemory held (reserved from CUDA)\n")
        out.write(_table_text(MEMORY_TITLES,
                              [[m["where"], _human(m["start_bytes"]), _human(m["peak_bytes"]),
                                "--" if m.get("peak_at_ns") is None or start is None
                                else _ms(max(m["peak_at_ns"] - start, 0)),
                                _human(m["end_bytes"]), _human(m.get("process_peak_bytes")),
                                m["allocs"], m["frees"], m.get("failed"),
                                _human(m.get("largest_failed_bytes")) if m.get("failed") else "--"]
                               for m in mem]))
        out.write("Bytes the process reserved from CUDA (cudaMalloc/VMM level), not a caching allocator's"
                  " allocated bytes: compare with torch.cuda.memory_reserved(), not memory_allocated()\n")
    _render_owners(d, out)
    co = d.get("collectives") or {}
    if co.get("rows") or co.get("captured_calls"):
        basis = co.get("basis")
        out.write("\nCollectives (NCCL); time: %s\n" % (
            "device (kernel) time of the kernels each call issued" if basis == "device" else
            "device (kernel) time of the kernels each call issued; host-enqueue based where no kernel"
            " was seen (Basis)" if basis == "mixed" else
            "host call durations, host-enqueue based (no device time: bandwidths are upper bounds,"
            " not transfer rates)"))
        if co.get("rows"):
            out.write(_table_text(COLL_TITLES,
                                  [[r["kind"], r["ranks"], r["calls"], "%.3f" % (r["bytes"] / 1e6),
                                    _ms(r["time_ns"]), _us(r["time_ns"] // r["calls"]),
                                    "--" if r["algbw_gbps"] is None else "%.2f" % r["algbw_gbps"],
                                    "--" if r["busbw_gbps"] is None else "%.2f" % r["busbw_gbps"],
                                    r["basis"]] for r in co["rows"]]))
        out.write("busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter,"
                  " all_to_all, gather and scatter, 1 otherwise (nccl-tests)\n")
        if co.get("captured_calls"):
            out.write("Collective calls captured into CUDA graphs (not counted above): %s\n" % co["captured_calls"])
    ev = d.get("events") or {}
    out.write("\nEvents: %s records, %s dropped, %s late\n" % (ev.get("records"), ev.get("dropped"), ev.get("late")))


def _pct2(x):
    return "--" if x is None else "%.2f%%" % (100.0 * x)


def _median(v):
    return statistics.median(v) if v else None


def job(docs):
    """The job analysis of several ranks' summaries, as a dict."""
    ranks = {}
    for d in docs:
        r = ranks.setdefault(d.get("rank", 0), {"rank": d.get("rank", 0), "host": d.get("host"),
                                                "steps": {}, "wall": 0, "busy": 0, "busy_known": False,
                                                "coll_ns": 0, "flops": 0, "peak": None, "windows": 0})
        r["windows"] += 1
        for s in d.get("steps") or []:
            r["steps"][s["step"]] = s["wall_ns"]
            r["wall"] += s["wall_ns"]
            r["flops"] += s.get("flops", 0)
            if s.get("gpu_busy_ns") is not None:
                r["busy"] += s["gpu_busy_ns"]
                r["busy_known"] = True
        r["coll_ns"] += (d.get("collectives") or {}).get("time_ns", 0) or 0
        r["peak"] = (d.get("totals") or {}).get("peak_tflops") or r["peak"]
    step_ids = sorted({s for r in ranks.values() for s in r["steps"]})
    steps = []
    for s in step_ids:
        v = [(r["steps"][s], k) for k, r in ranks.items() if s in r["steps"]]
        med = _median([x for x, _ in v])
        slow, who = max(v)
        steps.append({"step": s, "ranks": len(v), "median_ns": med, "slowest_ns": slow,
                      "slowest_rank": who, "slowest_vs_median": slow / med - 1 if med else None})
    coll_min = min((r["coll_ns"] for r in ranks.values()), default=0)
    per_rank = []
    means = {}
    for k in sorted(ranks):
        r = ranks[k]
        n = len(r["steps"])
        mean = r["wall"] / n if n else None
        if mean is not None:
            means[k] = mean
        tf = r["flops"] / r["wall"] / 1e3 if r["wall"] else None
        per_rank.append({"rank": k, "host": r["host"], "windows": r["windows"], "steps": n,
                         "mean_step_ns": mean,
                         "gpu_busy_share": r["busy"] / r["wall"] if r["busy_known"] and r["wall"] else None,
                         "collective_ns": r["coll_ns"], "collective_wait_ns": r["coll_ns"] - coll_min,
                         "tflops_per_s": tf,
                         "mfu_like": tf / r["peak"] if tf is not None and r["peak"] else None})
    med = _median(list(means.values()))
    stragglers = []
    for p in per_rank:
        if med and p["mean_step_ns"] is not None:
            p["vs_median"] = p["mean_step_ns"] / med - 1
            if p["vs_median"] > STRAGGLER:
                stragglers.append({"rank": p["rank"], "slower": p["vs_median"]})
        else:
            p["vs_median"] = None
    stragglers.sort(key=lambda x: -x["slower"])
    mfu = sorted(p["mfu_like"] for p in per_rank if p["mfu_like"] is not None)
    sources = {}
    for d in docs:
        sources[d.get("source", "summary.json")] = sources.get(d.get("source", "summary.json"), 0) + 1
    return {"ranks": len(ranks), "world_size": max((d.get("world_size") or 0 for d in docs), default=0),
            "sources": sources,
            "runs": sorted({str(d.get("run")) for d in docs}), "windows": len(docs),
            "median_step_ns": med, "steps": steps, "per_rank": per_rank, "stragglers": stragglers,
            "mfu_like": {"min": mfu[0], "median": _median(mfu), "max": mfu[-1]} if mfu else None}


def render_job(j, out):
    out.write("trainprof job summary: %d ranks (world size %d), run %s, %d windows (from %s)\n"
              % (j["ranks"], j["world_size"], ", ".join(j["runs"]), j["windows"],
                 ", ".join("%d %s" % (n, k) for k, n in sorted(j["sources"].items()))))
    out.write("\nPer step: median and slowest rank\n")
    out.write(_table_text(["Step", "Ranks", "Median (ms)", "Slowest (ms)", "Slowest rank", "vs median"],
                          [[s["step"], s["ranks"], _ms(s["median_ns"]), _ms(s["slowest_ns"]), s["slowest_rank"],
                            "--" if s["slowest_vs_median"] is None else "%+.1f%%" % (100 * s["slowest_vs_median"])]
                           for s in j["steps"]]))
    out.write("\nPer rank (collective wait: collective time minus the fastest rank's)\n")
    out.write(_table_text(["Rank", "Host", "Steps", "Mean step (ms)", "vs median", "GPU busy",
                           "Collectives (ms)", "Coll. wait (ms)", "TFLOP/s", "MFU-like"],
                          [[p["rank"], p["host"] or "?", p["steps"], _ms(p["mean_step_ns"]),
                            "--" if p["vs_median"] is None else "%+.1f%%" % (100 * p["vs_median"]),
                            _pct(p["gpu_busy_share"]), _ms(p["collective_ns"]), _ms(p["collective_wait_ns"]),
                            "--" if p["tflops_per_s"] is None else "%.3f" % p["tflops_per_s"],
                            _pct(p["mfu_like"])] for p in j["per_rank"]], left=2))
    m = j["mfu_like"]
    if m:
        out.write("MFU-like spread: min %s, median %s, max %s\n" % (_pct(m["min"]), _pct(m["median"]), _pct(m["max"])))
    else:
        out.write("MFU-like spread: unknown (no TRAINPROF_PEAK_TFLOPS)\n")
    if j["stragglers"]:
        out.write("stragglers: %s\n" % ", ".join("rank %s (%+.0f%%)" % (s["rank"], 100 * s["slower"])
                                                 for s in j["stragglers"]))
    else:
        out.write("stragglers: none (no rank's mean step more than %d%% slower than the median)\n"
                  % int(100 * STRAGGLER))


def main(argv, prog="trainprof summary"):
    import argparse
    p = argparse.ArgumentParser(
        prog=prog, allow_abbrev=False,
        description="Print the summary of saved traces: one window's tables, or for several ranks\n"
                    "a job table (per-step median and slowest rank, per-rank GPU busy, collective\n"
                    "wait, MFU-like spread) naming the ranks more than 10% slower than the median.\n"
                    "PATH: trace files (.json, .json.gz), summary.json files, or folders (a run\n"
                    "folder); a trace's summary.json is read instead of the trace when present.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = p.parse_args(argv)
    failed = []

    def say(msg):
        failed.append(msg)
        sys.stderr.write("trainprof: error: %s\n" % _CONTROL.sub("?", " ".join(msg.split())))

    try:
        inputs = collect(args.paths, say)
    except SummaryError as e:
        sys.stderr.write("trainprof: error: %s\n" % _CONTROL.sub("?", str(e)))
        return 2
    if not inputs:
        sys.stderr.write("trainprof: error: no trace or summary.json under %s\n" % " ".join(args.paths))
        return 2
    docs, where = [], []
    for kind, path, follow in inputs:
        try:
            d = load_summary(path, follow) if kind == "summary" else summarize_trace(path, follow)
            why = check_summary(d)
            if why is not None:
                raise SummaryError("malformed: %s" % why)
            docs.append(d)
            where.append(path)
        except (FileError, TraceError) as e:        # its text names the file
            say(str(e))
        except DATA_ERRORS as e:
            say("%s: %s" % (path, _why(e)))
    if not docs:
        return 2
    out = io.StringIO()
    ranks = {d.get("rank") for d in docs}
    if len(ranks) > 1:
        j = job(docs)
        if args.json:
            json.dump(j, out, indent=1)
            out.write("\n")
        else:
            render_job(j, out)
    elif args.json:
        json.dump(docs if len(docs) > 1 else docs[0], out, indent=1)
        out.write("\n")
    else:
        for d, path in zip(docs, where):
            one = io.StringIO()
            try:
                render_one(d, one)
            except DATA_ERRORS as e:
                say("%s: %s" % (path, _why(e)))
                continue
            if out.tell():
                out.write("\n")
            out.write(one.getvalue())
    # text from the files is printed: none of its control characters may
    # drive the terminal (JSON escapes them itself)
    sys.stdout.write(_CONTROL.sub("?", out.getvalue()))
    return 2 if failed else 0


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def _why(e):
    """One line for an exception raised by a broken input."""
    if isinstance(e, (SummaryError, FileError, TraceError)):
        return str(e)
    if isinstance(e, RecursionError):
        return "nested too deeply for Python's json"
    if isinstance(e, (OSError, EOFError, zlib.error)):
        return "not a valid gzip or JSON file (%s)" % (e.strerror if isinstance(e, OSError)
                                                        and e.strerror else e)
    return "malformed (%s: %.200s)" % (type(e).__name__, e)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
