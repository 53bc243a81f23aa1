# tests/programs/nccl_calls.mk - linked against the fake NCCL (build/fakes/libnccl.so.2).
PROG_LIBS_nccl_calls := -lnccl
