/*
 * core.h - what the preload sees of the core: the call protocol
 * (protocol.h), activation and the process's life (lifecycle.h), and
 * steps and windows (steps.h).
 */
#ifndef TRAINPROF_COLLECTOR_CORE_H
#define TRAINPROF_COLLECTOR_CORE_H

#include "collector/control/lifecycle.h"
#include "protocol.h"
#include "collector/control/steps.h"

#endif
