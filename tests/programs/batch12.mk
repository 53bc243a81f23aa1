# batch12: the CUDA 12.8 batch copies (fake libcudart.so.12) before the fake
# CUDA 13 runtime, which gives it everything else.
PROG_LIBS_batch12 := -lcudart12
