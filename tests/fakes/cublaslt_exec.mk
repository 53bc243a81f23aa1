# Fake cuBLASLt executing half (cublasLtMatmul, cublasLtCreate/Destroy only),
# built as libcublaslt_exec.so (the default soname: no FAKE_SONAME, which
# would make the soname link point at itself).  Programs link it BEFORE the
# real $(CUDA_HOME)/lib64/libcublasLt.so.13 (see tests/programs/gemm_calls.mk)
# so that the descriptor functions they and the wrapper call are the real ones.
