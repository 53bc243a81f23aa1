/*
 * stack.h - host call stacks at intercepted calls (TRAINPROF_WITH_STACK).
 *
 * The hot path captures raw return addresses with libunwind (loaded with
 * dlopen only when stacks are wanted) and writes them as TP_REC_STACK records
 * just before the call's own record on the same thread; the flush thread
 * gathers them again and turns them into function names, cached per address
 * and per stack (heaptrack's split: raw IPs now, symbols later).
 */
#ifndef TRAINPROF_COLLECTOR_STACK_H
#define TRAINPROF_COLLECTOR_STACK_H

#include <stdint.h>

#include "collector/contract/record.h"

#define TP_STACK_MAX       128     /* TRAINPROF_STACK_DEPTH's upper bound */
#define TP_STACK_PER_REC   7       /* IPs in one TP_REC_STACK record (t0, t1, u) */
#define TP_STACK_FIRST     0x8000u /* rec.api: the first record of a stack */
#define TP_STACK_COUNT(a)  ((a) & 0xffu)

/* tp_stack_init - load libunwind and set per-thread caching.  Returns 0, or
 * -1 after one warning line (stacks then stay off).  Activation only. */
int tp_stack_init(void);

/* tp_stack_on - 1 after a successful tp_stack_init(). */
int tp_stack_on(void);

/*
 * tp_stack_capture - the return addresses of the current thread's stack,
 * innermost first, without the frames inside libtrainprof (so the first is
 * the caller of the intercepted function), at most "max" of them, into "ips".
 * Returns the count (0 if libunwind is not loaded).
 */
int tp_stack_capture(uint64_t *ips, int max);

/*
 * tp_stack_record - hot path, called by tp_call_end before it reserves the
 * call's record: captures the stack (depth TRAINPROF_STACK_DEPTH) and writes
 * it as TP_REC_STACK records of generation "gen", tagged with the low 32
 * bits of the call's start tick "t0" (so the reader never attaches a stack
 * to the wrong record when the call's own record was dropped).
 */
void tp_stack_record(uint8_t gen, uint64_t t0);

/* Reader side: a thread's stack being gathered from its STACK records. */
struct tp_stack_scratch {
    const void *owner;             /* the tbuf the IPs came from */
    uint32_t tag;                  /* low bits of the call's t0 */
    int n;
    uint64_t ips[TP_STACK_MAX];
};

/* tp_stack_gather - add STACK record "r" of thread buffer "owner" to "s". */
void tp_stack_gather(struct tp_stack_scratch *s, const void *owner, const struct tp_record *r);

/*
 * tp_stack_take - for the non-STACK record "r" of "owner": the symbolised
 * frames gathered for it (root first; see tp_stack_resolve) and their count
 * in "*n", or NULL with *n = 0.  Empties "s" either way.
 */
const char *const *tp_stack_take(struct tp_stack_scratch *s, const void *owner,
                                 const struct tp_record *r, int *n);

/*
 * tp_stack_resolve - frames of the stack "ips" (n return addresses,
 * innermost first) as function names, root (outermost) first.  The array
 * and its strings live until tp_stack_reset(); identical stacks give the
 * same array.  NULL if memory ran out.  Flush thread only.
 */
const char *const *tp_stack_resolve(const uint64_t *ips, int n);

/*
 * tp_stack_symbol - the name of the function containing return address
 * "ip" (looked up at ip - 1): the demangled dladdr symbol, else
 * "module+0xoffset" (the function's start once tp_stack_init() loaded
 * libunwind, else ip - 1), else "0x..."; ';' and line breaks replaced, so the name
 * is one folded-stack frame.  Cached per address; NULL if memory ran out.
 */
const char *tp_stack_symbol(uint64_t ip);

/* Correlation id -> frames of the host call, so that the device events a
 * call caused carry its stack (flush thread, one map per window). */
struct tp_stack_corr;

/* tp_stack_corr_put - map "corr" (not 0) to "frames" ("n" of them) in
 * "*m", created on first use; the last put for an id wins.  Silently skips
 * when memory runs out. */
void tp_stack_corr_put(struct tp_stack_corr **m, uint64_t corr, const char *const *frames, int n);

/* tp_stack_corr_get - the frames mapped to "corr" and their count in "*n",
 * or NULL with *n = 0. */
const char *const *tp_stack_corr_get(const struct tp_stack_corr *m, uint64_t corr, int *n);

void tp_stack_corr_free(struct tp_stack_corr *m);

/* tp_stack_sanitize - replace ';' by ':' and control characters by ' ' in "s". */
void tp_stack_sanitize(char *s);

/* tp_stack_cache_stats - lookups and misses of tp_stack_symbol (tests). */
void tp_stack_cache_stats(uint64_t *lookups, uint64_t *misses);

/* tp_stack_reset - forget every cached symbol and stack (tests). */
void tp_stack_reset(void);

#endif
