# gemm_calls: fake cuBLAS, the fake cuBLASLt executing half, then CUDA's real
# libcublasLt.so.13 for the descriptor functions (no GPU needed).
PROG_LIBS_gemm_calls := -lcublas -lcublaslt_exec $(CUDA_HOME)/lib64/libcublasLt.so.13 \
    -Wl,-rpath,$(CUDA_HOME)/lib64
