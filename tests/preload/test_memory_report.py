"""The memory handler's page and JSON as readers see them.

The unit test build/tests/test_memory_report writes a known window's report (GPU0:
1 GiB, +512 MiB at 10 ms, +256 MiB at 20 ms, -512 MiB at 30 ms, -256 MiB at
60 ms, window 100 ms; pinned host memory 64 MiB from 5 ms) and copies it to
TP_TEST_MEMORY_OUT.  Here the page is parsed as XML (it is XHTML), the SVG
step paths are read back into points and compared with the JSON's, and, when
chromium is installed, the page is rendered headless and the plot's pixels
counted.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

import tputil

SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("memory")
    exe = os.path.join(tputil.build_dir(), "tests", "test_memory_report")
    assert os.path.exists(exe), "build the unit tests first (make unit)"
    env = dict(os.environ, TP_TEST_MEMORY_OUT=str(out), CK_FORK="yes", CK_RUN_CASE="core")
    r = subprocess.run([exe], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    html = out / "sequence.memory.html"
    js = out / "sequence.memory.json"
    assert html.exists() and js.exists()
    return html, json.loads(js.read_text())


def path_points(d):
    """The vertices of an SVG path made of M and L commands."""
    cmds = re.findall(r"([ML])\s*(-?[\d.]+)\s+(-?[\d.]+)", d)
    assert cmds and cmds[0][0] == "M" and all(c == "L" for c, _, _ in cmds[1:])
    assert len(re.findall(r"[A-Za-z]", d)) == len(cmds), "only M and L commands"
    return [(float(x), float(y)) for _, x, y in cmds]


def test_page_is_xml_with_one_plot_per_series(report):
    html, doc = report
    root = ET.parse(html).getroot()
    assert root.tag == XHTML + "html"
    svgs = root.findall(".//" + SVG + "svg")
    assert len(svgs) == len(doc["series"]) == 2
    for svg, series in zip(svgs, doc["series"]):
        steps = [p for p in svg.iter(SVG + "path") if p.get("class") == "step"]
        assert len(steps) == 1
        v = path_points(steps[0].get("d"))
        pts = series["points"]
        # a step function: one vertex to start, two per later point
        assert len(v) == 1 + 2 * (len(pts) - 1)
        xs = [v[0][0]] + [v[i][0] for i in range(1, len(v), 2)]
        ys = [v[0][1]] + [v[i][1] for i in range(2, len(v), 2)]
        # x proportional to time, y falls as bytes rise (SVG y points down)
        span = xs[-1] - xs[0]
        assert span > 500
        for (ms, _), x in zip(pts, xs):
            assert abs((x - xs[0]) / span * 100.0 - ms) < 0.3
        for i in range(1, len(pts)):
            if pts[i][1] > pts[i - 1][1]:
                assert ys[i] < ys[i - 1]
            elif pts[i][1] < pts[i - 1][1]:
                assert ys[i] > ys[i - 1]
        texts = ["".join(t.itertext()) for t in svg.iter(SVG + "text")]
        peak = [t for t in texts if t.startswith("peak ")]
        assert len(peak) == 1
        unit = "GiB" if series["peak_bytes"] >= 1 << 30 else "MiB"
        ticks = [t for t in texts if t.endswith(" " + unit)]
        assert len(ticks) >= 3
        values = [float(t.split()[0]) for t in ticks]
        steps_between = {round(b - a, 6) for a, b in zip(values, values[1:])}
        assert len(steps_between) == 1, "evenly spaced y ticks"
        assert values[0] == 0 and values[-1] * (1 << (30 if unit == "GiB" else 20)) >= series["peak_bytes"]
        assert "time since window start (ms)" in texts
        dots = [c for c in svg.iter(SVG + "circle") if c.get("class") == "peak"]
        assert len(dots) == 1
    assert "peak 1.75 GiB at 20.0 ms" in ET.tostring(root, encoding="unicode")


def _png_pixels(data):
    """(width, height, rows of RGB(A) tuples) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, bpp = 8, b"", None, None, None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_page_renders_in_chromium(report, tmp_path):
    html, _ = report
    png = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--screenshot=" + str(png), "--window-size=1000,1100", html.as_uri()],
                   capture_output=True, timeout=120, cwd=tmp_path)
    assert png.exists()
    w, h, bpp, rows = _png_pixels(png.read_bytes())
    assert (w, h) == (1000, 1100)

    # strokes (saturated) and the areas under them (10% tints over white)
    blue = blue_fill = green = green_fill = 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = row[x:x + 3]
            if b - r > 80:
                blue += 1
            elif b - r > 10:
                blue_fill += 1
            if g - r > 50 and g - b > 30:
                green += 1
            elif g - r > 5 and g - b > 5:
                green_fill += 1
    # each step line is ~800 px long, 1.5 px wide, anti-aliased; the areas
    # under them are ~780 x 100-230 px
    assert blue > 1000, blue
    assert green > 700, green
    assert blue_fill > 50000, blue_fill
    assert green_fill > 50000, green_fill


def _human(n):
    """The summary's binary units (handlers/memory.c tp_memory_human)."""
    if n < 1024:
        return "%d B" % n
    v, units = n / 1024.0, ["KiB", "MiB", "GiB", "TiB"]
    u = 0
    while u < 3 and v >= 1024:
        v /= 1024
        u += 1
    return "%.2f %s" % (v, units[u])


def test_train_loop_reports_agree():
    """train_loop under the preload with the memory handler on: when the
    build collects memory (the summary has a memory table), the page and the
    JSON exist next to the summary and agree with it; the JSON's points are a
    step function from start_bytes to end_bytes that never passes peak_bytes."""
    r = tputil.run("train_loop", ["--steps=6", "--launches=2"],
                   env={"TRAINPROF_HANDLERS": "chrome,summary,memory"})
    assert r.rc == 0, r.stderr
    reports = os.path.join(r.cwd, "test", "reports")
    summary = os.path.join(reports, "rank0.00000005.pt.trace.summary.txt")
    text = open(summary).read()
    if "\nMemory held" not in text:
        assert not [f for f in os.listdir(reports) if ".memory." in f]
        pytest.skip("this build records no memory usage (collector/modules/memtrack.c not merged)")
    doc = json.load(open(os.path.join(reports, "rank0.00000005.pt.trace.memory.json")))
    root = ET.parse(os.path.join(reports, "rank0.00000005.pt.trace.memory.html")).getroot()
    assert len(root.findall(".//" + SVG + "svg")) == len(doc["series"]) >= 1
    length_ms = (doc["window"]["end_ns"] - doc["window"]["start_ns"]) / 1e6
    for s in doc["series"]:
        pts = s["points"]
        assert pts[0] == [0, s["start_bytes"]]
        assert pts[-1][1] == s["end_bytes"] and abs(pts[-1][0] - length_ms) < 0.002
        assert all(a[0] <= b[0] for a, b in zip(pts, pts[1:]))
        assert max(p[1] for p in pts) <= s["peak_bytes"] <= s["peak_process_bytes"]
        where = "host pinned" if s["class"] == "host" else "GPU%d%s" % (
            s["device"], " managed" if s["class"] == "managed" else "")
        line = [l for l in text.splitlines() if l.startswith(where + "  ")]
        assert len(line) == 1, (where, text)
        assert _human(s["start_bytes"]) in line[0] and _human(s["peak_bytes"]) in line[0]
    # train_loop holds its two buffers through every step
    gpu0 = [s for s in doc["series"] if s["device"] == 0 and s["class"] == "device"]
    assert gpu0 and gpu0[0]["start_bytes"] >= 2 * 1024 * 4
