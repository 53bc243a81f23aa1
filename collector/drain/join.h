/*
 * join.h - the device side of one window, joined to its host side on the
 * flush thread.
 *
 * A host call and CUPTI's API record of it run on the same thread, CUPTI's
 * inside ours, on the same clock (ours is CUPTI's timestamp callback): the
 * host record takes the correlation id of the earliest unclaimed CUPTI record
 * within its interval, preferring one that has device work; failing that,
 * a driver call made by a runtime we did not see takes the runtime call's
 * record around it (CUPTI gives the pair one record).  Records of other
 * threads of ours are never taken.  Library calls
 * get ids of their own ("External id"), which the work they issued inherits
 * through CUPTI's external correlation records (the id pushed is the call's
 * start tick).
 */
#ifndef TRAINPROF_COLLECTOR_JOIN_H
#define TRAINPROF_COLLECTOR_JOIN_H

#include "collector/record/buffer.h"
#include "collector/common/clock.h"
#include "collector/device/cupti.h"
#include "collector/contract/sink.h"

struct tp_join;

/* tp_join_new - a join over "dev" (kept, not copied); own ids (records
 * CUPTI did not see, library calls) are taken from "*next_own". */
struct tp_join *tp_join_new(const struct tp_device_batch *dev, uint64_t *next_own);

/* tp_join_host - peek at host record "r" of thread "t": stores the
 * joined correlation (or a library call's own id) in the record itself. */
void tp_join_host(struct tp_join *j, const struct tp_tbuf *t, struct tp_record *r);

/* tp_join_finish - after every host record: coverage and device counts
 * into "w". */
void tp_join_finish(struct tp_join *j, struct tp_window *w);

/* tp_join_event - fill the device-side fields of host event "ev". */
void tp_join_event(const struct tp_join *j, struct tp_event *ev);

/* tp_join_dispatch - every device record as an event, in start order. */
void tp_join_dispatch(const struct tp_join *j, const struct tp_clock_map *map,
                         void (*fn)(void *ctx, const struct tp_event *ev), void *ctx);

void tp_join_free(struct tp_join *j);

/* tp_device_memcpy_name - Kineto's "Memcpy HtoD (Pageable -> Device)" /
 * "Memset (Device)" / "Stream Sync" names of a device record. */
const char *tp_device_name(const struct tp_device_record *d, char *buf, size_t bufsz);

#endif
