/*
 * intern.h - strings to small integer ids, once.
 *
 * Lookup is lock-free (hash chains published with release stores); an
 * insert takes a mutex, so a string costs a lock only the first time it is
 * seen.  Ids are stable for the life of the process; id 0 is "".
 * The table is bounded (TP_INTERN_MAX strings): past it tp_intern returns
 * TP_INTERN_OVERFLOW, whose text is "<name table full>".
 */
#ifndef TRAINPROF_COLLECTOR_INTERN_H
#define TRAINPROF_COLLECTOR_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define TP_INTERN_MAX      (1u << 20)
#define TP_INTERN_OVERFLOW 1u
#define TP_INTERN_LEN_MAX  1024   /* longer strings are cut (on a UTF-8 boundary) */

/* tp_intern - id of the first "len" bytes of "s" (len (size_t)-1: strlen). */
uint32_t tp_intern(const char *s, size_t len);

/* tp_intern_str - the string of "id"; "" for an unknown id.  Never NULL. */
const char *tp_intern_str(uint32_t id);

/*
 * tp_intern_flag - a per-string byte of cached facts (e.g. "matches the
 * nvtx step pattern": 0 unknown, 1 yes, 2 no), set with tp_intern_set_flag.
 */
uint8_t tp_intern_flag(uint32_t id);
void tp_intern_set_flag(uint32_t id, uint8_t v);

#endif
