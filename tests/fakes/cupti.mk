# tests/fakes/cupti.mk - the fake CUPTI: build/fakes/libcupti.so with the
# real soname libcupti.so.13 (and that name as a link), built by the
# Makefile's rule for fakes.  It finds the fake runtime and driver at run
# time (dlopen RTLD_NOLOAD), so it links against neither.
FAKE_SONAME_cupti := libcupti.so.13
