/*
 * comms.h - the NCCL communicators of this process as their creation
 * wrappers saw them: the process groups of Kineto's distributedInfo
 * (pg_count, pg_config) and the "Process Group Name" of each collective,
 * which is the communicator's creation order in this process ("0", "1",
 * ..., as torch numbers its process groups), and NCCL's version.
 */
#ifndef TRAINPROF_COLLECTOR_COMMS_H
#define TRAINPROF_COLLECTOR_COMMS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/contract/sink.h"


/* tp_comms_add - a communicator was created (or first seen) with "size"
 * ranks, this process being "rank": its serial number.  Lock-free; called
 * by the NCCL creation wrappers, never on a recording path. */
uint32_t tp_comms_add(int size, int rank);

/* tp_comms_update - size and rank of communicator "serial", learnt after
 * its creation (a non-blocking one). */
void tp_comms_update(uint32_t serial, int size, int rank);

/* tp_comms_set_version - NCCL's version code (ncclGetVersion: 22809 for
 * 2.28.9; codes below 2900 are the old X*1000+Y*100+Z form). */
void tp_comms_set_version(int code);

/* tp_comms_version - NCCL's version as torch writes it ("2.28.9") into
 * "buf"; NULL if unknown. */
const char *tp_comms_version(char *buf, size_t n);

/* tp_comms_list - up to "max" communicators in creation order into "out";
 * returns how many were written, "*total" how many were created. */
size_t tp_comms_list(struct tp_comm_info *out, size_t max, uint32_t *total);

#endif
