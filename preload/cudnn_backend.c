/*
 * cudnn_backend.c - DESIGN: the hand-written wrappers of the cuDNN backend
 * API's descriptor calls (cudnnBackendCreateDescriptor, DestroyDescriptor,
 * SetAttribute, GetAttribute).  They run always, not only in windows:
 * plans are built before the window that executes them.  After a real
 * call that succeeded they report the descriptor to the tracking in
 * collector/record/flops/cudnn_graph.c, which gives cudnnBackendExecute's record
 * its FLOPs; errno is kept, results are never changed.
 */
#include "wrap.h"
#include "collector/record/flops/cudnn_graph.h"

#include <cudnn.h>
#include <errno.h>

#define TP_MISSING CUDNN_STATUS_NOT_INITIALIZED

typedef cudnnStatus_t (*tp_bcreate_fn)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
typedef cudnnStatus_t (*tp_bdestroy_fn)(cudnnBackendDescriptor_t);
typedef cudnnStatus_t (*tp_bset_fn)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                    cudnnBackendAttributeType_t, int64_t, const void *);
typedef cudnnStatus_t (*tp_bget_fn)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                    cudnnBackendAttributeType_t, int64_t, int64_t *, void *);

TP_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                                     cudnnBackendDescriptor_t *desc)
{
    TP_REAL(tp_bcreate_fn, cudnnBackendCreateDescriptor, TP_MISSING);
    cudnnStatus_t rc = real(type, desc);
    if (rc == CUDNN_STATUS_SUCCESS && desc) {
        int e = errno;
        tp_bd_create(*desc, (int)type);
        errno = e;
    }
    return rc;
}

TP_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t desc)
{
    TP_REAL(tp_bdestroy_fn, cudnnBackendDestroyDescriptor, TP_MISSING);
    cudnnStatus_t rc = real(desc);
    if (rc == CUDNN_STATUS_SUCCESS) {
        int e = errno;
        tp_bd_destroy(desc);
        errno = e;
    }
    return rc;
}

TP_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t desc,
                                                 cudnnBackendAttributeName_t name,
                                                 cudnnBackendAttributeType_t type, int64_t count,
                                                 const void *arr)
{
    TP_REAL(tp_bset_fn, cudnnBackendSetAttribute, TP_MISSING);
    cudnnStatus_t rc = real(desc, name, type, count, arr);
    int ref;
    if (rc == CUDNN_STATUS_SUCCESS && tp_bd_attr((int)name, &ref)) {
        int e = errno;
        tp_bd_set(desc, (int)name, (int)type, count, arr);
        errno = e;
    }
    return rc;
}

TP_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const desc,
                                                 cudnnBackendAttributeName_t name,
                                                 cudnnBackendAttributeType_t type, int64_t req,
                                                 int64_t *count, void *arr)
{
    TP_REAL(tp_bget_fn, cudnnBackendGetAttribute, TP_MISSING);
    cudnnStatus_t rc = real(desc, name, type, req, count, arr);
    if (rc == CUDNN_STATUS_SUCCESS &&
        (name == CUDNN_ATTR_ENGINEHEUR_RESULTS || name == CUDNN_ATTR_ENGINECFG_ENGINE)) {
        int e = errno;
        tp_bd_get(desc, (int)name, (int)type, req, count, arr);
        errno = e;
    }
    return rc;
}
