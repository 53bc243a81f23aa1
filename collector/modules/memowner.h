/*
 * memowner.h - who owns the memory of a ledger call site (memtrack.h): the
 * names the flush thread gives a call site, cached per site.
 */
#ifndef TRAINPROF_COLLECTOR_MEMOWNER_H
#define TRAINPROF_COLLECTOR_MEMOWNER_H

#include <stdint.h>

#include "memtrack.h"

/* The owner name of memory whose owner cannot be told (no return address,
 * an address in no loaded object). */
#define TP_MEMOWN_UNKNOWN "unknown"

/* What a call site is called. */
struct tp_memown {
    const char *owner;      /* "NCCL", "cuBLAS", "PyTorch caching allocator", the
                               program's name, a library's file name, or
                               TP_MEMOWN_UNKNOWN */
    const char *site;       /* "ncclCommInitRank > fake_init+0x1c (libnccl.so.2)",
                               "main+0x4f (mem_owners)", or "" */
    const char *object;     /* the file of the caller ("libc10_cuda.so"), "" if none */
    int named;              /* the owner is not TP_MEMOWN_UNKNOWN */
};

/*
 * tp_memown_of - the names of call site "o", the ledger's origin number
 * "index" (names are cached by it: an origin never changes).  The strings
 * live until tp_memown_reset.  Flush thread only (dladdr, the symbol
 * tables); never NULL.
 */
const struct tp_memown *tp_memown_of(const struct tp_mem_origin_info *o, uint32_t index);

/*
 * tp_memown_name - the owner rule alone: "outer" (an enum tp_api_id or
 * TP_OUTER_* id, 0 if none) names a library; else the file "object" that
 * holds the caller ("" or NULL unknown; "is_program": it is the program).
 * "program" is the program's name.  A static string or "object"'s basename
 * (in "buf").
 */
const char *tp_memown_name(unsigned outer, const char *object, int is_program, const char *program,
                           char *buf, size_t bufsz);

/* tp_memown_reset - forget the cache (tests). */
void tp_memown_reset(void);

#endif
