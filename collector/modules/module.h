/*
 * module.h - the interface between the core and the modules it drives
 * (collector/modules/modules.def).
 *
 * DESIGN
 * The core (activation, steps, the flush thread) calls every module
 * through one table instead of by name: a module is one line in
 * modules.def and one struct of hooks in its own file.  Any hook may be
 * NULL.  The hooks say when they run and on which thread; none may block
 * the training thread beyond its own bookkeeping.
 */
#ifndef TRAINPROF_COLLECTOR_MODULE_H
#define TRAINPROF_COLLECTOR_MODULE_H

#include <stdint.h>

struct tp_config;

/* What the schedule wants of the modules that run beside it (tp-flush). */
struct tp_follow {
    int on;         /* the current step warms up or records */
    int queued;     /* windows wait to be written */
    int final;      /* no window will open again and no capture is open */
};

struct tp_module {
    const char *name;
    /* At activation, on the thread that activates, before the first step. */
    void (*init)(const struct tp_config *cfg);
    /* A window opens or closes at tick "now" (the step lock held). */
    void (*window_begin)(uint8_t gen, uint64_t now);
    void (*window_end)(uint8_t gen, uint64_t now);
    /* The schedule has finished: no window will open again (step lock held). */
    void (*schedule_end)(void);
    /* On tp-flush, whenever it wakes and the process is not exiting. */
    void (*follow)(const struct tp_follow *f);
    /* In a forked child, which goes passive: lock-free. */
    void (*atfork_child)(void);
    /* At exit, after the last window was written. */
    void (*shutdown)(void);
};

#define TP_MODULE(n) extern const struct tp_module tp_module_##n;
#include "modules.def"
#undef TP_MODULE

/* Run one hook of every module, in table order (those that have it). */
void tp_modules_init(const struct tp_config *cfg);
void tp_modules_window_begin(uint8_t gen, uint64_t now);
void tp_modules_window_end(uint8_t gen, uint64_t now);
void tp_modules_schedule_end(void);
void tp_modules_follow(const struct tp_follow *f);
void tp_modules_atfork_child(void);
void tp_modules_shutdown(void);

#endif
