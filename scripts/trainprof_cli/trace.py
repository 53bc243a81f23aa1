"""trainprof_cli.trace - the one reader of trace files, shared by `trainprof
summary` (trainprof_cli/summary.py) and `trainprof merge` (trainprof_cli/merge/__init__.py).

DESIGN
A trace is streamed, never loaded whole.  Reader gives the decompressed
bytes of a file in pieces: gzip or plain by the file's magic (not its name),
inflated at most INFLATE bytes at a time (a small gzip may inflate a
thousandfold: 0.5 MB of gzip held a 512 MiB string, once inflated whole:
3.2 GB), several gzip members one after the other, a regular file only
(trainprof_cli.files.open_regular: a FIFO would block, a link to /dev/zero
never ends).  read_header parses the top-level keys before "traceEvents"
one by one (json raw_decode over a window that doubles, so that a long
value costs linear time); event_chunks gives the event array as runs of
whole lines when the layout is one event per line (trainprof's writer,
handlers/chrome.c: "line" mode, checked with C-speed scans), else hands the
rest to events_generic, which decodes event by event ("event" mode: Kineto's
indented layout, json.dump's one line); read_trailer reads the keys after the
array (Kineto's on-demand distributedInfo, traceName).  merge rewrites the
"line" pieces as bytes (or gives the whole array to its C engine and comes
back here where that cannot go on); summary decodes them (stream_trace).

Hostile input (README "What `merge`, `summary`, `trigger` and `status`
accept"): the keys before "traceEvents", those after it and one event are
at most MAX_HEADER, MAX_HEADER and MAX_EVENT bytes (16 MiB: trainprof's
header is a few KiB, the largest event of a torch trace some hundred KiB);
a corrupt gzip, a bad CRC, bytes that are not UTF-8 where the text is
parsed, nesting deeper than Python's json reads and numbers Python refuses
are a TraceError, whose text starts with the file's name and is one line.
Python standard library only.
"""

import json
import os
import re
import sys
import zlib

try:
    from trainprof_cli.files import FileError, open_regular, size_text
except ImportError:                     # loaded by path: the package from its parent folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from trainprof_cli.files import FileError, open_regular, size_text

CHUNK = 4 << 20                 # bytes of event text per piece ("line" mode)
READ = 1 << 20                  # compressed bytes read at a time
INFLATE = 4 << 20               # decompressed bytes made at a time (deflate inflates up to 1032x)
MAX_HEADER = 16 << 20           # the keys before "traceEvents", and those after it, at most
MAX_EVENT = 16 << 20            # one event at most (the C merge engine's MAX_EVENT)
EVENT_BATCH = 20000             # events handed on at a time in "event" mode

LINE_START_BAD = re.compile(rb'\n(?![ \t]*\{)')
ARRAY_END = re.compile(rb'\n[ \t]*\]')


class TraceError(Exception):
    """A trace that cannot be read: one line, starting with the file's name."""


class Reader:
    """The decompressed bytes of one trace file, in pieces."""

    def __init__(self, path, follow=True):
        self.path = path
        self.follow = follow        # a symbolic link is followed (a name given, not met in a folder)
        self.f = self._open()
        magic = self.f.read(2)
        self.f.seek(0)
        self.gz = magic == b"\x1f\x8b"
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gz else None
        self.pending = b""          # compressed bytes read, not inflated yet
        self.buf = b""
        self.eof = False
        self.read_in = 0            # compressed (file) bytes read
        self.produced = 0           # decompressed bytes appended to buf

    def offset(self):
        """The decompressed offset of buf's first byte."""
        return self.produced - len(self.buf)

    def park(self):
        """Closes the file and lets its buffers go, keeping the offset: the
        inputs wait so while others are merged (seek opens it again)."""
        self.parked = self.offset()
        self.f.close()
        self.buf, self.z, self.pending = b"", None, b""

    def _open(self):
        """A regular file only (a FIFO would block, /dev/zero never ends)."""
        try:
            return open_regular(self.path, self.follow)[0]
        except FileError as e:
            raise TraceError(str(e))

    def seek(self, offset):
        """Starts over and reads up to the decompressed offset."""
        if self.f.closed:
            self.f = self._open()
        self.f.seek(0)
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gz else None
        self.buf, self.eof, self.read_in, self.produced, self.pending = b"", False, 0, 0, b""
        while self.produced < offset:
            self.buf = b""
            if not self.more():
                raise TraceError("%s: shorter than it was" % self.path)
        self.buf = self.buf[len(self.buf) - (self.produced - offset):]

    def more(self):
        """Append at least one more piece to buf, of at most INFLATE bytes
        (a small gzip may inflate a thousandfold: 0.5 MB of it held a 512 MiB
        string); False at the end.  A corrupt gzip (bad data, bad CRC,
        truncated) is a TraceError."""
        while not self.eof:
            if self.z is None:
                raw = self.f.read(READ)
                self.read_in += len(raw)
                if not raw:
                    self.eof = True
                    return False
                self.buf += raw
                self.produced += len(raw)
                return True
            raw, self.pending = self.pending, b""
            if not raw:
                raw = self.f.read(READ)
                self.read_in += len(raw)
            if not raw:
                self.eof = True
                if not self.z.eof:
                    raise TraceError("%s: not a valid gzip file (truncated)" % self.path)
                return False
            try:
                out = self.z.decompress(raw, INFLATE)
            except zlib.error as e:
                raise TraceError("%s: not a valid gzip file (%s)" % (self.path, e))
            self.pending = self.z.unconsumed_tail
            if self.z.eof and self.z.unused_data:           # a multi-member gzip
                self.pending = self.z.unused_data
                self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            if out:
                self.buf += out
                self.produced += len(out)
                return True
        return False

    def close(self):
        self.f.close()


