/*
 * resolve.h - find the real definition of an interposed function.
 */
#ifndef TRAINPROF_PRELOAD_RESOLVE_H
#define TRAINPROF_PRELOAD_RESOLVE_H

#define TP_EXPORT __attribute__((visibility("default")))

/*
 * tp_resolve - the next definition of "name" after this library:
 * dlsym(RTLD_NEXT), then a scan of every loaded object but ours (a library
 * loaded as a dependency of an RTLD_LOCAL dlopen is invisible to RTLD_NEXT).
 * Returns NULL if none is loaded.  Never prints, never aborts.
 */
void *tp_resolve(const char *name);

#endif
