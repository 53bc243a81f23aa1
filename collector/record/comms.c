/*
 * comms.c - DESIGN: communicators are few (a handful per job) and are made
 * outside any recording path, by creation wrappers that may race on several
 * threads (ncclCommInitAll, one thread per GPU).  An atomic counter hands
 * out serial numbers; the first TP_COMMS_LISTED are stored in a fixed array
 * whose slots are published with a release store of their "ready" flag.
 * Size and rank are atomics of their own: a communicator still
 * initialising (non-blocking) gets them later, from its first collective.  Nothing is ever
 * removed: a destroyed communicator stays a process group of the run, as
 * torch keeps listing a destroyed group's name in earlier traces.
 */
#include "comms.h"

#include <stdatomic.h>
#include <stdio.h>

static struct {
    _Atomic uint32_t size;
    _Atomic int32_t rank;
    atomic_int ready;
} tp_comms[TP_COMMS_LISTED];

static atomic_uint tp_comms_n;
static atomic_int tp_nccl_version;

uint32_t tp_comms_add(int size, int rank)
{
    uint32_t serial = atomic_fetch_add_explicit(&tp_comms_n, 1, memory_order_relaxed);
    if (serial < TP_COMMS_LISTED) {
        tp_comms_update(serial, size, rank);
        atomic_store_explicit(&tp_comms[serial].ready, 1, memory_order_release);
    }
    return serial;
}

void tp_comms_update(uint32_t serial, int size, int rank)
{
    if (serial >= TP_COMMS_LISTED)
        return;
    atomic_store_explicit(&tp_comms[serial].size, size > 0 ? (uint32_t)size : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&tp_comms[serial].rank, rank, memory_order_relaxed);
}

void tp_comms_set_version(int code)
{
    if (code > 0)
        atomic_store_explicit(&tp_nccl_version, code, memory_order_relaxed);
}

const char *tp_comms_version(char *buf, size_t n)
{
    int code = atomic_load_explicit(&tp_nccl_version, memory_order_relaxed);
    if (code <= 0 || !n)
        return NULL;
    /* nccl.h: NCCL_VERSION(X,Y,Z) is X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before */
    int major, minor, patch;
    if (code >= 20900) {
        major = code / 10000;
        minor = code / 100 % 100;
    } else {
        major = code / 1000;
        minor = code / 100 % 10;
    }
    patch = code % 100;
    snprintf(buf, n, "%d.%d.%d", major, minor, patch);
    return buf;
}

size_t tp_comms_list(struct tp_comm_info *out, size_t max, uint32_t *total)
{
    uint32_t n = atomic_load_explicit(&tp_comms_n, memory_order_relaxed);
    if (total)
        *total = n;
    size_t k = 0;
    for (uint32_t i = 0; i < n && i < TP_COMMS_LISTED && k < max; i++)
        if (atomic_load_explicit(&tp_comms[i].ready, memory_order_acquire))
            out[k++] = (struct tp_comm_info){
                .serial = i,
                .size = atomic_load_explicit(&tp_comms[i].size, memory_order_relaxed),
                .rank = atomic_load_explicit(&tp_comms[i].rank, memory_order_relaxed),
            };
    return k;
}