_WS = re.compile(rb"[ \t\r\n]*")
_WS_COMMAS = re.compile(rb"[ \t\r\n,]*")
_DEC = json.JSONDecoder()


def _skip(r, pos, commas=False):
    """The position of the next byte that is not a blank (nor a comma, with
    `commas`).  What was passed over is dropped from buf once past CHUNK, so
    that a run of blanks (a gzip of nothing else) takes linear time and
    bounded memory."""
    ws = _WS_COMMAS if commas else _WS
    while True:
        pos = ws.match(r.buf, pos).end()
        if pos > CHUNK:
            r.buf, pos = r.buf[pos:], 0
        if pos < len(r.buf) or not r.more():
            return pos


def _value(r, pos, limit, what):
    """Parse one JSON value at pos (reading more as needed): (value, end).
    Decodes a window that doubles until the value ends inside it: decoding
    all of buf for each event would make a large pretty-printed trace cost
    the square of its size.  A value longer than `limit` bytes (`what` names
    it), bytes that are not UTF-8 and nesting deeper than Python's json reads
    are TraceErrors: the window must not grow, or shrink to the bad byte and
    grow again, forever."""
    size = 1 << 16
    while True:
        while len(r.buf) - pos < size and r.more():
            pass
        window = r.buf[pos:pos + size]
        complete = r.eof and pos + size >= len(r.buf)     # the window holds the rest of the file
        bad = None                      # a byte that is not UTF-8: the value must end before it
        try:
            text = window.decode("utf-8")
        except UnicodeDecodeError as e:
            if complete or e.reason != "unexpected end of data":
                bad = e.start
            text = window[:e.start].decode("utf-8")         # (else a character cut by the window)
            complete = False
        try:
            v, end = _DEC.raw_decode(text)
            if end < len(text) or complete or bad is not None:     # not a number cut by the window
                return v, pos + len(text[:end].encode("utf-8"))
        except RecursionError:
            raise TraceError("%s: %s nested too deeply for Python's json (about %d levels)"
                             % (r.path, what, sys.getrecursionlimit()))
        except ValueError as e:
            # an error well before the window's end is not the window's cut
            # (a cut string says "Unterminated string" at its start)
            if bad is None and (complete or (getattr(e, "pos", 0) < len(text) - 16
                                             and not str(e).startswith("Unterminated string"))):
                raise TraceError("%s: not a JSON trace (%s at offset %d)" % (
                    r.path, getattr(e, "msg", e), r.offset() + pos + getattr(e, "pos", 0)))
        if bad is not None:
            raise TraceError("%s: not UTF-8 text: byte 0x%02x at offset %d" % (
                r.path, window[bad], r.offset() + pos + bad))
        if size >= limit:
            raise TraceError("%s: %s longer than %s" % (r.path, what, size_text(limit)))
        size = min(size * 2, limit)


def read_header(r):
    """Top-level keys before "traceEvents": ({key: value}, shape) where shape
    is "object", or "array" for a bare event array.  Leaves r.buf at the first
    byte inside the event array."""
    pos = _skip(r, 0)
    if pos >= len(r.buf):
        raise TraceError("%s: empty file" % r.path)
    if r.buf[pos:pos + 1] == b"[":
        r.buf = r.buf[pos + 1:]
        return {}, "array"
    if r.buf[pos:pos + 1] != b"{":
        raise TraceError("%s: not a JSON trace" % r.path)
    meta = {}
    pos += 1
    while True:
        pos = _skip(r, pos, commas=True)
        if r.offset() + pos > MAX_HEADER:
            raise TraceError("%s: the keys before traceEvents are longer than %s"
                             % (r.path, size_text(MAX_HEADER)))
        if r.buf[pos:pos + 1] == b"}" or pos >= len(r.buf):
            raise TraceError("%s: no traceEvents" % r.path)
        key, pos = _value(r, pos, MAX_HEADER, "a key before traceEvents")
        pos = _skip(r, pos)
        if r.buf[pos:pos + 1] != b":":
            raise TraceError("%s: not a JSON trace" % r.path)
        pos = _skip(r, pos + 1)
        if key == "traceEvents":
            if r.buf[pos:pos + 1] != b"[":
                raise TraceError("%s: traceEvents is not an array" % r.path)
            r.buf = r.buf[pos + 1:]
            return meta, "object"
        if not isinstance(key, str):
            raise TraceError("%s: not a JSON trace (a key that is not a string)" % r.path)
        meta[key], pos = _value(r, pos, MAX_HEADER, "the value of %.40r" % key)


