"""trainprof_cli - the modules of the `trainprof` command (scripts/trainprof).

The entry script parses `run` itself and imports one of these for the other
commands, only when it runs:

  summary.py      `trainprof summary`: tables of traces, summary.json files
                  or run folders; a job table and stragglers for several ranks
  merge/          `trainprof merge`: __init__.py plans the merge and keeps a
                  Python path; engine.c/engine.h, built as
                  build/libtrainprof_merge.so (with ISA-L) and loaded through
                  ctypes, inflates, rewrites and deflates the event arrays
  trigger.py     `trainprof trigger` and `trainprof status`
  files.py        the one way the command creates and reads a file
  pyhook/         sitecustomize.py, put first on PYTHONPATH by `trainprof run`
                  for Python commands (counts optimizer steps); not a module
                  of this package

`make install` copies this folder to share/trainprof/trainprof_cli/ and the
engine to lib/trainprof/.  Python standard library only.
"""
