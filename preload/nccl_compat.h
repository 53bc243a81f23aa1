/*
 * nccl_compat.h - DESIGN: the NCCL entry points we wrap that the nccl.h the
 * build compiles against (CUDA 13.0's, NCCL 2.28.9) does not declare, as
 * NCCL 2.30.7's headers declare them (the torch wheel's nvidia-nccl:
 * nccl.h, and nccl_device/core.h for the device-communicator pair).
 *
 * Each block is compiled only where nccl.h lacks it, so a newer nccl.h takes
 * over by itself.  With TP_NCCL_COMPAT_CHECK the prototypes are declared
 * next to a newer nccl.h as well, where one that differs from NVIDIA's is a
 * compile error: tests/preload/test_nccl.py compiles that check against the
 * wheel's headers.  nccl_device/core.h is written for C++ (inline device
 * helpers) and is never included; its two host functions take pointers to
 * its structs, named here by their tags (ncclDevComm_t and
 * ncclDevCommRequirements_t are typedefs of them).  Shared by preload/nccl.c,
 * the fake NCCL and the test program that calls them.
 */
#ifndef TRAINPROF_PRELOAD_NCCL_COMPAT_H
#define TRAINPROF_PRELOAD_NCCL_COMPAT_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

/* NCCL 2.29: one-sided calls on registered windows; growing a communicator. */
#if NCCL_VERSION_CODE < 22900
typedef struct {
    int opCnt;   /* signal operations to wait for */
    int peer;    /* from this rank */
    int sigIdx;
    int ctx;
} ncclWaitSignalDesc_t;
#endif
_Static_assert(offsetof(ncclWaitSignalDesc_t, peer) == sizeof(int) &&
               sizeof(ncclWaitSignalDesc_t) == 4 * sizeof(int), "nccl.h's ncclWaitSignalDesc_t");

#if NCCL_VERSION_CODE < 22900 || defined(TP_NCCL_COMPAT_CHECK)
ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
#endif

/* NCCL 2.29.7: releasing and restoring a communicator's dynamic GPU memory. */
#ifndef NCCL_SUSPEND_MEM
#define NCCL_SUSPEND_MEM 0x01
#endif
#if NCCL_VERSION_CODE < 22907 || defined(TP_NCCL_COMPAT_CHECK)
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
#endif

/* nccl_device/core.h (NCCL 2.28 and later) */
struct ncclDevComm;
struct ncclDevCommRequirements;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs,
                               struct ncclDevComm *outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *devComm);

#endif
