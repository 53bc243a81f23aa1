/* TEMPORARY local stub (not committed) */
#include "cupti.h"
#include "devprops.h"
#include <string.h>
int tp_cupti_start(void) { return -1; }
int tp_cupti_enabled(void) { return 0; }
void tp_cupti_collect(int forced) { (void)forced; }
size_t tp_cupti_unfinished(uint64_t t0, uint64_t t1) { (void)t0; (void)t1; return 0; }
void tp_cupti_take(uint64_t t0, uint64_t t1, struct tp_dev_window *out) { (void)t0; (void)t1; memset(out, 0, sizeof *out); }
void tp_cupti_window_free(struct tp_dev_window *w) { (void)w; }
void tp_cupti_stop(int final) { (void)final; }
void tp_cupti_ext_push(uint64_t id) { (void)id; }
void tp_cupti_ext_pop(void) { }
const char *tp_cupti_status(void) { return "unavailable: stub"; }
int tp_devprops_get(const struct tp_devprop **out) { *out = 0; return 0; }
double tp_devprops_occupancy(const struct tp_devprop *d, int r, int s, int dy, int b, double bps) { (void)d; (void)r; (void)s; (void)dy; (void)b; (void)bps; return -1; }
