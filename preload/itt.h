/*
 * itt.h - libtrainprof.so as an ITT collector (preload/itt.c): what the
 * constructor tells it.
 */
#ifndef TRAINPROF_PRELOAD_ITT_H
#define TRAINPROF_PRELOAD_ITT_H

/* tp_itt_named - "yes": INTEL_LIBITTNOTIFY64 names this library, so a
 * program's ittnotify will load it (trainprof_itt_collector() says 1 until
 * it has, 2 after). */
void tp_itt_named(int yes);

#endif
