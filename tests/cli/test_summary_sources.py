"""`trainprof summary` has one source of truth per window, and its two ways
of reaching it agree (scripts/trainprof_cli/summary.py, README "summary.json").

A program runs under the library (ddp_loop with input shapes: operators,
annotations, steps, library calls, collectives, memory, device work on the
fake CUPTI; train_loop: no library FLOPs, no operators),
which writes the trace, the text report (handlers/summary.c) and summary.json
(handlers/summary_json.c).  Then:
- the summary printed from summary.json must be the text report, table by
  table and cell by cell (columns, units, rounding, row order), for the rows
  summary.json keeps, and with the same lines under the tables;
- the summary printed from the trace alone (its summary.json out of reach:
  the Python aggregation, _TraceSummary) must be the one printed from
  summary.json, cell by cell, but for what a trace does not hold (the
  process's own memory peak, failed allocations, host name, local rank,
  the memory ledger's tables).
A drift of either the aggregation or the renderer fails one of the two."""

import os
import shutil
import subprocess
import sys

import pytest

import tputil

SCRIPT = os.path.join(tputil.ROOT, "scripts", "trainprof")

# cells a trace does not hold (the Python aggregation prints "--"): by table heading, column title
MEMORY = "Memory held (reserved from CUDA)"
# tables and lines a trace does not hold at all: the memory ledger's (its
# owners' levels when the window began, the bytes each call site held at
# its end, what was never freed at exit)
LEDGER_TABLES = ("Memory by owner (", "Memory held at exit")
LEDGER_LINES = ("Owner named for ", "These owner tables are the ledger's best account")
NOT_IN_TRACE = {MEMORY: ("Process peak", "Failed")}

PROGRAMS = {
    "ddp_loop": (["--warmup-us=2000", "--sleep-us=1000"], {"TRAINPROF_RECORD_SHAPES": "1"}),
    "train_loop": ([], {}),
}

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(tputil.build_dir(), "fakes", "libcupti.so")),
                                reason="fake libcupti not built")


