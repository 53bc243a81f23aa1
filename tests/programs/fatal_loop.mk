# fatal_loop: its faults (null store, division by zero, bus error, trap) must
# happen, so it is built without the sanitizers of make check-sanitize
# (UBSan would stop at the null store or the division first); the library
# under test keeps them.
PROG_NOSAN_fatal_loop := 1
