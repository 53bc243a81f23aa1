/*
 * oplost.c - DESIGN: when torch's operators stop reaching the library.
 *
 * The library reads torch's operators from the ITT or NVTX ranges of a
 * torch profiler state that the Python hook (scripts/trainprof_cli/pyhook) turns on in
 * the steps that warm up or record.  torch runs one profiler at a time:
 * when the program starts one of its own (torch.profiler, Lightning's
 * profiler, torch.autograd.profiler.profile), the hook turns ours off, so
 * that the program's profiler starts as it would without us, and tells us
 * through trainprof_operators_lost().  The windows that overlap such a
 * span say which of their steps lack operators and why, instead of being
 * silently thinner than the others.
 *
 * A span is appended once and then only its end changes: writers (Python
 * threads, a few times a run) serialise on a mutex; the flush thread reads
 * without it (published by the release store of the count), so a save on
 * a signal never waits on a lock the interrupted thread may hold.  After
 * TP_OPLOST_SPANS spans the last one is reopened instead: the report then
 * covers at least the time lost, with the last span's reason.
 */
#include "oplost.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "collector/common/clock.h"

#define TP_OPLOST_SPANS 32

struct tp_oplost_span {
    _Atomic uint64_t start, end;          /* ticks; end 0: still open */
    char why[TP_OPLOST_WHY];
};

static struct tp_oplost_span tp_spans[TP_OPLOST_SPANS];
static _Atomic unsigned tp_n_spans;
static pthread_mutex_t tp_writer = PTHREAD_MUTEX_INITIALIZER;

static uint64_t tp_oplost_now(void)
{
    uint64_t t = tp_clock_now();
    return t ? t : 1;                     /* 0 means open */
}

void tp_oplost_set(const char *why)
{
    pthread_mutex_lock(&tp_writer);
    unsigned k = atomic_load_explicit(&tp_n_spans, memory_order_relaxed);
    int open = k > 0 && atomic_load(&tp_spans[k - 1].end) == 0;
    if (why && !open) {
        if (k == TP_OPLOST_SPANS) {
            atomic_store(&tp_spans[k - 1].end, 0);
        } else {
            struct tp_oplost_span *s = &tp_spans[k];
            size_t len = strnlen(why, TP_OPLOST_WHY - 1);
            memcpy(s->why, why, len);
            s->why[len] = '\0';
            atomic_store(&s->end, 0);
            atomic_store(&s->start, tp_oplost_now());
            atomic_store_explicit(&tp_n_spans, k + 1, memory_order_release);
        }
    } else if (!why && open) {
        atomic_store(&tp_spans[k - 1].end, tp_oplost_now());
    }
    pthread_mutex_unlock(&tp_writer);
}

int tp_oplost_in(uint64_t start, uint64_t end, uint64_t *from, uint64_t *to, char *why, size_t n)
{
    unsigned k = atomic_load_explicit(&tp_n_spans, memory_order_acquire);
    int found = 0;
    for (unsigned i = 0; i < k; i++) {
        uint64_t s = atomic_load(&tp_spans[i].start);
        uint64_t e = atomic_load(&tp_spans[i].end);
        if (e == 0 || e > end)
            e = end;
        if (s < start)
            s = start;
        if (s >= e)
            continue;
        if (!found) {
            *from = s;
            *to = e;
            if (n) {
                size_t len = strnlen(tp_spans[i].why, n - 1);
                memcpy(why, tp_spans[i].why, len);
                why[len] = '\0';
            }
            found = 1;
        } else {
            if (s < *from)
                *from = s;
            if (e > *to)
                *to = e;
        }
    }
    return found;
}

void tp_oplost_reset(void)
{
    atomic_store(&tp_n_spans, 0);
}
