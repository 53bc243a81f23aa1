# tests/fakes/cudnn_exec.mk - the fake executing half of cuDNN
# (build/fakes/libcudnn_exec.so, soname libcudnn_exec.so, built by the
# Makefile's rule for fakes).  Programs link it before the real
# $(CUDA_HOME)/lib64/libcudnn.so.9, whose descriptor functions they use:
# see tests/programs/conv_calls.mk.
