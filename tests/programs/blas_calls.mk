# blas_calls: the fake cuBLAS, and the fake cuBLASLt executing half that
# provides the cublasLtMatmul the fake cuBLAS imports (as the real one does).
PROG_LIBS_blas_calls := -lcublas -lcublaslt_exec
