# dnn_calls: the fake executing cuDNN first (RNNs, normalization, pooling,
# CTC, spatial transformers, algorithm searches, cudnnCreate and dropout
# state setup), then the real cuDNN of the toolkit for every descriptor
# function (no GPU needed for those).
PROG_LIBS_dnn_calls := -lcudnn_exec -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn
$(B)/programs/dnn_calls: tests/programs/dnn_calls.mk
