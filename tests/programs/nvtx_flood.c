/*
 * nvtx_flood.c - DESIGN: NVTX at volumes that overflow what the library
 * keeps: distinct messages by the million, more records than the buffer
 * holds, more pushes than pops.  Each mode is one of the ways a program
 * can exhaust a bound (tests/preload/test_losses.py checks that nothing
 * grows without bound and that every loss is counted where the user
 * looks); the NVTX calls come from the toolkit's NVTX3 header only, as in
 * nvtx_ranges.c.
 *
 * Usage: nvtx_flood MODE [N]
 *   no-cuda N     never touch CUDA or trainprof_*: N distinct marks, and
 *                 N/10 of each of: distinct start/end ranges, push/pop
 *                 ranges, registered strings and domains (messages of 199
 *                 bytes), then print "vmhwm_kb A B" to stderr: the peak RSS
 *                 (VmHWM) before and after
 *   itt N         never touch CUDA: N distinct ITT string handles of 199
 *                 bytes through __itt_string_handle_create (found with
 *                 dlsym: nothing without the library), as torch's ITT
 *                 state makes them; prints "vmhwm_kb A B" and "itt_handles
 *                 H" (distinct handles returned) to stderr
 *   registered N  CUDA program, 6 steps: N distinct strings registered
 *                 with nvtxDomainRegisterStringA in step 0, then in each
 *                 step 100 ranges of new distinct names and 100 marks of
 *                 new distinct names
 *   names N       CUDA program, 6 steps: N ranges of new distinct names
 *                 in each step
 *   flood N       CUDA program, 6 steps: N push/pop ranges and N marks
 *                 (one name each) in each step
 *   deep          CUDA program, 6 steps: in each step 130 ranges nested in
 *                 the step's (3 past the library's stack of 128), and after
 *                 the step's range 3 pops too many
 * In the CUDA modes each step is an NVTX range named "step" (the default
 * TRAINPROF_STEP_ON=api,nvtx:step counts it) holding a cudaMemcpy; they
 * print "vmhwm_kb A B" to stderr too: after the first CUDA call
 * (activation) and at the end.
 * Prints one deterministic line to stdout.  Exit status 0 unless a CUDA call
 * fails.
 */
#include <nvtx3/nvToolsExt.h>

#include "prog.h"

#define MSG 200
#define STEPS 6

/* The high-water mark of the resident set, kB (/proc/self/status VmHWM). */
static long vmhwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* A message of MSG - 1 bytes, distinct for each (kind, i): "kind i xxx...";
 * "buf" holds MSG - 1 'x' from message_init. */
static void message_init(char *buf)
{
    memset(buf, 'x', MSG - 1);
    buf[MSG - 1] = 0;
}

static const char *message(char *buf, const char *kind, long i)
{
    int n = snprintf(buf, 64, "%s %ld ", kind, i);
    buf[n] = 'x';
    return buf;
}

static int no_cuda(long n)
{
    char buf[MSG];
    message_init(buf);
    long before = vmhwm_kb();
    nvtxDomainHandle_t domain = nvtxDomainCreateA("no-cuda");
    for (long i = 0; i < n; i++)
        nvtxMarkA(message(buf, "mark", i));
    for (long i = 0; i < n / 10; i++) {
        nvtxRangeEnd(nvtxRangeStartA(message(buf, "start", i)));
        nvtxRangePushA(message(buf, "push", i));
        nvtxRangePop();
        nvtxDomainRegisterStringA(domain, message(buf, "registered", i));
        nvtxDomainCreateA(message(buf, "domain", i));
    }
    fprintf(stderr, "vmhwm_kb %ld %ld\n", before, vmhwm_kb());
    printf("nvtx_flood no-cuda: %ld messages of each kind\n", n);
    return 0;
}

static int itt(long n)
{
    typedef const void *(*handle_fn)(const char *);
    handle_fn make = (handle_fn)dlsym(RTLD_DEFAULT, "__itt_string_handle_create");
    char buf[MSG];
    message_init(buf);
    long before = vmhwm_kb(), distinct = 0;
    const void *last = NULL;
    for (long i = 0; make && i < n; i++) {
        const void *h = make(message(buf, "itt", i));
        distinct += h != last;
        last = h;
    }
    fprintf(stderr, "vmhwm_kb %ld %ld\nitt_handles %ld\n", before, vmhwm_kb(), distinct);
    printf("nvtx_flood itt: %ld names\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nvtx_flood no-cuda|itt|registered|names|flood|deep [N]\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 1000;
    if (!strcmp(mode, "no-cuda"))
        return no_cuda(n);
    if (!strcmp(mode, "itt"))
        return itt(n);

    void *dev = NULL;
    PROG_CHECK(cudaMalloc(&dev, 4096));
    long before = vmhwm_kb();
    nvtxDomainHandle_t domain = nvtxDomainCreateA("flood");
    char buf[MSG];
    long k = 0;
    for (int s = 0; s < STEPS; s++) {
        nvtxRangePushA("step");
        if (!strcmp(mode, "registered")) {
            if (s == 0)
                for (long i = 0; i < n; i++) {
                    snprintf(buf, sizeof buf, "r%ld", i);
                    nvtxDomainRegisterStringA(domain, buf);
                }
            for (int i = 0; i < 100; i++, k++) {
                snprintf(buf, sizeof buf, "range %ld", k);
                nvtxRangePushA(buf);
                nvtxRangePop();
                snprintf(buf, sizeof buf, "mark %ld", k);
                nvtxMarkA(buf);
            }
        } else if (!strcmp(mode, "names")) {
            for (long i = 0; i < n; i++, k++) {
                snprintf(buf, sizeof buf, "name %ld", k);
                nvtxRangePushA(buf);
                nvtxRangePop();
            }
        } else if (!strcmp(mode, "flood")) {
            for (long i = 0; i < n; i++) {
                nvtxRangePushA("flood");
                nvtxRangePop();
                nvtxMarkA("flood mark");
            }
        } else if (!strcmp(mode, "deep")) {
            for (int i = 0; i < 130; i++)
                nvtxRangePushA("nested");
            for (int i = 0; i < 130; i++)
                nvtxRangePop();
        } else {
            fprintf(stderr, "nvtx_flood: unknown mode %s\n", mode);
            return 2;
        }
        PROG_CHECK(cudaMemcpy(dev, buf, 64, cudaMemcpyHostToDevice));
        nvtxRangePop();
        if (!strcmp(mode, "deep"))
            for (int i = 0; i < 3; i++)
                nvtxRangePop();
    }
    PROG_CHECK(cudaFree(dev));
    fprintf(stderr, "vmhwm_kb %ld %ld\n", before, vmhwm_kb());
    printf("nvtx_flood %s: %d steps\n", mode, STEPS);
    return 0;
}
