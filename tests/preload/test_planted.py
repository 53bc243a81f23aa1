"""Links planted at every name the library writes are never followed.
The names come from one place, README.md's table
"Files trainprof creates": its rows whose second column starts with
`library`.  So the list is tested both ways: a link is planted at each of
its temporary names (and at the fixed names a writer might use instead,
"{final}.tmp" and "{final}.{pid}.tmp") and at its final names, pointing at
a victim file, which must stay as it was; and after a run that writes
every one of them, no file the library made is missing from the list.

The status file was the one creation outside handlers/output.c: a fixed
"rank0.{pid}.json.tmp" opened with O_CREAT|O_TRUNC, so the job overwrote
the victim through a link planted there."""

import os
import re
import subprocess

import tputil

README = os.path.join(tputil.ROOT, "README.md")
VICTIM_TEXT = "precious"
BATCH = 3                       # TRAINPROF_SCHEDULE=all over 3 steps: saved at exit as batch 3
ENV = {
    "TRAINPROF_SCHEDULE": "all",
    "TRAINPROF_HANDLERS": "chrome,summary,memory,stacks",
    "TRAINPROF_WITH_STACK": "1",
    "TRAINPROF_TRIGGER": "{run_name}/trigger",
    # one hang report: the last step lasts 2.2 s, the hang doctor looks once a second
    "TRAINPROF_HANG_S": "1",
    "TRAIN_STALL_US": "2200000",
    # one out-of-memory report: step 1's cudaMalloc of 1 GiB fails (--oom-at=1)
    "FAKE_CUDA_OOM_BYTES": str(256 << 20),
    "TRAIN_OOM_GOES_ON": "1",
}
ARGS = ["--steps=3", "--oom-at=1"]




