# trainprof - see README.md.  `make` builds build/libtrainprof.so.
#
# Respects the user's CFLAGS/LDFLAGS; our own flags go in TP_CFLAGS.
# Dependencies come from Debian (scripts/dev/deps installs what is missing).

CUDA_HOME ?= /usr/local/cuda
PREFIX    ?= /usr/local
CC        ?= cc
PYTHON    ?= python3
B         := build
PKG_CONFIG ?= pkg-config

CFLAGS    ?= -O2 -g
PKGS      := jansson zlib libunwind check

# `make check` and `make demo` install missing Debian packages first (deps),
# then run again in a sub-make that sees them; other goals fail with a message.
SELF_INSTALLING := deps clean check demo
PKG_OK := $(shell $(PKG_CONFIG) --exists jansson zlib && echo yes)
ifneq ($(PKG_OK),yes)
ifeq ($(filter $(SELF_INSTALLING),$(MAKECMDGOALS)),)
$(error missing build dependencies: run `make deps` (Debian packages libjansson-dev zlib1g-dev libunwind-dev check pkg-config))
endif
endif
ifeq ($(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),)
ifeq ($(filter $(SELF_INSTALLING),$(MAKECMDGOALS)),)
$(error CUDA headers not found under CUDA_HOME=$(CUDA_HOME): set CUDA_HOME to the CUDA toolkit)
endif
endif

TP_WARN   := -Wall -Wextra -Werror -Wshadow -Wno-missing-field-initializers
TP_CFLAGS := -std=gnu11 -fPIC -fvisibility=hidden -MMD -MP $(TP_WARN) \
             -I. -isystem $(CUDA_HOME)/include \
             $(shell $(PKG_CONFIG) --cflags jansson zlib 2>/dev/null) -D_GNU_SOURCE
TP_LIBS   := $(shell $(PKG_CONFIG) --libs jansson zlib 2>/dev/null) -ldl -lpthread -lm
SAN       ?=
# trainprof merge's engine, when ISA-L is there (see merge-engine below)
MERGE_LIB := $(if $(shell $(PKG_CONFIG) --exists libisal 2>/dev/null && echo yes),$(B)/libtrainprof_merge.so)

