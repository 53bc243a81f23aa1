/*
 * graphs.c - DESIGN: two small tables (graph -> FLOPs, executable graph ->
 * FLOPs) behind one mutex: captures, instantiations and destructions are
 * rare, and graph launches never look here (the flush thread does, when it
 * writes a window).  The capture accumulator is per thread.  While any
 * thread captures, the TP_HOT_CAPTURE bit of tp_hot sends library calls
 * through their slow path even outside windows, so that their FLOPs are
 * known; that costs only during captures.  An executable graph's entry
 * outlives cudaGraphExecDestroy: the window holding its launches is written
 * later, on the flush thread, often after the program destroyed it.  Tables
 * are bounded: when full, the oldest entries are reused (a graph whose entry
 * was reused loses its FLOPs, which the summary then undercounts; nothing
 * breaks).  A new executable at a freed address replaces the old entry.
 */
#include "graphs.h"
#include "apis.h"
#include "collector/contract/record.h"

#include <errno.h>
#include <pthread.h>

#define TP_GRAPHS_MAX 4096

__thread int tp_capture_depth __attribute__((tls_model("initial-exec")));
static __thread uint64_t tp_capture_flops;

struct tp_gentry {
    uint64_t key;
    uint64_t flops;
};

static pthread_mutex_t tp_glock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_gentry tp_graph_tab[TP_GRAPHS_MAX], tp_exec_tab[TP_GRAPHS_MAX];
static unsigned tp_graph_next, tp_exec_next;

static struct tp_gentry *tp_gfind(struct tp_gentry *tab, uint64_t key)
{
    for (unsigned i = 0; key && i < TP_GRAPHS_MAX; i++)
        if (tab[i].key == key)
            return &tab[i];
    return NULL;
}

static void tp_gput(struct tp_gentry *tab, unsigned *next, uint64_t key, uint64_t flops)
{
    struct tp_gentry *e = tp_gfind(tab, key);
    if (!e)
        e = &tab[(*next)++ % TP_GRAPHS_MAX];
    e->key = key;
    e->flops = flops;
}

void tp_graphs_captured(struct tp_record *r)
{
    int form = tp_api_form(r->api);
    if (r->kind != TP_REC_API || !tp_form_counts_flops(form))
        return;
    tp_capture_flops += r->u.lib.flops;
    r->u.lib.flags |= TP_LIB_CAPTURED;
}

void tp_graphs_begin(void)
{
    int saved = errno;
    if (tp_capture_depth++ == 0)
        tp_capture_flops = 0;
    errno = saved;
}

int tp_graphs_end(const void *graph)
{
    int saved = errno;
    int ended = tp_capture_depth > 0;
    if (ended && --tp_capture_depth == 0 && graph) {
        pthread_mutex_lock(&tp_glock);
        tp_gput(tp_graph_tab, &tp_graph_next, (uint64_t)(uintptr_t)graph, tp_capture_flops);
        pthread_mutex_unlock(&tp_glock);
    }
    errno = saved;
    return ended;
}

void tp_graphs_instantiate(const void *exec, const void *graph)
{
    int saved = errno;
    pthread_mutex_lock(&tp_glock);
    struct tp_gentry *g = tp_gfind(tp_graph_tab, (uint64_t)(uintptr_t)graph);
    tp_gput(tp_exec_tab, &tp_exec_next, (uint64_t)(uintptr_t)exec, g ? g->flops : 0);
    pthread_mutex_unlock(&tp_glock);
    errno = saved;
}

uint64_t tp_graphs_exec_flops(uint64_t exec)
{
    pthread_mutex_lock(&tp_glock);
    struct tp_gentry *e = tp_gfind(tp_exec_tab, exec);
    uint64_t f = e ? e->flops : 0;
    pthread_mutex_unlock(&tp_glock);
    return f;
}
