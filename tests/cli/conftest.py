"""The trainprof command's tests (scripts/trainprof, scripts/trainprof_cli)
share the preload tests' helpers: tests/preload/tputil.py builds the
environment, runs the programs under the library and reads its traces, which
are what the command summarises, merges and triggers."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "preload"))
