/*
 * call.c - DESIGN: the definitions of the call protocol's shared state
 * (call.h): the hot word every wrapper reads first, its composition from
 * the parts the steps, the device module and activation own, and the
 * per-thread guards that make the profiler's own threads and nested calls
 * pass through.  Nothing else lives here, so that any collector module can
 * set the guard or a part of the hot word without depending on the core.
 */
#include "call.h"

#include <pthread.h>

_Atomic uint32_t tp_hot = TP_HOT_INACTIVE;
__thread int tp_depth __attribute__((tls_model("initial-exec")));
__thread int tp_lib_depth __attribute__((tls_model("initial-exec")));
__thread uint16_t tp_lib_outer __attribute__((tls_model("initial-exec")));
__thread uint64_t tp_mem_site __attribute__((tls_model("initial-exec")));

/* the parts of the hot word, under tp_hot_lock */
static pthread_mutex_t tp_hot_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t tp_hot_flags = TP_HOT_INACTIVE;
static uint8_t tp_hot_gen;
static int tp_hot_captures, tp_hot_ext, tp_hot_stacks;
static _Atomic int tp_hot_dead;
static _Atomic int tp_cuda_done;

/* Store the word the parts make; lock held. */
static void tp_hot_compose(void)
{
    if (atomic_load(&tp_hot_dead))
        return;
    uint32_t flags = tp_hot_flags;
    if (tp_hot_captures)
        flags |= TP_HOT_CAPTURE;
    if ((flags & TP_HOT_RECORDING) && tp_hot_ext)
        flags |= TP_HOT_EXTCORR;
    if ((flags & TP_HOT_RECORDING) && tp_hot_stacks)
        flags |= TP_HOT_STACK;
    /* the generation only with a flag: between windows the word is 0, the
     * pass-through test of every wrapper and entry stub (nothing stamps a
     * record then) */
    atomic_store_explicit(&tp_hot, flags ? flags | (uint32_t)tp_hot_gen << 8 : 0, memory_order_release);
}

void tp_hot_mode(uint32_t flags, uint8_t gen)
{
    pthread_mutex_lock(&tp_hot_lock);
    tp_hot_flags = flags & (TP_HOT_FLAGS & ~(TP_HOT_CAPTURE | TP_HOT_EXTCORR | TP_HOT_STACK));
    tp_hot_gen = gen;
    tp_hot_compose();
    pthread_mutex_unlock(&tp_hot_lock);
}

void tp_hot_capture(int open)
{
    pthread_mutex_lock(&tp_hot_lock);
    tp_hot_captures = open;
    tp_hot_compose();
    pthread_mutex_unlock(&tp_hot_lock);
}

void tp_hot_extcorr(int on)
{
    pthread_mutex_lock(&tp_hot_lock);
    tp_hot_ext = on;
    if (tp_hot_flags & ~TP_HOT_INACTIVE)
        tp_hot_compose();
    pthread_mutex_unlock(&tp_hot_lock);
}

void tp_hot_stack(int on)
{
    pthread_mutex_lock(&tp_hot_lock);
    tp_hot_stacks = on;
    pthread_mutex_unlock(&tp_hot_lock);
}

uint32_t tp_hot_off(void)
{
    atomic_store(&tp_hot_dead, 1);
    return atomic_exchange(&tp_hot, 0);
}

int tp_hot_is_off(void)
{
    return atomic_load(&tp_hot_dead);
}

void tp_cuda_succeeded(void)
{
    atomic_store_explicit(&tp_cuda_done, 1, memory_order_relaxed);
}

int tp_cuda_ok(void)
{
    return atomic_load_explicit(&tp_cuda_done, memory_order_relaxed);
}
