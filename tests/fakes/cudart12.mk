# tests/fakes/cudart12.mk - the CUDA 12.8 ABI of the batch copies:
# build/fakes/libcudart12.so with soname libcudart.so.12 (and that symlink).
FAKE_SONAME_cudart12 := libcudart.so.12
