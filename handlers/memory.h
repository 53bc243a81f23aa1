/*
 * memory.h - helpers of the memory report (memory_points.c) that the
 * summary shares: names of memory classes and human byte sizes, so that
 * both reports print the same figures the same way.
 */
#ifndef TRAINPROF_HANDLERS_MEMORY_H
#define TRAINPROF_HANDLERS_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* tp_memory_class_name - "device", "managed", "host" (enum tp_mem_class). */
const char *tp_memory_class_name(unsigned mclass);

/*
 * tp_memory_where - "GPU0", "GPU0 managed", "host pinned" for a (device,
 * class) pair, into "out" (size n).  Returns out.
 */
const char *tp_memory_where(char *out, size_t n, int device, unsigned mclass);

/*
 * tp_memory_human - "bytes" in binary units with two decimals: "1.50 GiB",
 * "512.00 MiB", "3.00 KiB", "17 B" (the unit is the largest <= the value).
 * Writes into "out" (size n) and returns it.
 */
const char *tp_memory_human(char *out, size_t n, uint64_t bytes);

#endif
