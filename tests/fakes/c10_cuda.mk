# tests/fakes/c10_cuda.mk - the fake PyTorch caching allocator
# (tests/fakes/c10/c10_cuda.c): build/fakes/c10/libc10_cuda.so, the file name
# of torch's library, in a folder of its own so that programs and tests that
# search build/fakes never load it unasked.  Linked against the fake
# runtime (found through $ORIGIN/..), whose cudaMalloc/cudaFree it imports
# with the runtime's symbol versions, as torch/lib/libc10_cuda.so does.
$(B)/fakes/c10/libc10_cuda.so: tests/fakes/c10/c10_cuda.c tests/fakes/c10_cuda.mk $(B)/fakes/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fPIC -shared -O1 -g $(TP_WARN) -isystem $(CUDA_HOME)/include \
	    -Wl,-soname,libc10_cuda.so -o $@ $< -L$(B)/fakes -Wl,-rpath,'$$ORIGIN/..' -lcudart -lpthread

fakes: $(B)/fakes/c10/libc10_cuda.so
