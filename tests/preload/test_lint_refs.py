"""scripts/dev/lint-refs, the rule that comments cite only what the repository
holds, run on small trees of its own: each planted citation or stale path
fails it with its file and line, and what the rule leaves alone (URLs,
other projects' paths, build outputs, format strings, ProfilerStep#N, a
metavariable named SPEC) passes."""
import os
import subprocess
import sys

import pytest

LINT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "dev", "lint-refs")

README = """# demo

## Files it creates

Traces land in `{run_name}/traces/rank0.json.gz`; the rules are in `scripts/dev/lint-refs`.
"""

CLEAN_C = """/*
 * a.c - DESIGN: see collector/b.h and flops/c.c; tests/fakes/X.c is a
 * placeholder, tests/programs/prog the program built from prog.c.  Kineto's
 * torch/csrc/profiler/kineto_shim.cpp and https://example.org/notes/1 are
 * not ours; build/obj/a.o is built; ProfilerStep#3 is a name.  README
 * "Files it creates" says where.
 */
static const char *esc = "&#39;";
"""

CLEAN_PY = '''"""tool - reads README "Files it creates" (scripts/tool)."""
import argparse
p = argparse.ArgumentParser()
p.add_argument("--schedule", metavar="SPEC")  # a metavariable, not a citation
'''


def tree(root, extra=None):
    files = {
        "README.md": README,
        "collector/a.c": CLEAN_C,
        "collector/b.h": "/* b.h */\n",
        "collector/flops/c.c": "/* c.c */\n",
        "tests/fakes/cuda.c": "/* cuda.c */\n",
        "preload/cudart.c": "/* cudart.c */\n",
        "tests/programs/prog.c": "/* prog.c */\n",
        "scripts/dev/lint-refs": "#!/bin/sh\n# SPEC 4: the rules quote what they refuse\n",
        "scripts/tool": "#!/usr/bin/env python3\n" + CLEAN_PY,
    }
    files.update(extra or {})
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def lint(root):
    p = subprocess.run([sys.executable, LINT, "--root", str(root)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_clean_tree_passes(tmp_path):
    tree(tmp_path)
    rc, out, err = lint(tmp_path)
    assert (rc, out, err) == (0, "", ""), err


PLANTED = [
    ("collector/d.c", "/* d.c - as SPEC 4 says */\n", "collector/d.c:1: cites the specification"),
    ("collector/d.c", "/* d.c - the file formats\n * (SPEC\n * 7.1) */\n",
     "collector/d.c:2: cites the specification"),
    ("collector/d.c", "int x;\n/* never activates (decision 3) */\n",
     "collector/d.c:2: cites a decision"),
    ("collector/d.c", "// see notes/injection.md 1.4\n", "collector/d.c:1: cites notes"),
    ("collector/d.c", "/* the precision rules of notes 1.4 */\n", "collector/d.c:1: cites notes"),
    ("collector/d.c", "/* fixed in #21 */\n", "collector/d.c:1: cites an issue number"),
    ("collector/d.c", 'const char *h = "libcupti to load (issue 4)";\n',
     "collector/d.c:1: cites an issue number (in a string)"),
    ("collector/d.c", "/* the allocations (collector/memory.h) */\n",
     "collector/d.c:1: names a path that does not exist: collector/memory.h"),
    ("collector/d.c", "/* the shape: see preload/*.def */\n",
     "collector/d.c:1: names a path that does not exist: preload/*.def"),
    ("collector/d.c", "/* the FLOPs: flops/gone.c */\n",
     "collector/d.c:1: names a path that does not exist: flops/gone.c"),
    ("scripts/x.py", '"""x - the merge (issue 15)."""\n', "scripts/x.py:1: cites an issue number"),
    ("scripts/x.py", "x = 1\n# hostile input (finding 2)\n",
     "scripts/x.py:2: cites an issue number"),
    ("scripts/x.py", '"""x - see README "What the commands accept"."""\n',
     "scripts/x.py:1: cites a README section that does not exist"),
    ("scripts/x.sh", "# make bench (../shared)\n", "scripts/x.sh:1: cites notes"),
    ("Makefile", "# built by scripts/trainprof_job.py\nall:\n",
     "Makefile:1: names a path that does not exist: scripts/trainprof_job.py"),
    ("tests/bench/RESULTS.md", "## 2026-11-23, issue 2\n\nMeasured in session 3.\n",
     "tests/bench/RESULTS.md:3: cites an issue number"),
]


@pytest.mark.parametrize("name,text,want", PLANTED)
def test_planted_reference_fails(tmp_path, name, text, want):
    tree(tmp_path, {name: text})
    rc, out, err = lint(tmp_path)
    assert rc == 1, (rc, out, err)
    assert want in err, err
    assert len([ln for ln in err.splitlines() if not ln.startswith("lint:")]) == 1, err


def test_results_headings_may_name_an_issue(tmp_path):
    tree(tmp_path, {"tests/bench/RESULTS.md": "## 2026-11-23, issue 2 (foundation)\n\n| a |\n"})
    rc, out, err = lint(tmp_path)
    assert rc == 0, err


def test_list_counts_without_failing(tmp_path):
    tree(tmp_path, {"collector/d.c": "/* SPEC 4, decision 3, collector/memory.h */\n"})
    p = subprocess.run([sys.executable, LINT, "--root", str(tmp_path), "--list"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 3, (p.stdout, p.stderr)
