"""Host statistics (TRAINPROF_SYS): the sampler runs during warmup and
recording steps, and its samples inside a window become counter events
whose names carry their units."""

import tputil


def test_samples_are_counters_inside_the_window():
    res = tputil.run("train_loop", ["--steps=8", "--sleep-us=30000"], env={
        "TRAINPROF_SYS": "cpu,memory,net", "TRAINPROF_SYS_INTERVAL": "0.01",
        "TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=4", "TRAINPROF_ACTIVITIES": "cpu"})
    assert res.rc == 0, res.stderr
    (path,) = res.traces
    t = tputil.load_trace(path)
    # memory tracks (test_memory.py) carry their value under "bytes", the
    # ledger's owner tracks one value per owner
    counters = [c for c in tputil.events(t, ph="C")
                if "bytes" not in c["args"] and not c["name"].endswith(" by owner")]
    by_name = {}
    for c in counters:
        (k, v), = c["args"].items()
        assert k == c["name"] and isinstance(v, (int, float))
        by_name.setdefault(k, []).append(v)
    for name in ("cpu_process_percent", "cpu_system_percent", "memory_rss_bytes",
                 "memory_system_used_bytes", "memory_system_available_bytes"):
        assert name in by_name, sorted(by_name)
    # 4 steps of >= 30 ms at 10 ms: several samples each
    assert len(by_name["memory_rss_bytes"]) >= 5
    assert all(v > 1 << 20 for v in by_name["memory_rss_bytes"])
    assert all(0 <= v <= 100 for v in by_name["cpu_system_percent"])
    units = ("_percent", "_bytes", "_bytes_per_s")
    sys_names = [k for k in by_name if k.startswith(("cpu_", "memory_", "net_", "disk_"))]
    assert all(k.endswith(units) for k in sys_names), sys_names
    steps = tputil.events(t, ph="X", cat="user_annotation")
    lo = min(s["ts"] for s in steps if s["name"].startswith("ProfilerStep"))
    sampled = [c for c in counters if c["name"] in sys_names]
    assert min(c["ts"] for c in sampled) >= lo - 1e3


def test_none_means_no_sampler_thread_and_no_counters():
    res = tputil.run("train_loop", ["--steps=6", "--sleep-us=20000"], env={
        "TRAINPROF_SYS": "none", "TRAINPROF_SCHEDULE": "wait=1,warmup=1,active=2",
        "TRAINPROF_ACTIVITIES": "cpu"})
    (path,) = res.traces
    t = tputil.load_trace(path)
    assert not [c for c in tputil.events(t, ph="C") if c["name"].startswith(("cpu_", "memory_"))]
