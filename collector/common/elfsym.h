/*
 * elfsym.h - names of functions that have no dynamic symbol.
 *
 * dladdr() sees only the dynamic symbol table, so a static function, or any
 * function of a program linked without -rdynamic, has no name there.  The
 * full symbol table (.symtab) usually still is in the file unless it was
 * stripped: this module reads it, once per object, on the flush thread.
 */
#ifndef TRAINPROF_COLLECTOR_ELFSYM_H
#define TRAINPROF_COLLECTOR_ELFSYM_H

#include <stdint.h>

/*
 * tp_elfsym_lookup - the (mangled) name of the function containing "addr"
 * in the object file "path" loaded at "base" (dladdr's dli_fbase), from its
 * .symtab, or NULL (stripped file, unreadable file, no function there).
 * "*start" gets the function's address.  The name stays valid until
 * tp_elfsym_reset().  Not thread-safe: the flush thread's.
 */
const char *tp_elfsym_lookup(const char *path, uintptr_t base, uintptr_t addr, uintptr_t *start);

/* tp_elfsym_reset - forget every object read (tests). */
void tp_elfsym_reset(void);

#endif