def read_trailer(r, shape):
    """After the event array: the remaining top-level keys."""
    while r.more():
        if len(r.buf) > MAX_HEADER:
            raise TraceError("%s: more than %s after traceEvents" % (r.path, size_text(MAX_HEADER)))
    return parse_trailer(r.path, r.buf, shape)


def parse_trailer(path, raw, shape):
    text = raw.decode("utf-8", "replace").strip()
    if shape == "array" or not text:
        return {}
    text = text.lstrip(",").strip()
    try:
        return json.loads("{" + text) if text != "}" else {}
    except (ValueError, RecursionError):
        raise TraceError("%s: invalid JSON after traceEvents" % path)


def event_chunks(r):
    """The event array's text in pieces, each a run of whole lines ending
    in "\\n", the last piece's last line given a trailing ",".  Yields
    (mode, bytes): mode "line", or "event" once the layout is not one event
    per line (the piece then holds the rest of the array, read by
    events_generic).  Stops at the array's end; r.buf then holds what
    follows "]"."""
    start = _skip(r, 0)
    r.buf = r.buf[start:]
    if r.buf[:1] == b"]":
        r.buf = r.buf[1:]
        return
    while True:
        m = ARRAY_END.search(r.buf)
        while m is None and len(r.buf) < CHUNK and r.more():
            m = ARRAY_END.search(r.buf)
        if m is not None:
            body = r.buf[:m.start()].rstrip()
            if not body.endswith(b","):
                body += b","
            body += b"\n"
            if line_layout(body):
                r.buf = r.buf[m.end():]
                yield "line", body
                return
        else:
            cut = r.buf.rfind(b"\n")
            if cut >= 0 and line_layout(r.buf[:cut + 1]):
                body, r.buf = r.buf[:cut + 1], r.buf[cut + 1:]
                yield "line", body
                continue
        # Not one event per line.  The "]" found may close an array inside
        # a pretty-printed event: the text goes to events_generic whole.
        rest, r.buf = r.buf, b""
        yield "event", rest
        return


def line_layout(body):
    """Every line a whole event: starts with "{", ends with "}" or "},"."""
    if not body.startswith(b"{") and not body.lstrip(b" \t").startswith(b"{"):
        return False
    if LINE_START_BAD.search(body, 0, len(body) - 1):
        return False
    lines = body.count(b"\n")
    return body.count(b"}\n") + body.count(b"},\n") == lines


def events_generic(r, head):
    """Event mode: every remaining event of the array as a dict; r.buf is
    left after "]"."""
    r.buf = head + r.buf
    pos = 0
    while True:
        pos = _skip(r, pos, commas=True)
        c = r.buf[pos:pos + 1]
        if c == b"]":
            r.buf = r.buf[pos + 1:]
            return
        if not c:
            raise TraceError("%s: the event array does not end" % r.path)
        ev, pos = _value(r, pos, MAX_EVENT, "an event")
        if pos > CHUNK:
            r.buf = r.buf[pos:]
            pos = 0
        yield ev


def line_events(path, body):
    """The events of a "line" piece (event_chunks) as dicts, decoded at once.
    Bytes that are not UTF-8 in a string become U+FFFD (a name cut by a
    writer must not refuse the trace)."""
    text = b"[" + body.rstrip().rstrip(b",") + b"]"
    try:
        try:
            return json.loads(text)
        except UnicodeDecodeError:
            return json.loads(text.decode("utf-8", "replace"))
    except RecursionError:
        raise TraceError("%s: an event nested too deeply for Python's json" % path)
    except ValueError as e:
        raise TraceError("%s: not a JSON trace (%s)" % (path, getattr(e, "msg", e)))


def stream_trace(path, on_header, on_events, follow=True):
    """Calls on_header(key, value) for every top-level key but traceEvents
    (those after the array too), and on_events(list) with the events in file
    order, batch by batch; follow: whether a symbolic link is followed."""
    r = Reader(path, follow)
    try:
        meta, shape = read_header(r)
        for k, v in meta.items():
            on_header(k, v)
        for mode, body in event_chunks(r):
            if mode == "line":
                on_events(line_events(r.path, body))
                continue
            batch = []
            for ev in events_generic(r, body):
                batch.append(ev)
                if len(batch) >= EVENT_BATCH:
                    on_events(batch)
                    batch = []
            if batch:
                on_events(batch)
        for k, v in read_trailer(r, shape).items():
            on_header(k, v)
    finally:
        r.close()
