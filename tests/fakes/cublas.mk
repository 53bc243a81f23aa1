# Fake cuBLAS: the real soname, so programs linked against it look like
# programs linked against CUDA's libcublas.so.13.
FAKE_SONAME_cublas := libcublas.so.13
