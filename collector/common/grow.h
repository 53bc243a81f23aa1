/*
 * grow.h - the one growable-array step: room for "need" elements, the
 * capacity doubled from "first" as often as it takes (amortised O(1)
 * appends).  Header-only, no state.
 *
 *     struct item *v = tp_grow(a->v, &a->cap, a->n + 1, sizeof *v, 64);
 *     if (!v)
 *         return -1;              // a->v and a->cap unchanged
 *     a->v = v;
 *     a->v[a->n++] = item;
 */
#ifndef TRAINPROF_COLLECTOR_GROW_H
#define TRAINPROF_COLLECTOR_GROW_H

#include <stdint.h>
#include <stdlib.h>

/* tp_grow - "v" (capacity *cap elements of "size" bytes) with room for
 * "need": the same block if it has it, else a larger one (realloc).
 * NULL when memory runs out or the size overflows: "v" is then untouched
 * and still owned by the caller, *cap unchanged. */
static inline void *tp_grow(void *v, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return v;
    size_t c = *cap ? *cap : (first ? first : 1);
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (size && c > SIZE_MAX / size)
        return NULL;
    void *p = realloc(v, c * size);
    if (p)
        *cap = c;
    return p;
}

#endif
