# ddp_loop: the fake NCCL (its ncclAllReduce launches a kernel) and the fake
# cuBLAS (cublasSgemm_v2 launches a kernel); the fake cuBLAS imports
# cublasLtMatmul, which the fake cuBLASLt executing half defines.
PROG_LIBS_ddp_loop := -lnccl -lcublas -lcublaslt_exec
$(B)/programs/ddp_loop: tests/programs/ddp_loop.mk
