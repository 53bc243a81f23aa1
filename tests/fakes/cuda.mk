# tests/fakes/cuda.mk - the fake CUDA driver: build/fakes/libcuda.so with the
# real soname libcuda.so.1 (and that symlink), found by test programs that
# dlopen("libcuda.so.1") through their rpath.  No version script: the real
# driver's symbols are unversioned.
FAKE_SONAME_cuda := libcuda.so.1
