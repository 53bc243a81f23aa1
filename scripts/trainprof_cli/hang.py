"""trainprof hang RUN_FOLDER: which rank the others wait for.

Reads the hang reports the library writes when no step has ended for
TRAINPROF_HANG_S seconds (collector/control/hang.c:
RUN_FOLDER/reports/rank{rank}.hang.json, and rank{rank}.hang.{n}.json for a
later hang of the same process: the latest is judged).  Ranks that wrote none
(dead, or not hung) are listed as such.

Per communicator (its id is its creation order in each process, the same on
every rank that creates its communicators in the same order) the highest
collective number any rank issued is k: the ranks with a thread inside it
wait, and so do those that issued it and wait elsewhere (NCCL's collectives
return once queued: the wait is then in a synchronize); the ranks whose last
issued number is below k never arrived, and what
they do instead is printed (the blocking call a thread is in, or their first
thread's state and the top of its native stack).  The last line names them: the culprit
rank(s).  Exit status 0 with a verdict, 1 when there are no reports, 2 on
bad input (one line on stderr).  Python standard library only.
"""

import argparse
import json
import os
import re
import sys

from trainprof_cli import files

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAME = re.compile(r"^rank(\d+)\.hang(?:\.(\d+))?\.json$")
LIMIT = 64 << 20


class BadInput(Exception):
    pass


def printable(v):
    """str(v) with control characters as "?": a report's text must not
    drive the terminal."""
    return _CONTROL.sub("?", str(v))


def err(msg):
    sys.stderr.write("trainprof: %s\n" % printable(msg))


def _int(o, key, path):
    v = o.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise BadInput("%s: not a hang report: %r is not an integer" % (path, key))
    return v


def read_report(path):
    """The report at `path`, checked for the fields judged here."""
    try:
        data, _ = files.read_regular(path, LIMIT, follow=False)
    except files.FileError as e:
        raise BadInput(str(e))
    try:
        o = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BadInput("%s: not JSON: %s" % (path, e))
    if not isinstance(o, dict) or o.get("kind") != "trainprof-hang":
        raise BadInput("%s: not a hang report (no \"kind\": \"trainprof-hang\")" % path)
    _int(o, "rank", path)
    comms, threads = o.get("communicators"), o.get("threads")
    if not isinstance(comms, list) or not isinstance(threads, list):
        raise BadInput("%s: not a hang report: communicators and threads must be lists" % path)
    for c in comms:
        if not isinstance(c, dict):
            raise BadInput("%s: not a hang report: a communicator is not an object" % path)
        for k in ("id", "size", "rank", "last_issued"):
            _int(c, k, path)
    for t in threads:
        if not isinstance(t, dict):
            raise BadInput("%s: not a hang report: a thread is not an object" % path)
        call = t.get("in_flight")
        if call is not None and not isinstance(call, dict):
            raise BadInput("%s: not a hang report: in_flight is not an object" % path)
        if call is not None and "communicator" in call:
            _int(call, "communicator", path)
            _int(call, "seq", path)
    return o


def find_reports(folder):
    """{rank: report}: the latest report of each rank under `folder` (its
    reports/ subfolder, or the folder itself)."""
    if not os.path.isdir(folder):
        raise BadInput("%s: not a folder" % folder)
    sub = os.path.join(folder, "reports")
    where = sub if os.path.isdir(sub) else folder
    latest = {}
    try:
        names = os.listdir(where)
    except OSError as e:
        raise BadInput("%s: cannot list: %s" % (where, e.strerror or e))
    for name in names:
        m = _NAME.match(name)
        if not m:
            continue
        rank, n = int(m.group(1)), int(m.group(2) or 1)
        if rank not in latest or n > latest[rank][0]:
            latest[rank] = (n, os.path.join(where, name))
    out = {}
    for rank, (_, path) in sorted(latest.items()):
        o = read_report(path)
        if o["rank"] != rank:
            raise BadInput("%s: says rank %d, named rank %d" % (path, o["rank"], rank))
        out[rank] = o
    return out, where


def ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


_PYFRAME = re.compile(r'^\s*File "([^"]*)", line (\d+) in (.*)$')


def python_top(rep):
    """The innermost Python frame of the thread faulthandler names current
    (the main thread, which the library signals), as "file:line in
    function", or None."""
    text = rep.get("python_stacks")
    if not isinstance(text, str):
        return None
    current = False
    for line in text.splitlines():
        if line.startswith("Current thread"):
            current = True
            continue
        m = _PYFRAME.match(line)
        if current and m:
            return "%s:%s in %s" % (os.path.basename(m.group(1)), m.group(2), m.group(3))
    return None


