"""trainprof_cli.merge - `trainprof merge TRACE... -o OUT.json.gz`.

DESIGN
One Kineto-format trace with every rank, for Perfetto, streamed: memory does
not depend on the size of the inputs, and the work spreads over threads.

Reading (trainprof_cli.trace, the reader `summary` shares).  The top-level
keys before "traceEvents" are parsed one by one (json raw_decode).  The
event array then goes through the C engine (engine.c beside this file,
build/libtrainprof_merge.so, built with ISA-L):
it inflates, takes each event whatever its layout (trainprof's one per
line, Kineto's over several indented lines, json.dump's all on one),
rewrites it as one line, deflates in pieces on its threads and appends them
to the output; metadata events come back here to be rewritten with json.
What the engine cannot take (an element that is not an object, brackets
that do not match, a raw line break in a string) it leaves to the Python
path from that point; without the engine the Python path takes every
array: events laid out one per line ("line mode", checked on every chunk
with C-speed scans) are rewritten as text, any other layout is parsed
event by event with raw_decode ("event mode", slower).  Keys after the
array (Kineto's on-demand distributedInfo, traceName) are read at the end.

Rewriting, per event (the engine and line mode write the same bytes for
trainprof's layout): "pid" becomes slot x 2^22 + pid (slot: the input's
place in rank order; Linux pids are below 2^22, so pid mod 2^22 is the
original, and GPU device pids 0..15 of different ranks stay apart); flow
ids ("id", "bind_id" of s/t/f events) get the slot appended as
fixed-width decimal digits (id x 10^d + slot: unique, below 2^53 for
CUPTI's 32-bit ids); process_name becomes "rank N <name>",
process_sort_index slot x 2^40 + the original; "ts" moves by the rank's
time shift when it is not 0.  A pid that has no process_name or
process_sort_index gets them after the rank's events.  The output is raw
deflate in pieces, each byte-aligned (sync flush), concatenated into one
gzip member as pigz does, CRC-32s combined: a single gzip member, as
catapult needs.  On the Python path chunks of events go to worker
processes that rewrite and deflate them.

Time base (trace metadata "trainprof"."clock", handlers/chrome_header.c): each
window read (tick, CLOCK_REALTIME, CLOCK_MONOTONIC) at its start and end,
and the trace gives those ticks Unix time trace_ns.  Per rank:
  calibration error   cal = trace_ns - realtime_ns
  realtime offset     off = realtime_ns - monotonic_ns
Ranks with one boot_id run on one kernel and share both clocks: rank r is
moved onto its domain reference d (the lowest rank there) through
CLOCK_MONOTONIC, shift = -cal_r - off_r + off_d, which also removes a
realtime step (NTP, settimeofday) between their windows.  Ranks on other
kernels keep their own realtime (only -cal): no clock they share can be
read, so their skew is reported as unknown.  A shift no larger than its own
uncertainty (the read brackets, and the change over the window) is not
applied: it would move events by noise.  The output's baseTimeNanoseconds is
the smallest input base; every rank's residual bound is printed and written
under "trainprof"."merge".

Hostile input (README "What `merge`, `summary`, `trigger` and `status`
accept") is answered with one line naming the file, exit
status 2, in bounded time and memory: a trace is read only if it is a
regular file; gzip is inflated INFLATE bytes at a time (0.5 MB of gzip held
a 512 MiB string, once inflated whole: 3.2 GB); the keys before
"traceEvents", those after it and one event are at most MAX_HEADER,
MAX_HEADER and MAX_EVENT bytes (16 MiB: trainprof's header is a few KiB,
the largest event of a torch trace some hundred KiB); a corrupt gzip, a bad
CRC, bytes that are not UTF-8 where the text is parsed, nesting deeper than
Python's json reads, and numbers Python refuses are errors.  The output is
created by trainprof_cli.files.create: a fresh temporary name opened with
O_EXCL|O_NOFOLLOW, renamed into place, removed on any failure (SIGTERM and
SIGHUP included).
"""

import collections
import ctypes
import json
import multiprocessing
import os
import re
import signal
import struct
import sys
import time
import zlib

try:
    from trainprof_cli.files import FileError, create, size_text
    from trainprof_cli.trace import (MAX_HEADER, Reader, TraceError, event_chunks, events_generic,
                                     parse_trailer, read_header, read_trailer)