def library_files():
    """[(final pattern, temporary pattern)] of the README table's library rows."""
    with open(README) as f:
        text = f.read()
    m = re.search(r"^## Files trainprof creates\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README.md has no section 'Files trainprof creates'"
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[1].startswith("library"):
            continue
        final = re.match(r"`([^`]+)`", cells[0]).group(1)
        tmp = re.match(r"`([^`]+)`", cells[2]).group(1)
        rows.append((final, tmp))
    assert len(rows) >= 8, rows     # the trace, 6 reports, the status file
    return rows


def _expand(pattern, pid, **extra):
    v = {"run_name": "test", "rank": "0", "batch": str(BATCH), "pid": str(pid), "host": tputil.tmp_host()}
    v.update(extra)
    # {name} or {name:spec}, the spec as Python's format applies it ({batch:08d})
    return re.sub(r"\{(\w+)(?::([^}]*))?\}",
                  lambda m: format(int(v[m.group(1)]), m.group(2)) if m.group(2)
                  else v[m.group(1)], pattern)


def _names(pid):
    """[(final, [temporary names to plant])] for a run of process "pid"."""
    out = []
    for final_p, tmp_p in library_files():
        final = _expand(final_p, pid)
        tmp = _expand(tmp_p, pid, final=final)
        assert tmp.endswith(".tmp"), tmp
        stem = tmp[:-len(".tmp")]
        tmps = [tmp] + ["%s-%d.tmp" % (stem, k) for k in range(1, 4)]
        tmps += [final + ".tmp", "%s.%d.tmp" % (final, pid)]
        out.append((final, tmps))
    return out




def _run(cwd, plant_finals, env=None):
    victim = os.path.join(cwd, "victim")
    with open(victim, "w") as f:
        f.write(VICTIM_TEXT)

    def plant():                # in the child, before exec: its pid is the run's
        for final, tmps in _names(os.getpid()):
            os.makedirs(os.path.dirname(os.path.join(cwd, final)), exist_ok=True)
            for n in tmps + ([final] if plant_finals else []):
                os.symlink(victim, os.path.join(cwd, n))

    e = tputil.base_env(dict(ENV, **(env or {})))
    p = subprocess.Popen([tputil.program("train_loop")] + ARGS, cwd=cwd, env=e,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=plant)
    p.stdout_data, p.stderr = p.communicate(timeout=60)
    assert p.returncode == 0, p.stderr
    with open(victim) as f:
        assert f.read() == VICTIM_TEXT, (p.stderr, tputil.files_under(cwd))
    assert not os.path.islink(victim)
    return p, _names(p.pid)


def _regular(path):
    return os.path.isfile(path) and not os.path.islink(path)


def test_links_at_temporary_names_are_not_followed():
    cwd = tputil.new_dir()
    p, names = _run(cwd, plant_finals=False)
    lines = [ln for ln in p.stderr.splitlines() if b"out of memory on GPU 0" not in ln]
    assert not any(b"error" in ln or b"warning" in ln for ln in lines), p.stderr
    finals = set()
    for final, tmps in names:
        assert _regular(os.path.join(cwd, final)), (final, tputil.files_under(cwd))
        for t in tmps:
            assert os.path.islink(os.path.join(cwd, t)), t     # still the planted link
        finals.add(final)
    # the list is complete: every regular file the run made is one of its rows
    made = {f for f in tputil.files_under(cwd) if not f.endswith(" -> link") and f != "victim"}
    assert made == finals, sorted(made ^ finals)


def test_links_at_final_names_are_replaced_not_followed():
    """TRAINPROF_OVERWRITE=1: rename(2) replaces the link at each final name
    (the status file is always replaced)."""
    cwd = tputil.new_dir()
    p, names = _run(cwd, plant_finals=True, env={"TRAINPROF_OVERWRITE": "1"})
    assert b"error" not in p.stderr, p.stderr
    for final, _ in names:
        assert _regular(os.path.join(cwd, final)), (final, tputil.files_under(cwd))


def test_links_at_final_names_are_kept_without_overwrite():
    """TRAINPROF_OVERWRITE=0: a link at a final name counts as a file there;
    the trace and its reports are saved under "-1" names beside it."""
    cwd = tputil.new_dir()
    p, names = _run(cwd, plant_finals=True)
    assert b"error" not in p.stderr, p.stderr
    for final, _ in names:
        path = os.path.join(cwd, final)
        if "/status/" in final or ".hang." in final or ".oom." in final:
            assert _regular(path), tputil.files_under(cwd)        # ours, replaced
        else:
            assert os.path.islink(path), final
    trace = os.path.join(cwd, "test", "traces", "rank0.%08d-1.pt.trace.json.gz" % BATCH)
    assert _regular(trace), tputil.files_under(cwd)


def test_link_at_status_folder_is_not_followed():
    """A link planted at the run folder's "status" (pointing at a folder of
    the victim's) is not written through: the status is not written, and
    one error line says so."""
    cwd = tputil.new_dir()
    elsewhere = os.path.join(cwd, "elsewhere")
    os.makedirs(elsewhere)
    os.makedirs(os.path.join(cwd, "test"))
    os.symlink(elsewhere, os.path.join(cwd, "test", "status"))
    e = tputil.base_env(ENV)
    p = subprocess.run([tputil.program("train_loop"), "--steps=3"], cwd=cwd, env=e,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert os.listdir(elsewhere) == []
    err = [l for l in p.stderr.decode().splitlines() if "error" in l]
    assert len(err) == 1 and "status file" in err[0], p.stderr
    assert tputil.find_traces(cwd), p.stderr


# ---- the command's rows ---------------------------------------------------------



def command_files():
    """{module: (final, temporary pattern)} of the README table's rows whose
    second column names a `trainprof` subcommand and its module."""
    with open(README) as f:
        text = f.read()
    m = re.search(r"^## Files trainprof creates\n(.*?)(?=^## )", text, re.S | re.M)
    out = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[1].startswith("`trainprof "):
            continue
        mod = re.search(r"scripts/trainprof_cli/(\w+)(?:\.py|/)", cells[1]).group(1)
        out[mod] = (cells[0], re.match(r"`([^`]+)`", cells[2]).group(1))
    return out


def test_command_rows_name_every_file_the_command_creates():
    """Each module of the command that creates a file (a call of
    trainprof_cli/files.py's create) has its row, and only those; each row's
    temporary name is the one files.py draws."""
    rows = command_files()
    creators = set()
    for name, path in tputil.cli_modules().items():
        if name != "files":
            with open(path) as f:
                if re.search(r"(?<![\w.])create\(", f.read()):
                    creators.add(name)
    assert creators and creators == set(rows), (creators, rows)
    drawn = tputil.cli_module("files").tmp_name("/x/out")
    for _, tmp in rows.values():
        pat = re.escape(tmp).replace(r"\{final\}", "/x/out").replace(r"\{pid\}", str(os.getpid()))
        pat = pat.replace(r"\{random\}", "[0-9a-f]{12}")
        assert re.fullmatch(pat, drawn), (tmp, drawn)


def test_command_files_replace_a_planted_link(tmp_path):
    """`trainprof merge -o OUT` and the trigger file, each with a link
    planted at its final name: the link's target stays as it was, the
    command's file is written in the link's place, and no other file is
    left beside it."""
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    trace = tmp_path / "in.json"
    trace.write_text('{"traceEvents": [\n{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}\n]}\n')
    out = tmp_path / "merged.json"
    os.symlink(victim, out)
    run = tmp_path / "run"
    run.mkdir()
    trig = run / "trigger"
    os.symlink(victim, trig)
    cmd = tputil.CLI
    env = tputil.base_env({}, preload=False)
    p = subprocess.run([cmd, "merge", str(trace), "-o", str(out)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    # the trigger file as `trainprof trigger` writes it (the command itself
    # needs a live job to answer: test_trigger.py runs it end to end)
    assert tputil.cli_module("trigger").write_trigger(str(run), "trigger", "id=x start=3 warmup=1 active=2\n") \
        == str(trig)
    assert victim.read_text() == VICTIM_TEXT
    assert not out.is_symlink() and "traceEvents" in out.read_text()
    assert not trig.is_symlink() and trig.read_text()
    assert sorted(os.listdir(tmp_path)) == ["in.json", "merged.json", "run", "victim"]
    assert os.listdir(run) == ["trigger"]
