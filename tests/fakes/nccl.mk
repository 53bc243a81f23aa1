# tests/fakes/nccl.mk - the fake executing half of NCCL: build/fakes/libnccl.so
# with the real soname libnccl.so.2 (the real library has no symbol
# versions, so no version script).  Linked against the fake runtime: its
# ncclAllReduce launches a kernel through cudaLaunchKernel.
# An explicit rule because this fake links against the fake runtime, which
# the Makefile's rule for fakes does not do.
FAKE_SONAME_nccl := libnccl.so.2

$(B)/fakes/libnccl.so: tests/fakes/nccl.c tests/fakes/nccl.mk tests/fakes/fakegpu.h $(B)/fakes/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fPIC -shared -O1 -g $(TP_WARN) -isystem $(CUDA_HOME)/include \
	    -Wl,-soname,libnccl.so.2 -o $@ $< -L$(B)/fakes -Wl,-rpath,'$$ORIGIN' -lcudart -lpthread
	ln -sf libnccl.so $(B)/fakes/libnccl.so.2
