# sdpa_calls: the fake executing cuDNN (cudnnBackendExecute) first, then
# the real cuDNN of the toolkit for every backend descriptor function.
PROG_LIBS_sdpa_calls := -lcudnn_exec -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn
$(B)/programs/sdpa_calls: tests/programs/sdpa_calls.mk
