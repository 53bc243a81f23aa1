/*
 * fuzz_grammar.c - libFuzzer harness: the small languages of the
 * configuration (collector/config/config_grammar.c): TRAINPROF_SCHEDULE,
 * TRAINPROF_STEP_ON, TRAINPROF_HANDLERS and TRAINPROF_RANKS, and the
 * schedule they feed (collector/config/schedule.c).
 *
 * DESIGN
 * The first byte picks the variable (and, for RANKS, the process's RANK),
 * the rest is its value, parsed by tp_config_parse() as the library does.
 * A value that is accepted must print (tp_config_json, the printer the
 * dump and the trace's metadata use) to a text that is accepted again and
 * gives the same parsed result: a round trip, so that what the trace says
 * was configured is what ran.  Values that are not valid UTF-8 are left
 * out of the round trip: tp_config_json prints their high bytes as '?'
 * (config.c, json_string_lossy), by design.  An accepted schedule is then asked for the
 * action of steps 0..63, some steps near 2^64, and whether it is finished:
 * no division by zero or overflow trap (UBSan) for any accepted schedule.
 */
#include "collector/config/config.h"
#include "collector/config/schedule.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = { "TRAINPROF_SCHEDULE", "TRAINPROF_STEP_ON",
                                     "TRAINPROF_HANDLERS", "TRAINPROF_RANKS" };
static const char *var_name, *var_value;
static char rank[8];

static const char *fake_get(const char *name)
{
    if (strcmp(name, "RANK") == 0)
        return rank;
    return strcmp(name, var_name) == 0 ? var_value : NULL;
}

static int parse(struct tp_config *c, const char *value)
{
    var_value = value;
    const char *none[] = { NULL };
    return tp_config_parse(c, fake_get, none);
}

static char *shown(const struct tp_config *c)
{
    char *js = tp_config_json(c);
    json_t *o = js ? json_loads(js, 0, NULL) : NULL;
    const char *v = json_string_value(json_object_get(o, var_name));
    if (!v)
        abort();
    char *copy = strdup(v);
    json_decref(o);
    free(js);
    return copy;
}

static void same(const struct tp_config *a, const struct tp_config *b, const char *text)
{
    int ok = 1;
    const struct tp_schedule *s = &a->schedule, *t = &b->schedule;
#define SAME_KEY(key, def, min) ok &= s->key == t->key;
    TP_SCHEDULE_KEYS(SAME_KEY)
#undef SAME_KEY
    ok &= s->all == t->all;
    ok &= a->n_signals == b->n_signals;
    for (int i = 0; ok && i < a->n_signals; i++)
        ok &= a->signals[i].kind == b->signals[i].kind && a->signals[i].every == b->signals[i].every &&
              strcmp(a->signals[i].pattern, b->signals[i].pattern) == 0;
    ok &= a->n_handlers == b->n_handlers;
    for (int i = 0; ok && i < a->n_handlers; i++)
        ok &= strcmp(a->handlers[i], b->handlers[i]) == 0;
    ok &= a->rank_selected == b->rank_selected;
    if (!ok) {
        fprintf(stderr, "%s: \"%s\" printed as \"%s\" parses differently\n", var_name, var_value, text);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    var_name = names[data[0] % 4];
    snprintf(rank, sizeof rank, "%d", data[0] / 4);
    char *value = strndup((const char *)data + 1, size - 1);
    if (!value)
        abort();
    static struct tp_config a, b;
    json_t *utf8 = json_string(value);   /* NULL: not valid UTF-8 */
    if (parse(&a, value) == 0 && utf8) {
        char *text = shown(&a);
        if (parse(&b, text) != 0) {
            fprintf(stderr, "%s: \"%s\" printed as \"%s\" is rejected: %s\n", var_name, value, text,
                    b.messages[0]);
            abort();
        }
        same(&a, &b, text);
        free(text);
        tp_config_free(&b);
        volatile int sink = 0;
        for (uint64_t step = 0; step < 64; step++)
            sink += (int)tp_schedule_action(&a.schedule, step) + tp_schedule_finished(&a.schedule, step);
        for (uint64_t step = UINT64_MAX - 4; step > 4; step++)
            sink += (int)tp_schedule_action(&a.schedule, step) + tp_schedule_finished(&a.schedule, step);
        (void)sink;
    }
    json_decref(utf8);
    tp_config_free(&a);
    free(value);
    return 0;
}
