# conv_calls: the fake executing cuDNN first, then the real cuDNN of the
# toolkit for every descriptor function (no GPU needed for those).
PROG_LIBS_conv_calls := -lcudnn_exec -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn
$(B)/programs/conv_calls: tests/programs/conv_calls.mk
