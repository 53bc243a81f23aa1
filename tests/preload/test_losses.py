"""What the library keeps is bounded, and what it cannot keep is counted
(README "Never harming the job"; issue 21).

build/programs/nvtx_flood sends NVTX at volumes past every bound: millions
of distinct messages, more records than TRAINPROF_BUFFER_MB holds.  Before
activation nothing may grow; after it, the name table and the buffer stay
within their bounds, the step markers of a window are always kept, and
every loss is reported in the trace's `trainprof` object, the summary and
one stderr line.
"""

import re

import tputil

PROG = "nvtx_flood"


def _vmhwm(stderr):
    m = re.search(rb"^vmhwm_kb (\d+) (\d+)$", stderr, re.M)
    assert m, stderr
    return int(m.group(1)), int(m.group(2))


def test_no_cuda_distinct_nvtx_messages_keep_nothing():
    """A process that never uses CUDA (a DataLoader worker with NVTX ranges
    on) sends 10 million distinct marks and 1 million each of start/end
    ranges, push/pop ranges, registered strings and domains, 199 bytes
    each.  Before activation the library does nothing visible: its peak RSS
    grows by less than 2 MiB (the registered strings and domain names,
    whose handles must outlive activation, take at most 256 KiB of names).
    Before: every message was interned, 2.6 MB -> 241 MB for 1 million
    (the name table's 2^20 entries at 224 bytes), and 10 million took
    minutes."""
    n = 10_000_000
    plain = tputil.run(PROG, ["no-cuda", n], preload=False, timeout=120)
    r = tputil.run(PROG, ["no-cuda", n], env={"TRAINPROF_BUFFER_MB": 1}, timeout=120)
    assert plain.rc == 0 and r.rc == 0, r.stderr
    assert r.stdout == plain.stdout
    before, after = _vmhwm(r.stderr)
    assert after - before < 2048, (before, after)
    assert r.traces == []
    assert b"trainprof:" not in r.stderr
