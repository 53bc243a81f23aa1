/*
 * oplink.h - torch's operators linked to the calls made inside them (one
 * window, flush thread): the innermost operator range around a call gives
 * the call its "External id", and through the call's correlation, the
 * device work it launched.
 */
#ifndef TRAINPROF_COLLECTOR_OPLINK_H
#define TRAINPROF_COLLECTOR_OPLINK_H

#include <stddef.h>
#include <stdint.h>

#include "collector/contract/sink.h"

struct tp_oplink;

struct tp_tbuf;
struct tp_record;

/* tp_oplink_new - an empty link, NULL if memory ran out. */
struct tp_oplink *tp_oplink_new(void);

/* tp_oplink_add - peek at record "r" of thread "t" (a window's records, in
 * the order tp_buf_drain gives them): keeps it if it is one of torch's
 * operator ranges (there may be none). */
void tp_oplink_add(struct tp_oplink *l, const struct tp_tbuf *t, const struct tp_record *r);

/* tp_oplink_finish - after the last tp_oplink_add: the operators as a
 * tree, and their autograd links (NULL "l": nothing). */
void tp_oplink_finish(struct tp_oplink *l);

/* tp_oplink_find - the op_id of the innermost operator on thread "tid"
 * that was open at tick "t", 0 if none. */
uint64_t tp_oplink_find(const struct tp_oplink *l, int32_t tid, uint64_t t);

/* tp_oplink_note - host call "corr" was linked to operator "ext": the
 * device work of that correlation belongs to the operator too. */
void tp_oplink_note(struct tp_oplink *l, uint64_t corr, uint64_t ext);

/* tp_oplink_corr - the operator noted for correlation "corr", 0 if none
 * (once the host side is done: the notes are sorted at the first call). */
uint64_t tp_oplink_corr(struct tp_oplink *l, uint64_t corr);


/* tp_oplink_autograd_of - fill *a for operator "op_id"; the caller sets
 * a->seq to the operator's own number first, which stays unless it is a
 * wrapper; the rest is zero if nothing links it. */
void tp_oplink_autograd_of(const struct tp_oplink *l, uint64_t op_id, struct tp_op_autograd *a);

void tp_oplink_free(struct tp_oplink *l);

#endif