CORE_SRC    := $(wildcard collector/*/*.c collector/*/*/*.c) $(wildcard handlers/*.c)
PRELOAD_SRC := $(wildcard preload/*.c)
CORE_OBJ    := $(CORE_SRC:%.c=$(B)/obj/%.o)
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(B)/obj/%.o)

UNIT_SRC    := $(wildcard tests/unit/test_*.c)
UNIT_BIN    := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
FAKE_SRC    := $(wildcard tests/fakes/*.c)
PROG_SRC    := $(wildcard tests/programs/*.c)
PROG_BIN    := $(PROG_SRC:tests/programs/%.c=$(B)/programs/%)

.PHONY: all lib merge-engine fakes programs unit print-unit-bin check check-all check-unit check-cli check-preload check-bench-ir check-sanitize check-arm64 \
        check-tsan demo demo-run bench bench-torch install lint deps clean venv cuda-programs gpu-bundle \
        fuzz fuzz-build check-fuzz

all: lib $(MERGE_LIB)
lib: $(B)/libtrainprof.so

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(TP_CFLAGS) $(SAN) $(CFLAGS) -c $< -o $@

$(B)/libtrainprof_core.a: $(CORE_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(B)/libtrainprof.so: $(PRELOAD_OBJ) $(B)/libtrainprof_core.a preload/trainprof.map
	$(CC) -shared $(SAN) $(CFLAGS) $(LDFLAGS) -o $@ $(PRELOAD_OBJ) $(B)/libtrainprof_core.a \
	    -Wl,--version-script=preload/trainprof.map -Wl,-z,nodelete -Wl,-z,now \
	    -Wl,-rpath,'$$ORIGIN' $(TP_LIBS)

# `trainprof merge`'s line-mode engine (scripts/trainprof_cli/merge/engine.c),
# loaded through ctypes by scripts/trainprof_cli/merge/__init__.py beside it;
# built when ISA-L (Debian libisal-dev) is there,
# else merge keeps its slower Python path (MERGE_LIB is set at the top).
merge-engine: $(MERGE_LIB)

$(B)/libtrainprof_merge.so: scripts/trainprof_cli/merge/engine.c scripts/trainprof_cli/merge/engine.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fPIC -shared -fvisibility=hidden $(TP_WARN) -I. -D_GNU_SOURCE $(SAN) $(CFLAGS) \
	    $(shell $(PKG_CONFIG) --cflags libisal zlib) -o $@ $< $(LDFLAGS) \
	    $(shell $(PKG_CONFIG) --libs libisal zlib) -lpthread

# ---- fakes of the GPU libraries and the example programs -------------------
# The fake runtime carries the real soname so that programs linked against it
# look exactly like programs linked against CUDA's libcudart.so.13.
$(B)/fakes/libcudart.so.13: tests/fakes/cudart.c tests/fakes/cudart.map tests/fakes/fakegpu.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fPIC -shared -O1 -g $(TP_WARN) -isystem $(CUDA_HOME)/include \
	    -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/fakes/cudart.map -o $@ $< -lpthread
	ln -sf libcudart.so.13 $(B)/fakes/libcudart.so

# Other fakes: tests/fakes/X.c -> build/fakes/libX.so; a file tests/fakes/X.map,
# if present, is its version script, and FAKE_SONAME_X its soname
# (set in tests/fakes/*.mk).
comma      := ,
FAKE_OTHER := $(filter-out tests/fakes/cudart.c,$(FAKE_SRC))
FAKE_LIBS  := $(FAKE_OTHER:tests/fakes/%.c=$(B)/fakes/lib%.so)
-include $(wildcard tests/fakes/*.mk tests/programs/*.mk)

$(B)/fakes/lib%.so: tests/fakes/%.c tests/fakes/fakegpu.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fPIC -shared -O1 -g $(TP_WARN) -isystem $(CUDA_HOME)/include \
	    -Wl,-soname,$(or $(FAKE_SONAME_$*),lib$*.so) \
	    $(if $(wildcard tests/fakes/$*.map),-Wl$(comma)--version-script=tests/fakes/$*.map) \
	    -o $@ $< -lpthread
	$(if $(filter-out lib$*.so,$(FAKE_SONAME_$*)),ln -sf lib$*.so $(B)/fakes/$(FAKE_SONAME_$*))

fakes: $(B)/fakes/libcudart.so.13 $(FAKE_LIBS)

# Per-program extra libraries: PROG_LIBS_<program> in tests/programs/<program>.mk
# (e.g. a fake and the real cuBLASLt, whose descriptor functions need no GPU);
# PROG_NOSAN_<program> builds it without $(SAN) (its own faults are the test).
$(B)/programs/%: tests/programs/%.c tests/programs/prog.h $(B)/fakes/libcudart.so.13 $(FAKE_LIBS) preload/trainprof.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g $(TP_WARN) -I. -isystem $(CUDA_HOME)/include $(if $(PROG_NOSAN_$*),,$(SAN)) \
	    -o $@ $< -L$(B)/fakes -Wl,-rpath,'$$ORIGIN/../fakes' $(PROG_LIBS_$*) -lcudart -ldl -lpthread

# TP_NO_REAL_CUDA=1 (make check-arm64: the toolkit's libraries are x86-64)
# leaves out the programs that link CUDA's real libraries from
# $(CUDA_HOME)/lib64 (a PROG_LIBS_<program> naming that folder).
ifneq ($(TP_NO_REAL_CUDA),)
PROG_REAL_CUDA := $(foreach p,$(PROG_BIN:$(B)/programs/%=%),$(if $(findstring $(CUDA_HOME)/lib64,$(PROG_LIBS_$p)),$p))
PROG_BIN := $(filter-out $(PROG_REAL_CUDA:%=$(B)/programs/%),$(PROG_BIN))
endif

programs: $(PROG_BIN)

# dlsym_local opens real CUDA libraries RTLD_LOCAL: linked without the fake
# runtime, whose soname would stand in for the real one's dependents.
$(B)/programs/dlsym_local: tests/programs/dlsym_local.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g $(TP_WARN) $(SAN) -o $@ $< -ldl

# ---- CUDA programs built with nvcc (when the toolkit has it) ---------------
# tests/programs/X.cu -> build/programs/X_shared (-cudart shared: launches reach
# __cudaLaunchKernel) and X_ptsz (also --default-stream per-thread:
# __cudaLaunchKernel_ptsz), both finding the fake runtime first through their
# run path; tests/preload/test_nvcc.py runs them and skips when they are
# absent.  libs_gpu.cu needs a GPU (real cuBLAS, cuBLASLt, cuDNN): CI only
# compiles and links it; scripts/dev/gpu-validate builds its own copies against
# the real runtime.  One sm_90 target keeps a build at about 1.5 s.
NVCC        ?= $(CUDA_HOME)/bin/nvcc
NVCC_FLAGS  ?= -O2 -arch=sm_90
CU_SRC      := $(filter-out tests/programs/libs_gpu.cu,$(wildcard tests/programs/*.cu))
ifneq ($(wildcard $(NVCC)),)
CUDA_PROGS  := $(CU_SRC:tests/programs/%.cu=$(B)/programs/%_shared) \
               $(CU_SRC:tests/programs/%.cu=$(B)/programs/%_ptsz) \
               $(if $(wildcard tests/programs/libs_gpu.cu),$(B)/programs/libs_gpu)
endif

$(B)/programs/%_shared: tests/programs/%.cu $(B)/fakes/libcudart.so.13
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -cudart shared -o $@ $< -Xlinker -rpath='$$ORIGIN/../fakes'

$(B)/programs/%_ptsz: tests/programs/%.cu $(B)/fakes/libcudart.so.13
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) --default-stream per-thread -cudart shared -o $@ $< \
	    -Xlinker -rpath='$$ORIGIN/../fakes'

$(B)/programs/libs_gpu: tests/programs/libs_gpu.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcublas -lcublasLt -lcudnn

cuda-programs: $(CUDA_PROGS)

# ---- tests -----------------------------------------------------------------
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
$(B)/tests/%: tests/unit/%.c $(B)/libtrainprof_core.a
	@mkdir -p $(dir $@)
	$(CC) $(TP_CFLAGS) $(SAN) $(CFLAGS) $(shell $(PKG_CONFIG) --cflags check) -o $@ $< \
	    $(B)/libtrainprof_core.a $(CHECK_LIBS) $(TP_LIBS) $(UNIT_LIBS_$*)

# test_merge_engine includes scripts/trainprof_cli/merge/engine.c (its static parts are
# tested too); without ISA-L there is no engine to test.
UNIT_LIBS_test_merge_engine := $(shell $(PKG_CONFIG) --libs libisal 2>/dev/null)
$(B)/tests/test_merge_engine: scripts/trainprof_cli/merge/engine.c scripts/trainprof_cli/merge/engine.h
ifeq ($(MERGE_LIB),)
UNIT_BIN := $(filter-out $(B)/tests/test_merge_engine,$(UNIT_BIN))
endif

unit: $(UNIT_BIN)

# the unit tests this configuration builds (scripts/dev/check-arm64 runs
# exactly these, not whatever an older build left in $(B)/tests)
print-unit-bin:
	@echo $(UNIT_BIN)

# The test venv: the trace readers (tests/requirements.txt) and the PyPI
# torch wheel, the real client of tests/preload/test_real_clients.py
# (tests/requirements-torch.txt, about 5 GB; pip's cache serves repeated
# installs).
VENV := $(B)/venv
venv: $(VENV)/.ok
$(VENV)/.ok: tests/requirements.txt tests/requirements-torch.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r tests/requirements.txt -r tests/requirements-torch.txt
	touch $@

# TP_TEST_NEED_FAKES: the tests that load the fakes fail, rather than skip,
# when they are missing.
check-unit: unit fakes
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; CK_FORK=yes TP_TEST_NEED_FAKES=1 $$t; done

check-preload: lib $(MERGE_LIB) fakes programs cuda-programs venv unit
	@scripts/dev/modgraph --check --build $(B) >/dev/null || { scripts/dev/modgraph --build $(B); exit 1; }
	$(VENV)/bin/python -m pytest -q tests/preload

# The trainprof command's own tests (scripts/trainprof and scripts/trainprof_cli:
# run, summary, merge and its engine, trigger, status), on traces the library
# writes with the fakes.
check-cli: lib $(MERGE_LIB) fakes programs venv
	$(VENV)/bin/python -m pytest -q tests/cli

check: deps
	@$(MAKE) --no-print-directory check-all

check-all: lint check-unit check-fuzz check-cli check-preload check-bench-ir check-arm64

# aarch64 (Grace): the library, fakes, programs and unit tests built into
# build/arm64 (cross-compiled on x86-64, with the arm64 libraries `make deps`
# installs), the unit tests and a chosen part of the preload tests run there
# (under qemu-user on x86-64); scripts/dev/check-arm64 says which and why.
check-arm64: venv
	@B=build/arm64 PYTHON=$(VENV)/bin/python MAKE="$(MAKE)" scripts/dev/check-arm64

# AddressSanitizer + UndefinedBehaviorSanitizer over the unit and preload tests.
# The preloaded library needs the ASan runtime first in LD_PRELOAD; the tests
# read TP_TEST_ASAN to do that.
# Everything is built before the first test runs (the unit tests load the fakes).
check-sanitize:
	$(MAKE) B=build/asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" lib merge-engine fakes programs cuda-programs unit
	$(MAKE) B=build/asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" check-unit
	$(MAKE) venv
	TP_TEST_BUILD=build/asan TP_TEST_ASAN=$$($(CC) -print-file-name=libasan.so) \
	    ASAN_OPTIONS=detect_leaks=0 $(VENV)/bin/python -m pytest -q tests/cli tests/preload

# The unit tests, then the 16-thread program recording under the preload
# (TSan's runtime preloaded first; a race exits non-zero).
check-tsan:
	$(MAKE) B=build/tsan SAN="-fsanitize=thread" check-unit lib fakes programs
	@d=$$(mktemp -d) && cd $$d && TSAN_OPTIONS=halt_on_error=1 TRAINPROF_SCHEDULE=all \
	    TRAINPROF_RUN_NAME=tsan TRAINPROF_LOG=error \
	    LD_PRELOAD="$$($(CC) -print-file-name=libtsan.so) $(CURDIR)/build/tsan/libtrainprof.so" \
	    $(CURDIR)/build/tsan/programs/threads && ls tsan/traces/*.gz >/dev/null && rm -rf $$d && \
	    echo "check-tsan: 16 threads recording under the preload: no race reported"

# ---- fuzzing (libFuzzer; clang and libclang-rt-dev from Debian) ------------
# tests/fuzz/X.c -> build/fuzz/bin/X, linked with the collector and handlers
# built by clang under ASan + UBSan with libFuzzer's coverage.  Each runs
# FUZZ_SECONDS from its seeds in tests/fuzz/corpus/X (what it learns goes to
# build/fuzz/corpus/X); a crash, a sanitizer report, a leak or a harness's
# own check fails the target, the input kept in build/fuzz/crashes/ and the
# log in build/fuzz/X.log.  `make check` runs each 20 s when CI is set
# (.ci/run sets it), else 3 s; FUZZ_JOBS (one per core) at a time.
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=all
FUZZ_NAMES   := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS := $(if $(filter-out false 0,$(CI)),20,3)
FUZZ_JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

$(B)/bin/fuzz_%: tests/fuzz/fuzz_%.c $(B)/libtrainprof_core.a
	@mkdir -p $(dir $@)
	$(CC) $(TP_CFLAGS) $(SAN) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(B)/libtrainprof_core.a $(TP_LIBS) \
	    $(FUZZ_LIBS_$*)

# fuzz_merge includes scripts/trainprof_cli/merge/engine.c; without ISA-L it is not built.
FUZZ_LIBS_merge := $(shell $(PKG_CONFIG) --libs libisal 2>/dev/null)
$(B)/bin/fuzz_merge: scripts/trainprof_cli/merge/engine.c scripts/trainprof_cli/merge/engine.h
ifeq ($(MERGE_LIB),)
FUZZ_NAMES := $(filter-out fuzz_merge,$(FUZZ_NAMES))
endif

fuzz-build:
	@$(MAKE) --no-print-directory B=build/fuzz CC=$(FUZZ_CC) SAN="$(FUZZ_SAN)" \
	    $(FUZZ_NAMES:%=build/fuzz/bin/%)

fuzz: fuzz-build
	@rm -f build/fuzz/*.failed; printf '%s\n' $(FUZZ_NAMES) | xargs -P $(FUZZ_JOBS) -I{} sh -c '\
	    h=$$1; mkdir -p build/fuzz/corpus/$$h build/fuzz/crashes; \
	    if ASAN_OPTIONS=detect_leaks=1 build/fuzz/bin/$$h -max_total_time=$(FUZZ_SECONDS) \
	        -print_final_stats=1 -artifact_prefix=build/fuzz/crashes/$$h- \
	        build/fuzz/corpus/$$h tests/fuzz/corpus/$$h >build/fuzz/$$h.log 2>&1; then \
	        awk -v h=$$h "/^stat::number_of_executed_units/ {n=\$$2} \
	            /^stat::average_exec_per_sec/ {r=\$$2} \
	            END {printf \"fuzz: %-16s %10d runs (%d/s), no crash\\n\", h, n, r}" build/fuzz/$$h.log; \
	    else \
	        tail -40 build/fuzz/$$h.log; echo "fuzz: $$h FAILED: build/fuzz/$$h.log"; : >build/fuzz/$$h.failed; \
	    fi' sh {}; \
	fail=$$(ls build/fuzz/*.failed 2>/dev/null | sed 's|.*/||; s|\.failed$$||' | tr '\n' ' '); \
	test -z "$$fail" || { echo "fuzz: failed: $$fail"; exit 1; }

check-fuzz:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

lint:
	@scripts/dev/lint

demo: deps
	@$(MAKE) --no-print-directory demo-run

demo-run: lib fakes programs
	@B=$(B) scripts/dev/demo

BENCH_BIN := $(B)/bench/launch_bench $(B)/bench/gemm_bench $(B)/bench/nvtx_bench $(B)/bench/itt_bench \
             $(B)/bench/writer_bench

bench: lib fakes $(BENCH_BIN)
	@B=$(B) scripts/dev/bench
	@B=$(B) scripts/dev/bench-ir

# The hot paths' instruction counts against tests/bench/baseline.txt: a
# report in make check's output (a figure 5 % over its baseline is marked),
# never a failure; scripts/dev/bench-ir --write takes a new baseline.
check-bench-ir: lib fakes $(BENCH_BIN)
	@B=$(B) scripts/dev/bench-ir

# ms per step of a CPU training loop: plain, torch.profiler, trainprof run
bench-torch: lib venv
	@B=$(B) scripts/dev/bench-torch

# the trace writer alone (the chrome handler fed events), linked with the core
$(B)/bench/writer_bench: tests/bench/writer_bench.c $(B)/libtrainprof_core.a
	@mkdir -p $(dir $@)
	$(CC) $(TP_CFLAGS) $(CFLAGS) -o $@ $< $(B)/libtrainprof_core.a $(TP_LIBS)

$(B)/bench/%: tests/bench/%.c $(B)/fakes/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(TP_WARN) -isystem $(CUDA_HOME)/include -o $@ $< \
	    -L$(B)/fakes -Wl,-rpath,'$$ORIGIN/../fakes' -lcudart -ldl -lpthread

# For a GPU machine that may lack our Debian libraries: copy every shared
# library build/libtrainprof.so needs, except the base system ones, beside it
# (the library's run path is $ORIGIN).  scripts/dev/gpu-validate then needs only
# build/ and scripts/.
GPU_BUNDLE_BASE := linux-vdso.so% ld-linux% libc.so% libm.so% libdl.so% libpthread.so% \
                   librt.so% libz.so% libgcc_s.so% libstdc++.so% libresolv.so%
gpu-bundle: lib
	@ldd $(B)/libtrainprof.so | awk '$$2 == "=>" && $$3 ~ /^\// {print $$1, $$3}' | \
	while read -r name path; do \
	    case " $(GPU_BUNDLE_BASE) " in *" $$(echo $$name | sed 's/\.so.*/.so%/') "*) continue;; esac; \
	    case "$$name" in ld-linux*) continue;; esac; \
	    cp -L "$$path" "$(B)/$$name" && echo "gpu-bundle: $(B)/$$name (from $$path)"; \
	done
	@# ISA-L is opened at run time by the trace writer (handlers/jsonw.c), not linked
	@p=$$(ldconfig -p | awk '$$1 == "libisal.so.2" && /x86-64/ {print $$NF; exit}'); \
	if [ -n "$$p" ]; then cp -L "$$p" $(B)/libisal.so.2 && \
	    echo "gpu-bundle: $(B)/libisal.so.2 (from $$p; the trace writer opens it at run time)"; fi