def summary(path):
    p = subprocess.run([sys.executable, SCRIPT, "summary", path], env=tputil.base_env(preload=False),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def is_rule(line):
    return line.startswith("--") and set(line) <= {"-", " "}


def parse(text):
    """(tables, lines): each table, by the line above it, as a list of rows
    (the column titles first) of cells cut at the columns of its rule lines
    (table.c: rule, titles, rule, rows, rule); the other lines of the body
    (from "Per-step wall time" on: the header differs by design)."""
    body = text[text.index("\nPer-step wall time\n"):].split("\n")
    tables, lines, i = {}, [], 0
    while i < len(body):
        if not is_rule(body[i]):
            lines.append(body[i])
            i += 1
            continue
        spans, pos = [], 0
        for dashes in body[i].split("  "):
            spans.append((pos, pos + len(dashes)))
            pos += len(dashes) + 2
        assert is_rule(body[i + 2]), body[i:i + 3]
        j = i + 3
        while not is_rule(body[j]):
            j += 1
        # a cell is its column's span (the last one: the rest of the line)
        tables[lines.pop()] = [[r[a:b if k + 1 < len(spans) else None].strip()
                                for k, (a, b) in enumerate(spans)] for r in [body[i + 1]] + body[i + 3:j]]
        i = j + 1
    return tables, lines


def rows_left_out(lines):
    return [x for x in lines if not x.endswith("are shown)")]


def run_program(name):
    args, env = PROGRAMS[name]
    r = tputil.run(name, args, env=env)
    assert r.rc == 0, r.stderr
    assert len(r.traces) == 1
    rep = os.path.join(os.path.dirname(os.path.dirname(r.traces[0])), "reports")
    base = os.path.basename(r.traces[0])[:-len(".json.gz")]
    with open(os.path.join(rep, base + ".summary.txt")) as f:
        text = f.read()
    alone = os.path.join(tputil.new_dir(), "copied", os.path.basename(r.traces[0]))
    os.makedirs(os.path.dirname(alone))
    shutil.copy(r.traces[0], alone)
    return text, os.path.join(rep, base + ".summary.json"), alone


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def window(request):
    return request.param, run_program(request.param)


def test_summary_json_prints_the_library_text_report(window):
    name, (text, sj, _trace) = window
    c_tables, c_lines = parse(text)
    out = summary(sj)
    assert "(from summary.json)" in out.split("\n")[0]
    py_tables, py_lines = parse(out)
    assert list(py_tables) == list(c_tables), (name, out)
    cut = False
    for heading, c_rows in c_tables.items():
        py = py_tables[heading]
        assert py[0] == c_rows[0], (heading, py[0], c_rows[0])           # column titles
        # summary.json keeps the largest rows: the first ones of the report
        assert len(py) >= min(len(c_rows), 11), (heading, len(py), len(c_rows))
        assert py == c_rows[:len(py)], (heading, py, c_rows)
        cut |= len(py) < len(c_rows)
    assert rows_left_out(py_lines) == c_lines, (name, py_lines, c_lines)
    # rows summary.json did not keep are counted under their table
    assert cut == (len(rows_left_out(py_lines)) < len(py_lines)), (name, py_lines)


def test_trace_alone_prints_what_summary_json_prints(window):
    name, (_text, sj, trace) = window
    from_json = summary(sj)
    from_trace = summary(trace)
    assert "(from trace)" in from_trace.split("\n")[0]
    j_tables, j_lines = parse(from_json)
    t_tables, t_lines = parse(from_trace)
    for heading in [h for h in j_tables if h.startswith(LEDGER_TABLES)]:
        del j_tables[heading]
    j_lines = [x for x in j_lines if not x.startswith(LEDGER_LINES)]
    if MEMORY not in t_tables:
        # the library's rows come from its memory counters, the trace's from
        # its [memory] events: a window without an allocation has none
        assert not tputil.events(tputil.load_trace(trace), ph="i", name="[memory]")
        del j_tables[MEMORY]
        j_lines = [x for x in j_lines if not x.startswith("Bytes the process reserved from CUDA")]
    assert list(t_tables) == list(j_tables), name
    assert [x for x in t_lines if x] == [x for x in j_lines if x], (name, t_lines, j_lines)
    compared = 0
    for heading, j_rows in j_tables.items():
        t_rows = t_tables[heading]
        titles = j_rows[0]
        assert t_rows[0] == titles and len(t_rows) == len(j_rows), (heading, t_rows, j_rows)
        skip = {titles.index(c) for c in NOT_IN_TRACE.get(heading, ())}
        for a, b in zip(t_rows[1:], j_rows[1:]):
            for k, title in enumerate(titles):
                if k not in skip:
                    assert a[k] == b[k], (heading, title, a, b)
                    compared += 1
    assert compared > 30, compared


def test_ledger_tables_from_summary_json(tmp_path):
    """The memory ledger's tables and lines as summary.c writes them for a
    known window (tests/unit/test_summary.c, test_memory_owners_section:
    two GPU owners with call sites, a site without a name, pinned host
    memory, what was held at exit), printed again from its summary.json."""
    exe = os.path.join(tputil.build_dir(), "tests", "test_summary")
    assert os.path.exists(exe), "build the unit tests first (make unit)"
    env = dict(os.environ, TP_TEST_SUMMARY_OUT=str(tmp_path), CK_FORK="yes", CK_RUN_CASE="core")
    r = subprocess.run([exe], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (tmp_path / "rank2.3.pt.trace.summary.txt").read_text()
    c_tables, c_lines = parse(text)
    py_tables, py_lines = parse(summary(str(tmp_path / "rank2.3.pt.trace.summary.json")))
    ledger = [h for h in c_tables if h.startswith(LEDGER_TABLES)]
    assert ledger == ["Memory by owner (GPU 0)", "Memory by owner (host pinned)", "Memory held at exit"]
    for heading in ledger:
        assert py_tables.get(heading) == c_tables[heading], (heading, py_tables.get(heading))
    c_ledger = [x for x in c_lines if x.startswith(LEDGER_LINES)]
    assert len(c_ledger) == 2
    assert [x for x in py_lines if x.startswith(LEDGER_LINES)] == c_ledger
    # and the text itself, rules and padding included
    py_text = summary(str(tmp_path / "rank2.3.pt.trace.summary.json"))
    block = text[text.index("\nMemory by owner (GPU 0)"):text.index("\nCollectives")]
    assert block in py_text, (block, py_text)
