/*
 * props.h - device properties for the trace's deviceProperties and for
 * occupancy estimates, asked of the CUDA driver on the flush thread
 * (never the runtime, never from a wrapper).
 */
#ifndef TRAINPROF_COLLECTOR_PROPS_H
#define TRAINPROF_COLLECTOR_PROPS_H

#include <stddef.h>

#include <stdint.h>

#include "collector/contract/device.h"

/*
 * tp_driver_ready - 1 if the process has a working CUDA driver and a
 * context: libcuda is loaded, cuDeviceGetCount succeeds with at least one
 * device (it fails before a successful cuInit, and with no device or
 * CUDA_VISIBLE_DEVICES=""), and some device's primary context is active or
 * "had_context" says a CUDA call already succeeded (a context existed for
 * it).  Only then may CUPTI be loaded: without a driver, CUPTI 13.2's
 * cuptiGetVersion recurses through its own error path until the stack
 * overflows (seen with the PyPI wheels' CUPTI).  Makes only side-effect-free driver queries.
 * When not ready, "why" (if not NULL) gets one sentence saying which of
 * those is missing: no driver, driver not initialized, no device ("vis":
 * the value of CUDA_VISIBLE_DEVICES, NULL if unset, named when it hides
 * every device), a driver error, or no context yet.
 */
int tp_driver_ready(int had_context, const char *vis, char *why, size_t why_size);

/*
 * tp_driver_loaded - 1 if libcuda is in the process (its cuDeviceGetCount
 * is found; nothing is called), else 0 and "why" (size why_size > 0) gets
 * tp_driver_ready's sentence for it.  A symbol lookup only: callable where
 * a driver call might block.
 */
int tp_driver_loaded(char *why, size_t why_size);

/* tp_device_props_get - the devices of the loaded driver, queried once (later
 * calls return the same table); 0 and *out = NULL if libcuda is not loaded
 * in the process (it is never loaded by us) or cuInit has not succeeded. */
int tp_device_props_get(const struct tp_device_prop **out);

/* tp_device_props_occupancy - Kineto's "est. achieved occupancy %" (0..100) for a
 * kernel on device "d", computed with the toolkit's cuda_occupancy.h; -1 if
 * it cannot be computed. */
double tp_device_props_occupancy(const struct tp_device_prop *d, int registers, int static_smem,
                             int dynamic_smem, int block_threads, double blocks_per_sm);

#endif