except ImportError:                     # loaded by path: the package from its parent folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from trainprof_cli.files import FileError, create, size_text
    from trainprof_cli.trace import (MAX_HEADER, Reader, TraceError, event_chunks, events_generic,
                                     parse_trailer, read_header, read_trailer)

PID_STRIDE = 1 << 22            # Linux pid_max is at most 2^22
SORT_STRIDE = 1 << 40           # process_sort_index: slot x 2^40 + the original
MAX_JOBS = 256
TERM_SIGNALS = (signal.SIGTERM, signal.SIGHUP)     # remove the output's temporary file (main)
LEVEL = 1                       # the library's own gzip level (TP_JSONW_GZIP_LEVEL)

PID_RE = re.compile(rb'"pid"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
TS_RE = re.compile(rb'"ts"\s*:\s*(-?)(\d+)(?:\.(\d+))?')
FLOW_ID_RE = re.compile(rb'"(id|bind_id)"\s*:\s*(\d+)')
META_RE = re.compile(rb'"ph"\s*:\s*"M"')


# the reader's error: its text starts with the file's name (trainprof_cli.trace)
MergeError = TraceError


# ---- clocks ----------------------------------------------------------------------

CLOCK_KEYS = ("trace_ns", "realtime_ns", "monotonic_ns", "bracket_ns")


def _clock_point(t):
    return isinstance(t, dict) and all(
        type(t.get(k)) is int and abs(t[k]) < 1 << 62 for k in CLOCK_KEYS) and t["bracket_ns"] >= 0


def clock_of(meta):
    """trainprof.clock (handlers/chrome_header.c), or None when absent or not in
    its form (integer ns below 2^62): then the rank's skew is unknown."""
    c = (meta.get("trainprof") or {}).get("clock") if isinstance(meta.get("trainprof"), dict) else None
    if not isinstance(c, dict) or not _clock_point(c.get("start")):
        return None
    if not _clock_point(c.get("end")):
        c = dict(c, end=c["start"])
    for k in ("boot_id", "host"):
        if c.get(k) is not None and not isinstance(c[k], str):
            c = dict(c, **{k: None})
    return c


def align(inputs):
    """Per input: shift_ns (applied), bound_ns (residual skew bound against
    the reference, None if unknown), domain.  inputs are in rank order."""
    domains = collections.OrderedDict()
    for i, inp in enumerate(inputs):
        c = inp["clock"]
        key = (c.get("boot_id") or ("host:" + c.get("host", "")) if c and (c.get("boot_id") or c.get("host"))
               else "file:%d" % i)
        inp["domain"] = key
        domains.setdefault(key, i)
    ref_domain = inputs[0]["domain"]
    for inp in inputs:
        c = inp["clock"]
        d = inputs[domains[inp["domain"]]]["clock"]
        if c is None:
            inp["shift_ns"], inp["bound_ns"] = 0, (0 if inp is inputs[0] else None)
            continue
        s, e = c["start"], c["end"]
        ds, de = d["start"], d["end"]

        def at(t, od):
            cal = t["trace_ns"] - t["realtime_ns"]
            off = t["realtime_ns"] - t["monotonic_ns"]
            return -cal - off + od

        od = ds["realtime_ns"] - ds["monotonic_ns"]
        shift_s, shift_e = at(s, od), at(e, od)
        shift = (shift_s + shift_e) // 2
        noise = (max(s["bracket_ns"], e["bracket_ns"]) + max(ds["bracket_ns"], de["bracket_ns"])
                 + abs(shift_s - shift_e) // 2 + 1)
        if abs(shift) <= noise:
            bound, shift = noise + abs(shift), 0
        else:
            bound = noise
        inp["shift_ns"] = shift
        inp["bound_ns"] = bound if inp["domain"] == ref_domain else None
    return len(domains)


# ---- rewriting (worker side) -----------------------------------------------------

def new_pid(slot, raw):
    """raw: the pid's JSON text (bytes)."""
    if raw[:1] == b'"':
        return slot * PID_STRIDE + PID_STRIDE - 1 - (zlib.crc32(raw) % 1024)
    p = int(raw)
    if p < 0:
        return slot * PID_STRIDE + PID_STRIDE + max(p, -1024)
    return slot * PID_STRIDE + p % PID_STRIDE


def _ts_sub(shift):
    def sub(m):
        frac = (m.group(3) or b"")[:3].ljust(3, b"0")
        ns = int(m.group(2)) * 1000 + int(frac)
        if m.group(1):
            ns = -ns
        ns += shift
        sign = "-" if ns < 0 else ""
        ns = abs(ns)
        return ('"ts": %s%d.%03d' % (sign, ns // 1000, ns % 1000)).encode()
    return sub


def _meta_event(ev, ctx, named, sorted_):
    """Rewrite one M event (a dict, pid already remapped)."""
    name = ev.get("name")
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    pid = ev.get("pid")
    if name == "process_name":
        args = dict(args, name="%s %s" % (ctx["label"], args.get("name", "")))
        named.add(pid)
    elif name == "process_sort_index" and isinstance(pid, int):
        orig = args.get("sort_index")
        orig = min(max(orig, 0), SORT_STRIDE - 1) if isinstance(orig, int) else pid % PID_STRIDE
        args = dict(args, sort_index=ctx["slot"] * SORT_STRIDE + orig)
        sorted_.add(pid)
    ev["args"] = args
    return ev


def _flow_sub(suf):
    """id -> id x 10^d + slot, as text: the digits appended, but id 0
    gives the slot alone ("03" is not JSON)."""
    alone = suf.lstrip(b"0") or b"0"

    def sub(m):
        if m.group(2) == b"0":
            return m.group(0)[:-1] + alone
        return m.group(0) + suf
    return sub


def rewrite_lines(ctx, body):
    """Line mode: (text, events, pids, named, sorted)."""
    slot = ctx["slot"]
    pids = set()
    for raw in set(PID_RE.findall(body)):
        np = new_pid(slot, raw)
        pids.add(np)
        body = re.sub(rb'"pid"\s*:\s*' + re.escape(raw) + rb'(?=[,}\s])', b'"pid": %d' % np, body)
    if ctx["suffix"]:
        body = FLOW_ID_RE.sub(_flow_sub(ctx["suffix"]), body)
    if ctx["shift"]:
        body = TS_RE.sub(_ts_sub(ctx["shift"]), body)
    named, sorted_ = set(), set()
    if META_RE.search(body):
        out, last = [], 0
        for m in META_RE.finditer(body):
            a = body.rfind(b"\n", 0, m.start()) + 1
            if a < last:
                continue
            b = body.find(b"\n", m.end())
            line = body[a:b].rstrip()
            comma = line.endswith(b",")
            ev = json.loads(line[:-1] if comma else line)
            ev = _meta_event(ev, ctx, named, sorted_)
            out.append(body[last:a])
            out.append(dumps(ev) + (b"," if comma else b""))
            last = b
        out.append(body[last:])
        body = b"".join(out)
    return body, body.count(b"\n"), pids, named, sorted_


def rewrite_events(ctx, events):
    """Event mode: a list of dicts -> (text, events, pids, named, sorted)."""
    slot, shift = ctx["slot"], ctx["shift"]
    pids, named, sorted_ = set(), set(), set()
    out = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        if "pid" in ev:
            ev["pid"] = new_pid(slot, json.dumps(ev["pid"]).encode())
            pids.add(ev["pid"])
        if ev.get("ph") in ("s", "t", "f") or "bind_id" in ev:
            for k in ("id", "bind_id"):
                if isinstance(ev.get(k), int):
                    ev[k] = int(str(ev[k]) + ctx["suffix"].decode())
        if shift and isinstance(ev.get("ts"), (int, float)):
            ev["ts"] = round((round(ev["ts"] * 1000) + shift) / 1000, 3)
        if ev.get("ph") == "M":
            ev = _meta_event(ev, ctx, named, sorted_)
        out.append(dumps(ev) + b",\n")
    return b"".join(out), len(out), pids, named, sorted_


def dumps(ev):
    return json.dumps(ev, ensure_ascii=False, separators=(", ", ": ")).encode("utf-8")


def deflate(text):
    c = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9)
    return c.compress(text) + c.flush(zlib.Z_SYNC_FLUSH), zlib.crc32(text), len(text)


def work(job):
    """One piece of work: rewrite, then deflate (the text itself for a plain
    output: z is then the text, crc 0)."""
    ctx, mode, payload = job
    try:
        if mode == "line":
            text, n, pids, named, sorted_ = rewrite_lines(ctx, payload)
        else:
            text, n, pids, named, sorted_ = rewrite_events(ctx, payload)
    except RecursionError:
        raise MergeError("%s: an event nested too deeply for Python's json" % ctx["path"])
    except (ValueError, TypeError, OverflowError) as e:
        # a metadata line that is not JSON, a number past what Python
        # converts (4300 digits), a ts of 1e308: the input's fault
        raise MergeError("%s: an event that cannot be rewritten (%s)" % (ctx["path"], e))
    z, crc, length = deflate(text) if ctx["gz"] else (text, 0, len(text))
    return z, crc, length, n, pids, named, sorted_


# ---- the C engine (engine.c) ----------------------------------------------------

_META_FN = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                            ctypes.c_size_t)


class _Job(ctypes.Structure):
    """struct tp_merge_job."""
    _fields_ = [("path", ctypes.c_char_p), ("skip", ctypes.c_uint64), ("out_fd", ctypes.c_int),
                ("slot", ctypes.c_uint32), ("suffix", ctypes.c_char_p),
                ("shift_ns", ctypes.c_int64), ("threads", ctypes.c_int), ("plain", ctypes.c_int),
                ("meta", _META_FN), ("status", ctypes.c_int), ("resume", ctypes.c_uint64),
                ("events", ctypes.c_uint64), ("text_bytes", ctypes.c_uint64),
                ("read_bytes", ctypes.c_uint64), ("crc", ctypes.c_uint32),
                ("trailer", ctypes.c_void_p), ("trailer_len", ctypes.c_uint64),
                ("pids", ctypes.POINTER(ctypes.c_int64)), ("npids", ctypes.c_uint64),
                ("error", ctypes.c_char * 256)]


ENGINE_NAME = "libtrainprof_merge.so"


def load_engine():
    """The C engine, or None when it was not built (no ISA-L): the source
    tree's build/, or where `make install` puts it
    (lib/trainprof/).  $TP_TEST_MERGE_ENGINE names another copy: the
    sanitizer tests load their own build (not a TRAINPROF_ name: the
    library warns of TRAINPROF_ variables it does not know)."""
    here = os.path.dirname(os.path.abspath(__file__))   # scripts/trainprof_cli/merge
    paths = [os.path.join(d, ENGINE_NAME) for d in (
        os.path.join(here, "..", "..", "..", "build"),
        os.path.join(here, "..", "..", "..", "..", "lib", "trainprof"))]
    if os.environ.get("TP_TEST_MERGE_ENGINE"):
        paths = [os.environ["TP_TEST_MERGE_ENGINE"]]
    for path in paths:
        if os.path.exists(path):
            try:
                lib = ctypes.CDLL(path)
            except OSError:             # built here, copied where libisal is not
                continue
            lib.tp_merge_events.argtypes = [ctypes.POINTER(_Job)]
            lib.tp_merge_events.restype = ctypes.c_int
            lib.tp_merge_free.argtypes = [ctypes.POINTER(_Job)]
            lib.tp_merge_free.restype = None
            return lib
    return None


def engine_events(lib, inp, w, threads):
    """One input's event array through the engine, appended to w: (status,
    resume offset, trailer text).  Fills inp's counts as the Python path does."""
    ctx, named, sorted_ = inp["ctx"], inp["named"], inp["sorted"]
    errors = []

    def meta(line, n, out, cap):
        try:
            ev = json.loads(ctypes.string_at(line, n))
            text = dumps(_meta_event(ev, ctx, named, sorted_))
        except Exception as e:          # back in C: say it there, raise it here
            errors.append(e)
            return -1
        if len(text) <= cap:
            ctypes.memmove(out, text, len(text))
        return len(text)

    job = _Job(path=os.fsencode(inp["path"]), skip=inp["reader"].parked,
               out_fd=w.raw_fd(), slot=ctx["slot"], suffix=ctx["suffix"],
               shift_ns=ctx["shift"], threads=max(threads - 1, 0), plain=0 if w.gz else 1,
               meta=_META_FN(meta))
    try:
        status = lib.tp_merge_events(ctypes.byref(job))
        w.raw_done(job.crc, job.text_bytes)
        if status < 0:
            if errors and isinstance(errors[0], ValueError):
                raise MergeError("%s: a metadata event is not valid JSON (%s)" % (inp["path"], errors[0]))
            raise MergeError(job.error.decode("utf-8", "replace"))
        inp["events"] += job.events
        inp["pids"].update(job.pids[i] for i in range(job.npids))
        inp["read_in"] = job.read_bytes
        if job.trailer_len > MAX_HEADER:    # the engine's MAX_TRAILER is the same: only if changed
            raise MergeError("%s: more than %s after traceEvents" % (inp["path"], size_text(MAX_HEADER)))
        trailer = ctypes.string_at(job.trailer, job.trailer_len) if job.trailer else b""
        return status, job.resume, trailer
    finally:
        lib.tp_merge_free(ctypes.byref(job))


# ---- output ----------------------------------------------------------------------

def _gf2_times(mat, vec):
    s = 0
    i = 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def _gf2_square(mat):
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def crc32_combine(crc1, crc2, len2):
    """zlib's crc32_combine: the CRC of A+B from CRC(A), CRC(B), len(B)."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]
    even = _gf2_square(odd)
    odd = _gf2_square(even)
    while True:
        even = _gf2_square(odd)
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


class Writer:
    """One gzip member made of sync-flushed raw deflate pieces (or plain)."""

    def __init__(self, path):
        self.path = path
        try:
            self.out = create(path)     # a new temporary name, renamed onto path at close
        except FileError as e:
            raise MergeError(str(e))
        self.f = self.out.f
        self.gz = path.endswith(".gz")
        self.crc, self.size = 0, 0
        if self.gz:
            self.f.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", int(time.time())) + b"\x00\xff")

    def piece(self, z, crc, length):
        """z: raw deflate of length bytes of text with CRC-32 crc; for a
        plain output, the text itself."""
        self.f.write(z)
        if self.gz:
            self.crc = crc32_combine(self.crc, crc, length)
            self.size += length

    def raw_fd(self):
        """The file descriptor, for the engine to append to."""
        self.f.flush()
        return self.f.fileno()

    def raw_done(self, crc, length):
        """After the engine appended length bytes of text (crc: their CRC-32)."""
        self.f.seek(0, os.SEEK_END)
        if self.gz:
            self.crc = crc32_combine(self.crc, crc, length)
            self.size += length

    def text(self, text):
        if self.gz:
            self.piece(*deflate(text))
        else:
            self.f.write(text)

    def close(self):
        if self.gz:
            self.f.write(zlib.compressobj(LEVEL, zlib.DEFLATED, -15).flush(zlib.Z_FINISH))
            self.f.write(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))
        try:
            self.out.commit()
        except FileError as e:
            raise MergeError(str(e))

    def abort(self):
        self.out.abort()


# ---- the merge -------------------------------------------------------------------

def open_inputs(paths):
    inputs = []
    for path in paths:
        r = Reader(path)
        meta, shape = read_header(r)
        r.park()                        # one open input at a time, whatever their number
        dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else None
        inputs.append({"path": path, "reader": r, "meta": meta, "shape": shape, "dist": dist,
                       "rank": dist.get("rank") if dist and isinstance(dist.get("rank"), int) else None,
                       "base": meta.get("baseTimeNanoseconds") if isinstance(
                           meta.get("baseTimeNanoseconds"), int) else 0,
                       "clock": clock_of(meta)})
    # ranks first in rank order, then files without one, in the order given
    inputs.sort(key=lambda i: (i["rank"] is None, i["rank"] if i["rank"] is not None else 0))
    return inputs


def merge(paths, out, jobs=None, log=sys.stderr, engine="auto"):
    """engine: "c" (engine.c, an error when it was not
    built), "python", or "auto" (the C engine when built)."""
    t0 = time.time()
    lib = load_engine() if engine != "python" else None
    if engine == "c" and lib is None:
        raise MergeError("the C engine (%s) is not built: `make` builds it when ISA-L "
                         "(Debian libisal-dev) is installed" % ENGINE_NAME)
    if len(paths) > (1 << 32) // PID_STRIDE:
        raise MergeError("at most %d traces at a time" % ((1 << 32) // PID_STRIDE))
    inputs = open_inputs(paths)
    n_domains = align(inputs)
    base = min(i["base"] for i in inputs)
    digits = len(str(len(inputs) - 1))
    seen_ranks = collections.Counter(i["rank"] for i in inputs)
    for slot, inp in enumerate(inputs):
        r = inp["rank"]
        inp["label"] = ("rank %d" % r) if r is not None else ("file %d" % slot)
        if r is not None and seen_ranks[r] > 1:
            inp["label"] += " (%s)" % os.path.basename(inp["path"])
        inp["ctx"] = {"slot": slot, "label": inp["label"], "path": inp["path"],
                      "suffix": str(slot).zfill(digits).encode() if len(inputs) > 1 else b"",
                      "shift": inp["shift_ns"] + inp["base"] - base,
                      "gz": out.endswith(".gz")}

    known = [i["bound_ns"] for i in inputs]
    max_bound = None if any(b is None for b in known) else max(known)
    merge_meta = {
        "version": 1,
        "reference_rank": inputs[0]["rank"],
        "clock_domains": n_domains,
        "max_skew_bound_ns": max_bound,
        "ranks": [{"rank": i["rank"], "label": i["label"], "file": os.path.basename(i["path"]),
                   "slot": s, "pid_base": s * PID_STRIDE,
                   "flow_id": ("id * 10^%d + %d" % (digits, s)) if len(inputs) > 1 else "id",
                   "distributedInfo": i["dist"], "host": (i["clock"] or {}).get("host"),
                   "boot_id": (i["clock"] or {}).get("boot_id"), "clock_domain": i["domain"],
                   "shift_ns": i["ctx"]["shift"], "clock_shift_ns": i["shift_ns"],
                   "skew_bound_ns": i["bound_ns"], "clock": i["clock"] is not None}
                  for s, i in enumerate(inputs)],
    }
    first = inputs[0]["meta"]
    head = collections.OrderedDict()
    head["schemaVersion"] = first.get("schemaVersion", 1)
    head["deviceProperties"] = first.get("deviceProperties", [])
    if inputs[0]["dist"] is not None:
        head["distributedInfo"] = inputs[0]["dist"]
    head["trainprof"] = {"merge": merge_meta}
    head["displayTimeUnit"] = "ms"
    head["baseTimeNanoseconds"] = base

    w = Writer(out)
    pool = None
    try:
        text = "{\n" + "".join("  %s: %s,\n" % (json.dumps(k), json.dumps(v)) for k, v in head.items())
        w.text((text + '  "traceEvents": [\n').encode())
        jobs = jobs or os.cpu_count() or 1
        if jobs > 1 and lib is None:
            # the workers are forked with main's SIGTERM/SIGHUP handler, which
            # raises: blocked until _worker_init restores the default, a
            # pool.terminate() right away would print their tracebacks
            held = signal.pthread_sigmask(signal.SIG_BLOCK, TERM_SIGNALS)
            try:
                pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_init)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        pending = collections.deque()
        counts, trailers = [], []

        def drain(limit):
            while len(pending) > limit:
                inp, res = pending.popleft()
                z, crc, length, n, pids, named, sorted_ = res.get() if pool else res
                w.piece(z, crc, length)
                inp["events"] += n
                inp["pids"] |= pids
                inp["named"] |= named
                inp["sorted"] |= sorted_

        def submit(inp, mode, payload):
            job = (inp["ctx"], mode, payload)
            pending.append((inp, pool.apply_async(work, (job,)) if pool else work(job)))
            drain(2 * jobs)

        for inp in inputs:
            inp.update(events=0, pids=set(), named=set(), sorted=set())
            r = inp["reader"]
            if lib is not None and abs(inp["ctx"]["shift"]) < 1 << 62:   # the engine's int64
                drain(0)
                status, resume, trailer = engine_events(lib, inp, w, jobs)
                if status == 0:
                    trailers.append(parse_trailer(inp["path"], trailer, inp["shape"]))
                    continue
                r.seek(resume)          # not an object from here: the Python path
            else:
                r.seek(r.parked)
            for mode, body in event_chunks(r):
                if mode == "line":
                    submit(inp, mode, body)
                    continue
                batch, size = [], 0
                for ev in events_generic(r, body):
                    batch.append(ev)
                    size += 1
                    if size >= 20000:
                        submit(inp, "event", batch)
                        batch, size = [], 0
                if batch:
                    submit(inp, "event", batch)
            trailers.append(read_trailer(r, inp["shape"]))
            inp["read_in"] = max(r.read_in, inp.get("read_in", 0))
            r.close()
        drain(0)
        # process metadata the inputs lacked, and the merge's own
        tail = []
        for slot, inp in enumerate(inputs):
            for pid in sorted(inp["pids"]):
                orig = pid - slot * PID_STRIDE
                if pid not in inp["named"]:
                    tail.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                                 "args": {"name": "%s pid %d" % (inp["label"], orig)}})
                if pid not in inp["sorted"]:
                    tail.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                                 "args": {"sort_index": slot * SORT_STRIDE + orig}})
            counts.append({"rank": inp["rank"], "events": inp["events"],
                           "pids": sorted(inp["pids"])})
        if not tail:
            # the events so far end with ","; Kineto's own last event
            tail.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "",
                         "ts": 0})
        w.text(b",\n".join(dumps(e) for e in tail) + b"\n  ],\n")
        after = collections.OrderedDict()
        after["trainprofMergeCounts"] = counts
        extra = [t for t in trailers if t]
        if extra:
            after["trainprofMergeTrailers"] = extra
        after["traceName"] = os.path.basename(out)
        w.text(("".join("  %s: %s,\n" % (json.dumps(k), json.dumps(v)) for k, v in after.items())
                .rstrip(",\n") + "\n}\n").encode())
        w.close()
    except BaseException:
        w.abort()
        raise
    finally:
        if pool:
            pool.terminate()
            pool.join()
    read_in = sum(i.get("read_in", 0) for i in inputs)
    return {"inputs": inputs, "counts": counts, "max_bound": max_bound, "domains": n_domains,
            "seconds": time.time() - t0, "read_bytes": read_in}


def report(res, out, log):
    for slot, inp in enumerate(res["inputs"]):
        b = inp["bound_ns"]
        log.write("trainprof: merge: %s (%s): %d events, shift %+d ns, residual skew %s\n" % (
            inp["label"], os.path.basename(inp["path"]), inp["events"], inp["ctx"]["shift"],
            ("<= %d ns" % b) if b is not None else
            "unknown (%s)" % ("no clock metadata" if inp["clock"] is None
                              else "another host: no shared clock")))
    if res["max_bound"] is None:
        log.write("trainprof: merge: warning: the ranks span %d clock domains (kernels); across "
                  "them the realtime clocks are as close as NTP/PTP keeps them, which merge "
                  "cannot measure\n" % res["domains"])
    log.write("trainprof: merge: wrote %s: %d ranks, %d events, max residual skew %s, "
              "%.1f s, %.1f MB/s of input\n" % (
                  out, len(res["inputs"]), sum(c["events"] for c in res["counts"]),
                  ("%d ns" % res["max_bound"]) if res["max_bound"] is not None else "unknown",
                  res["seconds"], res["read_bytes"] / 1e6 / max(res["seconds"], 1e-9)))


def main(argv, prog="trainprof merge"):
    import argparse
    p = argparse.ArgumentParser(
        prog=prog, description="Merge the traces of several ranks into one Kineto-format trace "
        "for Perfetto: pids remapped per rank (rank slot x 4194304 + pid), process names "
        "'rank N ...', flow ids made unique, every rank moved onto one time base using the "
        "clocks each window recorded; the residual skew is printed and written under "
        "trainprof.merge.")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.json or .json.gz)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the merged trace (gzip if it ends in .gz)")
    p.add_argument("-j", "--jobs", type=_jobs, default=0, metavar="N",
                   help="threads (worker processes on the Python path; default: the number "
                   "of CPUs; at most %d)" % MAX_JOBS)
    p.add_argument("--engine", choices=("auto", "c", "python"), default="auto",
                   help="the C engine (built with ISA-L) or the Python one (default: C when built)")
    args = p.parse_args(argv)
    # a termination signal removes the temporary output as an error does
    # (Writer.abort); Python runs the handler once the engine returns
    for sig in TERM_SIGNALS:
        signal.signal(sig, _terminated)
    try:
        res = merge(args.traces, args.output, jobs=args.jobs or None, engine=args.engine)
    except RecursionError:
        sys.stderr.write("trainprof: merge: JSON nested too deeply for Python's json\n")
        return 2
    except (MergeError, FileError, OSError, ValueError) as e:
        # one line, and no control character of a file's name drives the terminal
        sys.stderr.write("trainprof: merge: %s\n" % re.sub(r"[\x00-\x1f\x7f]", "?",
                                                          " ".join(str(e).split())))
        return 2
    report(res, args.output, sys.stderr)
    return 0


def _jobs(text):
    import argparse
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= MAX_JOBS:
        raise argparse.ArgumentTypeError("%r: a number from 0 (the CPUs) to %d" % (text, MAX_JOBS))
    return n


def _terminated(sig, frame):
    raise SystemExit(128 + sig)


def _worker_init():
    """A worker ends at pool.terminate()'s SIGTERM, not by main's handler."""
    for sig in TERM_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, TERM_SIGNALS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
