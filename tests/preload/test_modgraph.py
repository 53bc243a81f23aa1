"""scripts/dev/modgraph --check, the order of the library's folders, run on small
trees of its own: a clean tree passes; an #include or a linked symbol that
points from a stage folder of collector/ to a later one (README "Layout"),
or from a handler into collector/ past its contract and common utilities,
and a cycle of units (a .c with its .h) made of includes and symbols
together, each fail it and are named."""
import os
import shutil
import subprocess
import sys

import pytest

MODGRAPH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "dev", "modgraph")

# common/ below record/ below control/; handlers/ and preload/ above
CLEAN = {
    "collector/common/u.h": "int tp_u(void);\n",
    "collector/common/u.c": '#include "u.h"\nint tp_u(void) { return 1; }\n',
    "collector/record/r.h": "int tp_r(void);\n",
    "collector/record/r.c": '#include "r.h"\n#include "collector/common/u.h"\n'
                            "int tp_r(void) { return tp_u(); }\n",
    "collector/control/c.h": "int tp_c(void);\n",
    "collector/control/c.c": '#include "c.h"\n#include "collector/record/r.h"\n'
                             "int tp_c(void) { return tp_r(); }\n",
    "collector/contract/k.h": "struct tp_k { int v; };\nint tp_k(void);\n",
    "collector/contract/k.c": '#include "k.h"\nint tp_k(void) { return 3; }\n',
    "handlers/h.c": '#include "../collector/contract/k.h"\n#include "collector/common/u.h"\n'
                    "int tp_h(void) { return tp_k() + tp_u(); }\n",
    "preload/p.c": '#include "collector/control/c.h"\nint tp_p(void) { return tp_c(); }\n',
}


def build(root, files):
    """Write "files" under "root" and compile each .c into root/build/obj."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name in files:
        if name.endswith(".c"):
            obj = root / "build" / "obj" / (name[:-2] + ".o")
            obj.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cc", "-c", "-I", str(root), "-o", str(obj), str(root / name)],
                           check=True, cwd=root)


def modgraph(root):
    p = subprocess.run([sys.executable, MODGRAPH, "--check", "--root", str(root),
                        "--build", str(root / "build")], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


needs_cc = pytest.mark.skipif(not (shutil.which("cc") and shutil.which("nm")), reason="no cc or nm")


@needs_cc
def test_clean_tree_passes(tmp_path):
    build(tmp_path, CLEAN)
    rc, out = modgraph(tmp_path)
    assert rc == 0, out
    assert "cycles: 0 (objects by symbols), 0 (units" in out and "arrows up: 0" in out, out
    assert "includes up: 0" in out, out


PLANTED = [
    # an include from record/ of a control/ header, from the root and relative
    ({"collector/record/r.c": '#include "r.h"\n#include "collector/control/c.h"\n'
                              "int tp_r(void) { return 2; }\n"},
     ["includes up: 1", "collector/record/r.c includes collector/control/c.h"]),
    ({"collector/record/r.c": '#include "r.h"\n#include "../control/c.h"\n'
                              "int tp_r(void) { return 2; }\n"},
     ["includes up: 1", "collector/record/r.c includes collector/control/c.h"]),
    # a symbol of control/ used by common/ (declared by hand: no include to see)
    ({"collector/common/u.c": "int tp_c(void);\nint tp_u(void) { return tp_c(); }\n"},
     ["arrows up: 1", "collector/common/u -> collector/control/c (tp_c)"]),
    # a handler past the contract: a record/ header, a record/ symbol
    ({"handlers/h.c": '#include "collector/record/r.h"\nint tp_h(void) { return 0; }\n'},
     ["includes up: 1", "handlers/h.c includes collector/record/r.h"]),
    ({"handlers/h.c": "int tp_r(void);\nint tp_h(void) { return tp_r(); }\n"},
     ["arrows up: 1", "handlers/h -> collector/record/r (tp_r)"]),
    # a header of record/ including a sibling whose .c uses the first: units
    # r and s in a cycle that neither the objects nor the order shows
    ({"collector/record/r.h": '#include "s.h"\nint tp_r(void);\n',
      "collector/record/s.h": "int tp_s(void);\n",
      "collector/record/s.c": '#include "s.h"\n#include "r.h"\nint tp_s(void) { return tp_r(); }\n'},
     ["cycles: 0 (objects by symbols), 1 (units", "collector/record/r <-> collector/record/s"]),
]


@needs_cc
@pytest.mark.parametrize("planted,want", PLANTED)
def test_planted_arrow_fails(tmp_path, planted, want):
    build(tmp_path, {**CLEAN, **planted})
    rc, out = modgraph(tmp_path)
    assert rc == 1, out
    for w in want:
        assert w in out, (w, out)
