/*
 * fuzz_demangle.c - libFuzzer harness: kernel-name demangling and interning
 * (collector/record/kernels.c tp_demangle, collector/record/intern.c tp_intern), the path
 * every launched kernel's mangled name takes to the trace.
 *
 * DESIGN
 * Byte 0 picks the output size (1..256, or the collector's own
 * TP_INTERN_LEN_MAX + 1); the rest, NUL-terminated, is the mangled name,
 * half the time with "_Z" put in front so that __cxa_demangle (libstdc++,
 * not instrumented) is reached.  Checks beyond the sanitizers: the output
 * is NUL-terminated inside its size and, when the name is not a C++ one, a
 * prefix of the input; interning it returns a string that is a prefix of
 * it (intern cuts long names on a UTF-8 boundary) and the same id twice.
 * The intern table is bounded (TP_INTERN_MAX), so a long run stays within
 * libFuzzer's memory limit.
 */
#include "collector/record/intern.h"
#include "collector/record/kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t outsz = data[0] == 0 ? TP_INTERN_LEN_MAX + 1 : data[0];
    int cxx = data[0] & 1;
    char *name = malloc(size + 2);
    if (!name)
        abort();
    size_t k = 0;
    if (cxx) {
        name[k++] = '_';
        name[k++] = 'Z';
    }
    memcpy(name + k, data + 1, size - 1);
    name[k + size - 1] = '\0';

    char *out = malloc(outsz);
    if (!out)
        abort();
    tp_demangle(name, out, outsz);
    size_t n = strnlen(out, outsz);
    if (n == outsz)
        abort();
    if (!(name[0] == '_' && name[1] == 'Z') && strncmp(out, name, n) != 0)
        abort();
    uint32_t id = tp_intern(out, (size_t)-1);
    if (id != TP_INTERN_OVERFLOW) {
        const char *s = tp_intern_str(id);
        if (!s || strncmp(s, out, strlen(s)) != 0 || tp_intern(out, (size_t)-1) != id)
            abort();
    }
    free(out);
    free(name);
    return 0;
}
