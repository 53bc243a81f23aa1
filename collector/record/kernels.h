/*
 * kernels.h - kernel names from registration calls, looked up per launch.
 *
 * __cudaRegisterFunction maps a host stub to its mangled device name;
 * __cudaGetKernel maps a cudaKernel_t to a stub; the driver's
 * cuLibraryGetKernel/cuModuleGetFunction name a CUkernel/CUfunction, and
 * cuKernelGetFunction aliases a CUfunction to its CUkernel.  Launch records carry the
 * raw stub or handle; names are demangled and interned at flush time, and
 * for launch:GLOB step signals once per kernel at its first launch.
 * Registration may happen before our constructor runs: the table needs no
 * initialisation.
 */
#ifndef TRAINPROF_COLLECTOR_KERNELS_H
#define TRAINPROF_COLLECTOR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* tp_kernels_register - stub "stub" has device name "mangled" (kept by pointer:
 * it lives in the registering module's read-only data). */
void tp_kernels_register(const void *stub, const char *mangled);

/* tp_kernels_register_copy - handle "handle" has device name "mangled", which
 * is copied (the driver's string need not outlive the call). */
void tp_kernels_register_copy(const void *handle, const char *mangled);

/* tp_kernels_alias - handle "kernel" launches the function of "stub". */
void tp_kernels_alias(const void *kernel, const void *stub);

/* tp_kernels_name_id - interned demangled name of the launched function
 * ("func" with enum tp_func_kind "kind"), or 0 if unknown.  Flush thread.
 * A TP_FUNC_DRIVER handle missing from the table is asked of the loaded
 * driver (cuKernelGetName, then cuFuncGetName: side-effect-free queries),
 * once per handle; libcuda is never loaded for that. */
uint32_t tp_kernels_name_id(uint64_t func, int kind);

/* tp_kernels_match - 1 if the function's demangled name matches "glob"
 * (fnmatch), cached per kernel after the first call; 0 otherwise. */
int tp_kernels_match(uint64_t func, int kind, const char *glob);

/* tp_demangle - demangle "name" into "out" (C++ names through the process's
 * or a lazily loaded libstdc++'s __cxa_demangle; other names copied). */
void tp_demangle(const char *name, char *out, size_t outsz);

#endif