def doing(rep):
    """What a rank does: the blocking call a thread is in, else its first
    thread as the kernel sees it."""
    for t in rep["threads"]:
        c = t.get("in_flight")
        if c:
            s = "in %s for %.1f s" % (c.get("call"), c.get("for_s") or 0)
            if "communicator" in c:
                s += " (communicator %d, %s seq %d)" % (c["communicator"], c.get("collective"),
                                                    c["seq"])
            return s
    t = next((t for t in rep["threads"] if not t.get("profiler")), None)
    if not t:
        return "no thread seen"
    s = "no blocking call; thread %s (%s): state %s, wait channel %s" % (
        t.get("tid"), t.get("name"), t.get("state"), t.get("wchan") or "-")
    py = python_top(rep)
    if py:
        s += "; Python: " + py
    stack = t.get("stack")
    if isinstance(stack, list) and all(isinstance(f, str) for f in stack):
        # the innermost named frames (an unnamed "lib+0x..." first is the
        # signal's return trampoline)
        named = [f for f in stack if "+0x" not in f][:4]
        if named:
            s += "; stack top: " + " < ".join(named)
    return s


def judge(reports):
    """(lines, culprits): the verdict per communicator."""
    lines, culprits, where = [], set(), []
    ids = sorted({c["id"] for r in reports.values() for c in r["communicators"]})
    for cid in ids:
        members = {}        # global rank -> (last issued, communicator entry)
        for rank, r in reports.items():
            for c in r["communicators"]:
                if c["id"] == cid:
                    members[rank] = c
        k = max(c["last_issued"] for c in members.values())
        size = max(c["size"] for c in members.values())
        inside, behind, past = [], [], []
        coll = None
        for rank, c in sorted(members.items()):
            calls = [t["in_flight"] for t in reports[rank]["threads"]
                     if t.get("in_flight") and t["in_flight"].get("communicator") == cid
                     and t["in_flight"].get("seq") == k]
            if calls and k > 0:
                inside.append(rank)
                coll = coll or calls[0].get("collective")
            elif c["last_issued"] < k:
                behind.append(rank)
            else:
                past.append(rank)
        missing = max(0, size - len(members))
        lines.append("communicator %d (size %d): collective seq %d%s" % (
            cid, size, k, " (%s)" % coll if coll else ""))
        if inside:
            lines.append("  inside seq %d: %s" % (k, ranks_text(inside)))
        for rank in behind:
            lines.append("  never arrived: rank %d (last issued seq %d): %s" % (
                rank, members[rank]["last_issued"], doing(reports[rank])))
        for rank in past:
            lines.append("  issued seq %d, not inside it: rank %d: %s" % (
                k, rank, doing(reports[rank])))
        if missing:
            lines.append("  no report from %d of its ranks (dead, or not hung)" % missing)
        # NCCL's collectives return once queued: a rank past #k waits in a
        # synchronize instead, and counts as arrived as one inside it does
        if (inside or past) and behind:
            culprits.update(behind)
            where.append("communicator %d, %s seq %d" % (cid, coll or "collective", k))
    return lines, culprits, where


def main(argv):
    p = argparse.ArgumentParser(
        prog="trainprof hang",
        description="Which rank a hung job waits for, from the hang reports "
                    "(RUN_FOLDER/reports/rank*.hang.json, TRAINPROF_HANG_S).")
    p.add_argument("folder", metavar="RUN_FOLDER")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        reports, where = find_reports(a.folder)
    except BadInput as e:
        err(e)
        return 2
    if not reports:
        err("no hang reports in %s (rank*.hang.json: TRAINPROF_HANG_S, or no rank hung)" % where)
        return 1
    world = max([r.get("world_size") or 0 for r in reports.values()] + [max(reports) + 1])
    out = sys.stdout
    out.write("hang reports: %s of %d (%s)\n" % (ranks_text(reports), world, where))
    for rank, r in sorted(reports.items()):
        last = r.get("last_step")
        py = python_top(r)
        out.write(printable("  rank %d: no step ended for %.1f s; last step %s%s" % (
            rank, r.get("stalled_s") or 0, "none" if last is None else last,
            "; Python: " + py if py else "")) + "\n")
    dead = sorted(set(range(world)) - set(reports))
    if dead:
        out.write("  no report: %s (dead, or not hung)\n" % ranks_text(dead))
    lines, culprits, at = judge(reports)
    for line in lines:
        out.write(printable(line) + "\n")
    if culprits:
        out.write("culprit: %s (%s): the others wait for %s\n" % (
            ranks_text(culprits), "; ".join(at), "it" if len(culprits) == 1 else "them"))
    elif dead:
        out.write("culprit: %s, which wrote no report (dead?)\n" % ranks_text(dead))
    else:
        out.write("culprit: none found: no rank waits in a collective that another never "
                  "reached\n")
    return 0
