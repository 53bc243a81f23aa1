"""The memory handler's page and JSON as readers see them.

The unit test build/tests/test_memory_report writes a known window's report (GPU0:
1 GiB, +512 MiB at 10 ms, +256 MiB at 20 ms, -512 MiB at 30 ms, -256 MiB at
60 ms, window 100 ms, held by two owners of the memory ledger; pinned host
memory 64 MiB from 5 ms, no owner) and copies it to TP_TEST_MEMORY_OUT.  Here the page is parsed as XML (it is XHTML), the SVG
step paths are read back into points and compared with the JSON's, the
owners' bands and legend with the JSON's owners, and, when chromium is
installed, the page is rendered headless and the plot's pixels counted (the
lines, the host's tint, each owner's band in its legend colour).
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


def _legend(root, svg):
    """[(name, colour)] of the owner legend right after plot "svg"."""
    body = root.find(XHTML + "body")
    kids = list(body)
    after = kids[kids.index(svg) + 1] if svg in kids else None
    if after is None or after.tag != XHTML + "ul" or after.get("class") != "legend":
        return []
    out = []
    for li in after.findall(XHTML + "li"):
        swatch = li.find(XHTML + "span[@class='swatch']")
        name = li.find(XHTML + "span[@class='name']")
        out.append(("".join(name.itertext()), re.search(r"background:(#[0-9a-f]{6})", swatch.get("style")).group(1)))
    return out


def test_owner_bands_and_legend(report):
    """Each plot stacks the JSON's owners of its series (the memory ledger)
    under its line: one band per owner, in the JSON's order, each titled
    with its owner and filled with its legend's colour; the top band's top
    edge is the line where the owners add up to the series."""
    html, doc = report
    root = ET.parse(html).getroot()
    svgs = root.findall(".//" + SVG + "svg")
    assert any(s["owners"] for s in doc["series"])
    for svg, series in zip(svgs, doc["series"]):
        names = [o["owner"] for o in series["owners"]]
        bands = [p for p in svg.iter(SVG + "path") if p.get("class") == "owner"]
        assert ["".join(b.find(SVG + "title").itertext()) for b in bands] == names
        legend = _legend(root, svg)
        assert [n for n, _ in legend] == names
        assert [b.get("fill") for b in bands] == [c for _, c in legend]
        if not names:
            continue
        # the owners' end levels add up to the series' here: the stack's top
        # ends where the line ends
        assert sum(o["end_bytes"] for o in series["owners"]) == series["end_bytes"]
        top = [(float(x), float(y)) for x, y in re.findall(r"[ML]\s*(-?[\d.]+)\s+(-?[\d.]+)", bands[-1].get("d"))]
        line = path_points([p for p in svg.iter(SVG + "path") if p.get("class") == "step"][0].get("d"))
        assert top[0] == line[0] and line[-1] in top
        assert min(y for _, y in top) == min(y for _, y in line)


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

    # the owners' bands (GPU0): their legend colours at the bands' opacity over white
    root = ET.parse(html).getroot()
    owners = [o for svg in root.findall(".//" + SVG + "svg") for o in _legend(root, svg)]
    assert len(owners) == 2, owners
    tints = []
    for _, color in owners:
        c = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
        tints.append([255 - 0.55 * (255 - v) for v in c])
    band = [0] * len(tints)

    # strokes (saturated) and the area under the host's line (a 10% tint over white)
    blue = green = green_fill = 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = row[x:x + 3]
            if b - r > 80:
                blue += 1
            if g - r > 50 and g - b > 30:
                green += 1
            elif g - r > 5 and g - b > 5:
                green_fill += 1
            for k, t in enumerate(tints):
                if abs(r - t[0]) <= 4 and abs(g - t[1]) <= 4 and abs(b - t[2]) <= 4:
                    band[k] += 1
    # each step line is ~800 px long, 1.5 px wide, anti-aliased; the area
    # under the host's is ~780 x 180 px; GPU0's bands are 784 px long, torch's
    # caching allocator's 87 px high (768 MiB of the 2 GiB axis) and more
    # from 10 to 30 ms, NCCL's 29 px and more from 20 to 60 ms
    assert blue > 1000, blue
    assert green > 700, green
    assert green_fill > 50000, green_fill
    assert band[0] > 50000, (owners, band)
    assert band[1] > 15000, (owners, band)


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