# The command: bin/trainprof, and its package scripts/trainprof_cli (the
# Python files, the pyhook among them) as share/trainprof/trainprof_cli,
# where bin/trainprof looks for it; the merge engine in lib/trainprof.
CLI_PY := $(patsubst scripts/%,%,$(wildcard scripts/trainprof_cli/*.py scripts/trainprof_cli/*/*.py))

install: lib $(MERGE_LIB)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(B)/libtrainprof.so $(DESTDIR)$(PREFIX)/lib/
	$(if $(MERGE_LIB),install -d $(DESTDIR)$(PREFIX)/lib/trainprof && \
	    install -m 755 $(MERGE_LIB) $(DESTDIR)$(PREFIX)/lib/trainprof/)
	install -m 644 preload/trainprof.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 scripts/trainprof $(DESTDIR)$(PREFIX)/bin/
	@set -e; cd scripts && for f in $(CLI_PY); do \
	    echo "install -D -m 644 scripts/$$f $(DESTDIR)$(PREFIX)/share/trainprof/$$f"; \
	    install -D -m 644 $$f $(DESTDIR)$(PREFIX)/share/trainprof/$$f; done
	sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/trainprof.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/trainprof.pc

deps:
	@scripts/dev/deps

clean:
	rm -rf build

-include $(shell find $(B)/obj $(B)/tests $(B)/bin -name '*.d' 2>/dev/null)
