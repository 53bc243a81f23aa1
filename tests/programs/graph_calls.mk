# graph_calls: the fake cuBLAS (GEMMs to capture) on the fake runtime.
PROG_LIBS_graph_calls := -lcublas -lcublaslt_exec $(CUDA_HOME)/lib64/libcublasLt.so.13 \
    -Wl,-rpath,$(CUDA_HOME)/lib64
