/*
 * hostile_names.c - kernels and NVTX ranges whose names must not break a trace.
 *
 * DESIGN
 * Registers kernels whose device names hold quotes, backslashes, control
 * bytes, invalid UTF-8 (a stray 0xff, lone continuation bytes, a truncated
 * multibyte sequence), valid 4-byte UTF-8, a broken mangled name and a
 * 5000-character name; launches each once per step and wraps each step's
 * launches in NVTX ranges with equally hostile messages.  Prints, per kernel,
 * its index and name as hex, so a test can match trace names to the bytes.
 *
 * Usage: hostile_names [steps]   (default 3); trainprof_step() after each step.
 */
#include <nvtx3/nvToolsExt.h>

#include "prog.h"

#define LONG_LEN 5000

static char long_name[LONG_LEN + 1];

static const char *names[] = {
    "quote\"kernel\"",
    "back\\slash\\\\kernel\\",
    "ctl\x01" "byte\x1f" "kernel",
    "new\nline\ttab\rcr",
    "bad\xff" "utf8",
    "lone\x80\xbf" "continuation",
    "truncated\xe2\x82",
    "emoji\xf0\x9f\x98\x80" "kernel\xe2\x82\xac",
    "_Z3fooPc\xff\"\\",                       /* mangled-looking, not demanglable */
    "_ZN3ns6kernelIJEEEvv\"",
    "json}],\"traceEvents\":[{",
    "\x7f" "del",
    long_name,
};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

static const char *ranges[] = {
    "range \"quoted\" \\ back",
    "range\x01\x02\x1b[31m",
    "range\xff\xfe",
    "range\xf0\x9f\x98\x80",
};
#define N_RANGES (sizeof(ranges) / sizeof(ranges[0]))

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 3;
    for (int i = 0; i < LONG_LEN; i++)
        long_name[i] = (char)('a' + i % 26);
    long_name[LONG_LEN] = '\0';

    void **module = prog_register_module();
    for (size_t k = 0; k < N_NAMES; k++)
        prog_register(module, PROG_STUB(k), names[k]);
    __cudaRegisterFatBinaryEnd(module);

    for (size_t k = 0; k < N_NAMES; k++) {
        printf("kernel %zu ", k);
        for (const unsigned char *p = (const unsigned char *)names[k]; *p; p++)
            printf("%02x", *p);
        printf("\n");
    }

    /* set-up made a CUDA call before the first step, as training programs
     * do: NVTX ranges alone never activate the profiler */
    PROG_CHECK(cudaDeviceSynchronize());
    long launches = 0;
    for (long s = 0; s < steps; s++) {
        for (size_t r = 0; r < N_RANGES; r++)
            nvtxRangePushA(ranges[r]);
        for (size_t k = 0; k < N_NAMES; k++) {
            PROG_CHECK(cudaLaunchKernel(PROG_STUB(k), prog_dim3(1, 1, 1), prog_dim3(32, 1, 1),
                                        NULL, 0, 0));
            launches++;
        }
        for (size_t r = 0; r < N_RANGES; r++)
            nvtxRangePop();
        tp_call_step();
    }
    PROG_CHECK(cudaDeviceSynchronize());
    printf("launches %ld\n", launches);
    return 0;
}
