/*
 * oplink.h - torch's operators linked to the calls made inside them (one
 * window, flush thread): the innermost operator range around a call gives
 * the call its "External id", and through the call's correlation, the
 * device work it launched.
 */
#ifndef TRAINPROF_COLLECTOR_OPLINK_H
#define TRAINPROF_COLLECTOR_OPLINK_H

#include <stdint.h>

struct tp_oplink;

/* tp_oplink_new - peek at window "gen"'s records for torch's operator
 * ranges (there may be none); NULL if memory ran out. */
struct tp_oplink *tp_oplink_new(uint8_t gen);

/* tp_oplink_find - the op_id of the innermost operator on thread "tid"
 * that was open at tick "t", 0 if none. */
uint64_t tp_oplink_find(const struct tp_oplink *l, int32_t tid, uint64_t t);

/* tp_oplink_note - host call "corr" was linked to operator "ext": the
 * device work of that correlation belongs to the operator too. */
void tp_oplink_note(struct tp_oplink *l, uint64_t corr, uint64_t ext);

/* tp_oplink_corr - the operator noted for correlation "corr", 0 if none
 * (once the host side is done: the notes are sorted at the first call). */
uint64_t tp_oplink_corr(struct tp_oplink *l, uint64_t corr);

void tp_oplink_free(struct tp_oplink *l);

#endif
