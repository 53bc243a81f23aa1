/*
 * intern.h - strings to small integer ids, once.
 *
 * Lookup is lock-free (hash chains published with release stores); an
 * insert takes a mutex, so a string costs a lock only the first time it is
 * seen.  Ids are stable for the life of the process; id 0 is "".
 * The table is bounded: TP_INTERN_MAX strings, and the bytes its strings
 * and directory take (TP_INTERN_EARLY_BYTES until tp_intern_set_budget
 * raises it at activation).  Past either, tp_intern returns
 * TP_INTERN_OVERFLOW, whose text is "<name table full>", and counts the
 * refusal.
 */
#ifndef TRAINPROF_COLLECTOR_INTERN_H
#define TRAINPROF_COLLECTOR_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "collector/contract/record.h"

#define TP_INTERN_MAX      (1u << 20)
#define TP_INTERN_OVERFLOW 1u
#define TP_INTERN_EARLY_BYTES (256u * 1024u)  /* the budget before activation */

/* tp_intern - id of the first "len" bytes of "s" (len (size_t)-1: strlen). */
uint32_t tp_intern(const char *s, size_t len);

/* tp_intern_find - as tp_intern, but never adds: 0 if "s" is not in the
 * table (lock-free). */
uint32_t tp_intern_find(const char *s, size_t len);

/* tp_intern_len - the length tp_intern keeps of "s" ("len" or (size_t)-1):
 * at most TP_INTERN_LEN_MAX, cut on a UTF-8 boundary. */
size_t tp_intern_len(const char *s, size_t len);

/* tp_intern_set_budget - let the table take up to "bytes" (arenas and
 * directory pages; never lowered). */
void tp_intern_set_budget(size_t bytes);

/* tp_intern_refused - strings refused so far (table full: TP_INTERN_OVERFLOW). */
uint64_t tp_intern_refused(void);

/* tp_intern_bytes - bytes the table has taken (tests). */
size_t tp_intern_bytes(void);

/* tp_intern_str - the string of "id"; "" for an unknown id.  Never NULL. */
const char *tp_intern_str(uint32_t id);

/*
 * tp_intern_flag - a per-string byte of cached facts (e.g. "matches the
 * nvtx step pattern": 0 unknown, 1 yes, 2 no), set with tp_intern_set_flag.
 */
uint8_t tp_intern_flag(uint32_t id);
void tp_intern_set_flag(uint32_t id, uint8_t v);

#endif
