/*
 * modules.c - DESIGN: the module table, expanded from modules.def, and
 * one loop per hook.  The loops skip NULL hooks, so a module fills in only
 * the moments it cares about.
 */
#include "module.h"

#include <stddef.h>

static const struct tp_module *const tp_modules[] = {
#define TP_MODULE(n) &tp_module_##n,
#include "modules.def"
#undef TP_MODULE
};

#define TP_MODULE_COUNT (sizeof tp_modules / sizeof tp_modules[0])

#define TP_EACH(hook, ...)                                  \
    for (size_t i = 0; i < TP_MODULE_COUNT; i++)            \
        if (tp_modules[i]->hook)                            \
            tp_modules[i]->hook(__VA_ARGS__)

void tp_modules_init(const struct tp_config *cfg) { TP_EACH(init, cfg); }
void tp_modules_window_begin(uint8_t gen, uint64_t now) { TP_EACH(window_begin, gen, now); }
void tp_modules_window_end(uint8_t gen, uint64_t now) { TP_EACH(window_end, gen, now); }
void tp_modules_schedule_end(void) { TP_EACH(schedule_end); }
void tp_modules_follow(const struct tp_follow *f) { TP_EACH(follow, f); }
void tp_modules_atfork_child(void) { TP_EACH(atfork_child); }
void tp_modules_shutdown(void) { TP_EACH(shutdown); }
