# backend_calls: the fake executing cuDNN (cudnnBackendExecute) first, then
# the real cuDNN of the toolkit for every backend descriptor function.
PROG_LIBS_backend_calls := -lcudnn_exec -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn
$(B)/programs/backend_calls: tests/programs/backend_calls.mk
