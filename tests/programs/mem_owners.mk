# mem_owners: the fake NCCL and the fake cuBLAS (which imports cublasLtMatmul
# from the fake cuBLASLt executing half); the fake PyTorch caching allocator
# (build/fakes/c10/libc10_cuda.so) is dlopened at run time, built first.
PROG_LIBS_mem_owners := -lnccl -lcublas -lcublaslt_exec
$(B)/programs/mem_owners: tests/programs/mem_owners.mk $(B)/fakes/c10/libc10_cuda.so
