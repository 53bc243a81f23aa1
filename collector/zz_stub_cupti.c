/* TEMPORARY stub of devprops.c until the driver layer lands */
#include "devprops.h"
int tp_devprops_get(const struct tp_devprop **out) { *out = 0; return 0; }
double tp_devprops_occupancy(const struct tp_devprop *d, int r, int s, int dy, int b, double bps) { (void)d; (void)r; (void)s; (void)dy; (void)b; (void)bps; return -1; }
