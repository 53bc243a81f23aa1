"""ITT string handles as the library's collector makes them
(preload/itt.c): each thread caches a name's address, and at every call
checks the text now at that address against the cached handle's, 8 bytes
at a time (strcmp near a page's end and for very short or long names).
A Python process with the library preloaded calls
__itt_string_handle_create as torch's ITT state does, changing the text at
one address between calls: the same length with a byte off at the start,
the middle or the end, shorter (the old text's bytes still after the new
NUL), longer; at each alignment; two addresses that share a cache slot;
and names that end at the last byte of a page whose next page is not
mapped.  Each call must return the handle of the text there now (one
handle per text), and nothing may fault."""

import sys

import tputil

SCRIPT = r"""
import ctypes, mmap
lib = ctypes.CDLL(None)
make = lib.__itt_string_handle_create
make.restype = ctypes.c_void_p
make.argtypes = [ctypes.c_void_p]
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
handles = {}
calls = 0

def check(addr, name):
    global calls
    ctypes.memmove(addr, name + b"\0", len(name) + 1)
    for _ in range(2):                      # a miss, then a hit in the cache
        h = make(addr)
        got = ctypes.cast(h, ctypes.POINTER(ctypes.c_char_p)).contents.value   # strA
        assert got == name, (name, got)
        assert handles.setdefault(name, h) == h, name
        calls += 1

names = [b"aten::linear", b"bten::linear", b"aten::linenr", b"aten::lineaq", b"aten::lin",
         b"aten::linear_and_more", b"aten::t", b"aten::s", b"abcdefg", b"abcdefgh",
         b"x" * 15, b"x" * 16, b"x" * 17, b"x" * 62 + b"y", b"x" * 63, b"x" * 63 + b"z",
         b"x" * 64, b"x" * 200, b"", b"a", b"aten::linear"]
buf = ctypes.create_string_buffer(4096)
base = ctypes.addressof(buf)
for off in range(8):
    for n in names:
        check(base + off, n)
        check(base + 1024 + off, n[::-1])   # the same cache slot (address / 8 % 128)
        check(base + off, n)

PAGE = mmap.PAGESIZE
m = mmap.mmap(-1, 2 * PAGE)
start = ctypes.addressof(ctypes.c_char.from_buffer(m))
assert libc.mprotect(start + PAGE, PAGE, 0) == 0, ctypes.get_errno()
for n in range(0, 80):
    at = start + PAGE - (n + 1)             # the NUL is the page's last byte
    check(at, b"p" * n)
    if n:
        check(at, b"p" * (n - 1) + b"q")
        check(at, b"q" + b"p" * (n - 1))
print("ok", calls, len(handles))
"""


def test_handle_is_the_text_at_the_address_now():
    r = tputil.run(sys.executable, ["-c", SCRIPT], env={"TRAINPROF_ACTIVITIES": "cpu"})
    assert r.rc == 0, r.stderr
    words = r.stdout.split()
    assert words[0] == b"ok", r.stdout
    assert int(words[1]) > 1000 and int(words[2]) > 200, r.stdout
