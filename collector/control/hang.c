/*
 * hang.c - DESIGN: the hang doctor.  A rank stuck in a collective holds the
 * whole job until a watchdog kills it 10-30 minutes later, and by then
 * nobody can tell which rank never arrived.  Each process answers for
 * itself, early: when no step has ended for TRAINPROF_HANG_S seconds it
 * writes {reports}/rank{rank}.hang.txt and .json, saying what each of its
 * threads is doing (the blocking call in its in-flight slot,
 * record/inflight.c, and for how long; what the kernel says of it: state,
 * wait channel, system call), per communicator the number of the last
 * collective it issued, and the last step that ended.  `trainprof hang`
 * then reads every rank's report and names the rank the others wait for.
 *
 * Where the work runs: on tp-flush's idle tick (once a second, flusher.c;
 * no thread of our own), through lifecycle.c's idle hook, like the
 * trigger file (trigger.c).  The training threads only write their slots
 * and, at each step's end, two atomics here (tp_hang_step, under the step
 * lock the step path holds anyway).  The steps must keep being counted to
 * the end of the run: steps.c keeps the step signals on while the hang
 * doctor is (tp_hang_on), where it turned them off once the schedule had
 * finished.
 *
 * Before the first step: the clock starts at activation, but importing,
 * loading data and compiling often take longer than TRAINPROF_HANG_S with
 * nothing wrong (torch's import alone took 2 s on the H100 machine, where
 * TRAINPROF_HANG_S=2 gave a report at "steps completed: 0").  So a hang
 * before the first step is reported at TRAINPROF_HANG_S only if a thread
 * has been in one blocking call (the first collective, a synchronization)
 * that long, and otherwise after TP_HANG_FIRST_S (or TRAINPROF_HANG_S if
 * longer): a rank stuck in its own code before its first collective is
 * still named well before a 10-30 minute watchdog.  A program that counts
 * no steps at all gets one report then, saying no step was seen.
 *
 * One report per hang: a report is written once for a given last step; a
 * step that ends clears the hang, and the next one that lasts gets a new
 * report under a new name (rank{rank}.hang.{n}.txt for the n-th, n >= 2),
 * so the first is never overwritten.  Files are written the library's one
 * way (safefile.c: an exclusive temporary name, then a rename; never
 * through a planted link); a folder that cannot be written gives one
 * `trainprof:` line per hang and the program goes on.
 *
 * Native stacks of every thread.  A thread's stack can only be walked
 * safely by the thread itself (another thread's registers and stack change
 * under a reader), so tp-flush asks each thread in turn with a signal of
 * ours (tgkill) and the thread's handler walks its own stack with glibc's
 * backtrace() (libgcc's unwinder, which finds each frame's unwind table
 * with _dl_find_object: no lock, no allocation; glibc loads libgcc_s at
 * the first call, so tp_hang_init makes one at activation).  Not
 * libunwind's unw_backtrace, which stack.c uses on the training thread:
 * libunwind is loaded by dlopen, so its per-thread cache (__thread) is
 * allocated with malloc at a thread's first use, and in a handler that
 * interrupted malloc that deadlocks (ThreadSanitizer reported the malloc
 * inside our handler, from __tls_get_addr, on the 4-rank test).  Safety:
 *  - the signal: a real-time signal whose disposition is SIG_DFL at the
 *    first report, installed then and never removed (a signal still
 *    pending later finds our handler, never the default, which would end
 *    the process); none free: no native stacks, one line;
 *  - only threads that do not block it are asked (SigBlk of
 *    /proc/self/task/<tid>/status): a blocked signal would stay pending
 *    and run later; our own threads block every signal;
 *  - the handler writes only into the request slot of its own thread id,
 *    and only while tp-flush waits for it (a CAS from WAITING to WRITING);
 *    tp-flush waits at most 100 ms per thread and then abandons the slot
 *    with the opposite CAS, so a late handler (a thread that was not
 *    running) writes nothing and tp-flush never waits on a thread that
 *    cannot answer; errno is saved and restored;
 *  - the cost to the program: each thread runs the handler once per hang
 *    (tens of microseconds); SA_RESTART restarts the system calls that
 *    can be restarted, and those Linux never restarts after a handler
 *    (nanosleep, poll, epoll_wait...) return early or with EINTR, as they
 *    do for any signal a program must expect (a debugger's, a
 *    profiler's); this happens once per hang, after TRAINPROF_HANG_S
 *    seconds in which no step ended.
 * Symbols are named on tp-flush (tp_stack_resolve).
 *
 * Python stacks (under `trainprof run`): the Python hook
 * (scripts/trainprof_cli/pyhook/sitecustomize.py) registers Python's
 * faulthandler, all threads, on a free real-time signal, writing into a
 * memory file (memfd) named "trainprof-pystacks.<signal>".  At a report
 * tp-flush finds that file among the process's descriptors by its name
 * (no interface between the two beyond the name), opens it for itself
 * (/proc/self/fd/N, its own offset), checks the signal is still handled
 * (not SIG_DFL: it would end the process) and not blocked by the main
 * thread, sends it to the main thread, and reads what faulthandler
 * appended, once it stopped growing for 50 ms (2 s at most).  faulthandler
 * writes the stacks from its signal handler without the GIL, with
 * async-signal-safe writes, as it does for a fatal signal.
 *
 * The flight recorder (when on) dumps its ring at a hang through
 * tp_hang_flight_dump, its hook.
 */
#include "hang.h"

#include "collector/common/clock.h"
#include "collector/common/format.h"
#include "collector/common/log.h"
#include "collector/common/safefile.h"
#include "collector/common/sighandler.h"
#include "collector/config/config.h"
#include "collector/contract/sink.h"
#include "collector/contract/vocab.h"
#include "collector/record/apis.h"
#include "collector/record/comms.h"
#include "collector/record/inflight.h"
#include "collector/record/pgroup.h"
#include "collector/modules/stack.h"

#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int tp_hang_active;
static double tp_hang_s;
static _Atomic uint64_t tp_last_end;      /* tick the last step ended (activation before any) */
static _Atomic uint64_t tp_last_steps;    /* steps completed then */
static uint64_t tp_reported_end;          /* tp_last_end of the hang last reported (tp-flush) */
static unsigned tp_reports;               /* reports written (tp-flush) */
static int tp_warned;

/* ---- hooks the flight recorder fills in ------------------------------------ */

/* The flight recorder is on (TRAINPROF_FLIGHT): TRAINPROF_HANG_S unset
 * then means 60 s. */
static int tp_hang_flight_on(void)
{
    return tp_cfg.flight > 0;
}

/* A hang was reported: the flight recorder dumps its ring, reason "hang"
 * (steps.c, through tp_hang_set_flight: steps.c calls into this file, not
 * the other way).  Its dump takes the step lock, which tp-flush must not
 * wait for (a step may hold it while it waits for tp-flush: steps.c's
 * tp_await_on), so it only tries; a busy lock is tried again at each idle
 * tick while the same hang lasts. */
static int (*_Atomic tp_flight_dump_fn)(void);
static int tp_flight_due;                 /* a dump is owed for the hang reported (tp-flush) */

void tp_hang_set_flight(int (*dump)(void))
{
    atomic_store(&tp_flight_dump_fn, dump);
}

static void tp_hang_flight_dump(void)
{
    int (*dump)(void) = atomic_load(&tp_flight_dump_fn);
    if (tp_flight_due && (!dump || dump() == 0))
        tp_flight_due = 0;
}

/* ---- state ------------------------------------------------------------------- */

double tp_hang_seconds(void)
{
    if (tp_cfg.hang_s > 0)
        return tp_cfg.hang_s;
    if (tp_cfg.hang_s < 0)
        return 0;
    return tp_hang_flight_on() ? 60 : 0;
}

int tp_hang_on(void)
{
    return atomic_load_explicit(&tp_hang_active, memory_order_relaxed);
}

void tp_hang_init(uint64_t now)
{
    tp_hang_s = tp_hang_seconds();
    if (tp_hang_s <= 0)
        return;
    atomic_store(&tp_last_end, now);
    tp_reported_end = 0;
    tp_inflight_activate();
    void *warm[2];
    backtrace(warm, 2);     /* glibc loads libgcc_s now, not in a signal handler */
    atomic_store(&tp_hang_active, 1);
}

void tp_hang_step(uint64_t steps, uint64_t now)
{
    if (!tp_hang_on())
        return;
    atomic_store_explicit(&tp_last_steps, steps, memory_order_relaxed);
    atomic_store_explicit(&tp_last_end, now, memory_order_release);
}

unsigned tp_hang_reports(void)
{
    return tp_reports;
}

/* ---- native stacks: each thread walks its own, asked by a signal ----------- */

#define TP_HANG_DEPTH 48
enum { TP_REQ_IDLE, TP_REQ_WAITING, TP_REQ_WRITING, TP_REQ_DONE };

static struct {
    _Atomic int tid;
    _Atomic int state;
    int n;
    void *raw[TP_HANG_DEPTH];
} tp_req;
static int tp_stack_sig;            /* 0: not installed yet; -1: none free */

static void tp_hang_stack_handler(int sig)
{
    (void)sig;
    int e = errno;
    int want = TP_REQ_WAITING;
    if (atomic_load(&tp_req.tid) == (int)syscall(SYS_gettid) &&
        atomic_compare_exchange_strong(&tp_req.state, &want, TP_REQ_WRITING)) {
        tp_req.n = backtrace(tp_req.raw, TP_HANG_DEPTH);
        atomic_store(&tp_req.state, TP_REQ_DONE);
    }
    errno = e;
}

/* 1 if "ip" lies in libtrainprof (this handler, the wrappers): not the
 * program's frames. */
static int tp_hang_ours(void *ip)
{
    Dl_info a, b;
    return dladdr(ip, &a) && dladdr((void *)(uintptr_t)tp_hang_idle, &b) &&
           a.dli_fbase == b.dli_fbase;
}

/* Installs the handler on a free real-time signal, once. */
static int tp_hang_stack_signal(void)
{
    if (tp_stack_sig)
        return tp_stack_sig;
    tp_stack_sig = -1;
    for (int sig = SIGRTMAX - 1; sig >= SIGRTMIN + 4; sig--) {
        if (sig == tp_cfg.trigger_signal)
            continue;
        if (tp_sighandler_install_over_default(sig, tp_hang_stack_handler) == 1) {
            tp_stack_sig = sig;
            break;
        }
    }
    if (tp_stack_sig < 0)
        TP_WARN("hang report: no free real-time signal to ask threads for their stacks: "
                "no native stacks");
    return tp_stack_sig;
}

/* 1 if thread "tid" blocks signal "sig" (its SigBlk mask). */
static int tp_task_blocks(int tid, int sig)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[k > 0 ? k : 0] = '\0';
    const char *p = strstr(buf, "SigBlk:");
    if (!p)
        return 1;
    unsigned long long mask = strtoull(p + 7, NULL, 16);
    return (mask >> (sig - 1)) & 1;
}

/* The native stack of thread "tid" as a JSON array of frames (innermost
 * first), or a string saying why there is none. */
static json_t *tp_hang_stack(int tid, int self)
{
    int sig = tp_hang_stack_signal();
    if (sig < 0)
        return json_string("unavailable: no free real-time signal");
    if (tid == self)
        return json_string("unavailable: the profiler's own thread");
    if (tp_task_blocks(tid, sig))
        return json_string("unavailable: the thread blocks signals");
    atomic_store(&tp_req.state, TP_REQ_IDLE);
    atomic_store(&tp_req.tid, tid);
    tp_req.n = 0;
    atomic_store(&tp_req.state, TP_REQ_WAITING);
    if (syscall(SYS_tgkill, getpid(), tid, sig) != 0) {
        atomic_store(&tp_req.state, TP_REQ_IDLE);
        return json_string("unavailable: the thread is gone");
    }
    for (int i = 0; i < 100 && atomic_load(&tp_req.state) == TP_REQ_WAITING; i++) {
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    int want = TP_REQ_WAITING;
    if (atomic_compare_exchange_strong(&tp_req.state, &want, TP_REQ_IDLE))
        return json_string("unavailable: the thread did not answer within 100 ms");
    while (atomic_load(&tp_req.state) == TP_REQ_WRITING) {
        struct timespec ts = { 0, 100 * 1000 };
        nanosleep(&ts, NULL);
    }
    /* the frames of the handler end at the kernel's signal return: the
     * interrupted code's begin after it.  x86-64 Linux: glibc's __restore_rt,
     * "mov $15, %rax; syscall"; aarch64 Linux: the vDSO's
     * __kernel_rt_sigreturn (qemu-user's frame trampoline alike),
     * "mov x8, 139; svc 0" (rt_sigreturn is syscall 139).  Elsewhere none
     * is known: every frame is kept. */
#if defined(__x86_64__)
    static const unsigned char restore_rt[] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
#elif defined(__aarch64__)
    static const unsigned char restore_rt[] = { 0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4 };
#else
    static const unsigned char restore_rt[1] = { 0 };
#endif
    int first = 0;
    for (int i = 0; i < tp_req.n && sizeof restore_rt > 1; i++) {
        unsigned char code[sizeof restore_rt];
        struct iovec mine = { code, sizeof code }, at = { tp_req.raw[i], sizeof code };
        /* read through the kernel: an address at the end of a mapping
         * fails instead of faulting */
        if (process_vm_readv(getpid(), &mine, 1, &at, 1, 0) == (ssize_t)sizeof code &&
            memcmp(code, restore_rt, sizeof code) == 0)
            first = i + 1;
    }
    json_t *arr = json_array();
    for (int i = first; i < tp_req.n; i++) {
        if (tp_hang_ours(tp_req.raw[i]))
            continue;       /* the handler, a wrapper: the program's frames only */
        const char *name = tp_stack_symbol((uint64_t)(uintptr_t)tp_req.raw[i]);
        json_array_append_new(arr, json_string(name ? name : "?"));
    }
    atomic_store(&tp_req.tid, 0);
    atomic_store(&tp_req.state, TP_REQ_IDLE);
    return arr;
}

/* ---- Python stacks: faulthandler, registered by the Python hook --------------- */

#define TP_PYSTACKS_NAME "/memfd:trainprof-pystacks."
#define TP_PYSTACKS_MAX (1 << 20)

/* Our own descriptor on the Python hook's memory file, its signal in
 * "*sig"; -1 if there is none. */
static int tp_pystacks_open(int *sig)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int fd = -1;
    while (d && fd < 0 && (e = readdir(d)) != NULL) {
        char path[300], link[256];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0)
            continue;
        link[k] = '\0';
        size_t n = strlen(TP_PYSTACKS_NAME);
        if (strncmp(link, TP_PYSTACKS_NAME, n) != 0)
            continue;
        char *end;
        long v = strtol(link + n, &end, 10);
        if (v < SIGRTMIN || v > SIGRTMAX || (*end && *end != ' '))
            continue;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        *sig = (int)v;
    }
    if (d)
        closedir(d);
    return fd;
}

static off_t tp_fd_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_size : -1;
}

/* The Python stacks of every thread as faulthandler writes them, or a
 * string saying why there are none; JSON null when the hook is not there. */
static json_t *tp_hang_python(void)
{
    int sig = 0, fd = tp_pystacks_open(&sig);
    if (fd < 0)
        return json_null();
    struct sigaction sa;
    const char *why = NULL;
    off_t start = tp_fd_size(fd), size = start;
    if (start < 0 || sigaction(sig, NULL, &sa) != 0 || sa.sa_handler == SIG_DFL ||
        sa.sa_handler == SIG_IGN)
        why = "unavailable: the Python hook's signal is not handled";
    else if (tp_task_blocks((int)getpid(), sig))
        why = "unavailable: the main thread blocks the Python hook's signal";
    else if (syscall(SYS_tgkill, getpid(), getpid(), sig) != 0)
        why = "unavailable: the main thread is gone";
    if (!why) {
        int stable = 0;
        for (int i = 0; i < 200 && stable < 5; i++) {
            struct timespec ts = { 0, 10 * 1000 * 1000 };
            nanosleep(&ts, NULL);
            off_t now = tp_fd_size(fd);
            stable = now > start && now == size ? stable + 1 : 0;
            size = now;
        }
        if (size <= start)
            why = "unavailable: faulthandler wrote nothing within 2 s";
    }
    json_t *out;
    if (why) {
        out = json_string(why);
    } else {
        size_t n = (size_t)(size - start) < TP_PYSTACKS_MAX ? (size_t)(size - start)
                                                            : TP_PYSTACKS_MAX;
        char *buf = malloc(n + 1);
        ssize_t k = buf ? pread(fd, buf, n, start) : -1;
        if (k >= 0) {
            buf[k] = '\0';
            out = json_stringn(buf, (size_t)k);
            if (!out)
                out = json_string("unavailable: not UTF-8");
        } else {
            out = json_string("unavailable: cannot read the Python hook's file");
        }
        free(buf);
    }
    close(fd);
    return out;
}

/* ---- the report ------------------------------------------------------------- */

/* The first line of /proc/self/task/<tid>/<what>, without its newline. */
static void tp_task_read(int tid, const char *what, char *out, size_t n)
{
    char path[64];
    out[0] = '\0';
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t k = read(fd, out, n - 1);
    close(fd);
    out[k > 0 ? k : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

/* The state letter of a thread (the field after the parenthesised name). */
static char tp_task_state(int tid)
{
    char stat[512];
    tp_task_read(tid, "stat", stat, sizeof stat);
    const char *p = strrchr(stat, ')');
    return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

static json_t *tp_hang_call_json(const struct tp_inflight_view *v, const struct tp_clock_map *m,
                                 uint64_t now)
{
    json_t *c = json_object();
    char h[32];
    json_object_set_new(c, "call", json_string(tp_api_name(v->api)));
    json_object_set_new(c, "for_s", json_real((double)tp_clock_ticks_to_ns(m, v->t0, now) / 1e9));
    if (v->comm) {
        json_object_set_new(c, "communicator", json_integer(v->comm - 1));
        json_object_set_new(c, "collective", json_string(tp_coll_name(v->op)));
        json_object_set_new(c, "seq", json_integer((json_int_t)v->seq));
    }
    json_object_set_new(c, "bytes", json_integer((json_int_t)v->bytes));
    if (v->peer >= 0)
        json_object_set_new(c, "peer", json_integer(v->peer));
    snprintf(h, sizeof h, "0x%llx", (unsigned long long)v->handle);
    json_object_set_new(c, "handle", json_string(h));
    return c;
}

/* Every thread of the process: its in-flight call (when it has a slot)
 * and what the kernel says of it. */
static json_t *tp_hang_threads(const struct tp_clock_map *m, uint64_t now)
{
    static struct tp_inflight_view views[TP_INFLIGHT_SLOTS];
    unsigned nv = 0;
    for (unsigned i = 0; i < TP_INFLIGHT_SLOTS; i++)
        if (tp_inflight_read(i, &views[nv]))
            nv++;
    json_t *arr = json_array();
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    pid_t self = gettid();
    while (d && (e = readdir(d)) != NULL) {
        int tid = atoi(e->d_name);
        if (tid <= 0)
            continue;
        json_t *t = json_object();
        char buf[256];
        json_object_set_new(t, "tid", json_integer(tid));
        tp_task_read(tid, "comm", buf, sizeof buf);
        json_object_set_new(t, "name", json_string(buf));
        if (tid == self)
            json_object_set_new(t, "profiler", json_true());
        char st[2] = { tp_task_state(tid), 0 };
        json_object_set_new(t, "state", json_string(st));
        tp_task_read(tid, "wchan", buf, sizeof buf);
        json_object_set_new(t, "wchan", json_string(buf[0] && strcmp(buf, "0") ? buf : ""));
        tp_task_read(tid, "syscall", buf, sizeof buf);
        char *sp = strchr(buf, ' ');
        if (sp)
            *sp = '\0';
        json_object_set_new(t, "syscall", json_string(buf));
        json_t *call = json_null();
        for (unsigned i = 0; i < nv; i++)
            if (views[i].tid == tid && views[i].t0)
                call = tp_hang_call_json(&views[i], m, now);
        json_object_set_new(t, "in_flight", call);
        json_object_set_new(t, "stack", tp_hang_stack(tid, self));
        json_array_append_new(arr, t);
    }
    if (d)
        closedir(d);
    return arr;
}

static json_t *tp_hang_comms(void)
{
    struct tp_comm_info info[TP_COMMS_LISTED];
    uint32_t total = 0;
    size_t n = tp_comms_list(info, TP_COMMS_LISTED, &total);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_pack("{s:i, s:i, s:i, s:I}", "id", (int)info[i].serial, "size",
                              (int)info[i].size, "rank", (int)info[i].rank, "last_issued",
                              (json_int_t)tp_inflight_last_seq(info[i].serial));
        json_array_append_new(arr, c);
    }
    return arr;
}

/* The text form: what a person reads first. */
static char *tp_hang_text(json_t *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "trainprof hang report: rank %d of %d, pid %d on %s (%s)\n",
            (int)json_integer_value(json_object_get(o, "rank")),
            (int)json_integer_value(json_object_get(o, "world_size")),
            (int)json_integer_value(json_object_get(o, "pid")),
            json_string_value(json_object_get(o, "host")),
            json_string_value(json_object_get(o, "program")));
    json_t *last = json_object_get(o, "last_step");
    fprintf(f, "no step ended for %.1f s (TRAINPROF_HANG_S=%g); steps completed: %lld%s\n",
            json_real_value(json_object_get(o, "stalled_s")),
            json_real_value(json_object_get(o, "hang_s")),
            (long long)json_integer_value(json_object_get(o, "steps_completed")),
            json_is_null(last) ? " (none since activation)" : "");
    fprintf(f, "\ncommunicators (id: size, this rank, last collective issued):\n");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(o, "communicators"), i, v)
        fprintf(f, "  %lld: size %lld, rank %lld, last issued seq %lld\n",
                (long long)json_integer_value(json_object_get(v, "id")),
                (long long)json_integer_value(json_object_get(v, "size")),
                (long long)json_integer_value(json_object_get(v, "rank")),
                (long long)json_integer_value(json_object_get(v, "last_issued")));
    fprintf(f, "\nthreads:\n");
    json_array_foreach(json_object_get(o, "threads"), i, v) {
        json_t *c = json_object_get(v, "in_flight");
        fprintf(f, "  tid %lld (%s)%s: ", (long long)json_integer_value(json_object_get(v, "tid")),
                json_string_value(json_object_get(v, "name")),
                json_is_true(json_object_get(v, "profiler")) ? " [trainprof]" : "");
        if (json_is_object(c)) {
            fprintf(f, "in %s for %.1f s", json_string_value(json_object_get(c, "call")),
                    json_real_value(json_object_get(c, "for_s")));
            if (json_object_get(c, "communicator"))
                fprintf(f, ": communicator %lld, %s seq %lld",
                        (long long)json_integer_value(json_object_get(c, "communicator")),
                        json_string_value(json_object_get(c, "collective")),
                        (long long)json_integer_value(json_object_get(c, "seq")));
            if (json_object_get(c, "peer"))
                fprintf(f, ", peer %lld", (long long)json_integer_value(json_object_get(c, "peer")));
            fprintf(f, ", %lld bytes, handle %s\n",
                    (long long)json_integer_value(json_object_get(c, "bytes")),
                    json_string_value(json_object_get(c, "handle")));
        } else {
            fprintf(f, "no blocking call; state %s, wait channel %s, system call %s\n",
                    json_string_value(json_object_get(v, "state")),
                    json_string_value(json_object_get(v, "wchan"))[0]
                        ? json_string_value(json_object_get(v, "wchan")) : "-",
                    json_string_value(json_object_get(v, "syscall")));
        }
        json_t *st = json_object_get(v, "stack");
        if (json_is_string(st))
            fprintf(f, "    stack %s\n", json_string_value(st));
        size_t j;
        json_t *fr;
        json_array_foreach(st, j, fr)
            fprintf(f, "    #%zu %s\n", j, json_string_value(fr));
    }
    json_t *py = json_object_get(o, "python_stacks");
    if (json_is_string(py))
        fprintf(f, "\nPython stacks (faulthandler, most recent call first):\n%s",
                json_string_value(py));
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void tp_hang_report(uint64_t last_end, uint64_t now, const struct tp_clock_map *m)
{
    int rank, world_size;
    tp_rank_now(&rank, &world_size);
    uint64_t steps = atomic_load_explicit(&tp_last_steps, memory_order_relaxed);
    double stalled = (double)tp_clock_ticks_to_ns(m, last_end, now) / 1e9;
    json_t *o = json_pack("{s:i, s:s, s:i, s:i, s:i, s:s, s:s, s:f, s:f, s:I}",
                          "schema", 1, "kind", "trainprof-hang", "rank", rank,
                          "world_size", world_size, "pid", (int)getpid(), "host",
                          tp_cfg.hostname, "program", tp_cfg.program, "hang_s", tp_hang_s,
                          "stalled_s", stalled, "steps_completed", (json_int_t)steps);
    if (!o)
        return;
    json_object_set_new(o, "hang", json_integer((json_int_t)tp_reports + 1));
    json_object_set_new(o, "last_step", steps ? json_integer((json_int_t)steps - 1) : json_null());
    json_object_set_new(o, "written", json_real((double)time(NULL)));
    json_object_set_new(o, "communicators", tp_hang_comms());
    json_object_set_new(o, "threads", tp_hang_threads(m, now));
    json_object_set_new(o, "python_stacks", tp_hang_python());
    json_object_set_new(o, "unwatched_threads", json_integer((json_int_t)tp_inflight_unwatched()));
    char *js = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    char *txt = tp_hang_text(o);
    json_decref(o);

    struct tp_format_vars v = {
        .run_name = tp_cfg.run_name, .hostname = tp_cfg.hostname, .rank = rank,
        .local_rank = tp_cfg.local_rank, .world_size = world_size,
        .local_world_size = tp_cfg.local_world_size, .node_rank = tp_cfg.node_rank,
        .pid = (int)getpid(), .batch = -1, .path = NULL,
    };
    char dir[4096], err[256], jname[96], tname[96];
    const char *why = NULL;
    if (tp_format_expand_at(tp_cfg.reports, &v, tp_cfg.start_dir, dir, sizeof dir, err,
                            sizeof err) != 0)   /* as the windows' reports (window.c) */
        why = err;
    if (tp_reports == 0) {
        snprintf(jname, sizeof jname, "rank%d.hang.json", rank);
        snprintf(tname, sizeof tname, "rank%d.hang.txt", rank);
    } else {
        snprintf(jname, sizeof jname, "rank%d.hang.%u.json", rank, tp_reports + 1);
        snprintf(tname, sizeof tname, "rank%d.hang.%u.txt", rank, tp_reports + 1);
    }
    if (!why && (!js || !txt))
        why = "out of memory";
    /* the text first: the JSON, which `trainprof hang` looks for, comes
     * last, once both are whole */
    if (!why && (tp_safefile_put(dir, tname, txt, strlen(txt)) != 0 ||
                 tp_safefile_put(dir, jname, js, strlen(js)) != 0))
        why = strerror(errno);
    if (why)
        TP_ERROR("no step ended for %.0f s: hang report not written to %s: %s", stalled,
                 why == err ? tp_cfg.reports : dir, why);
    else
        TP_INFO("no step ended for %.0f s (steps completed: %llu): hang report %s/%s", stalled,
                (unsigned long long)steps, dir, tname);
    tp_reports++;
    free(js);
    free(txt);
    tp_flight_due = tp_hang_flight_on();
    tp_hang_flight_dump();
}

/* Seconds with no step before the first one ends, no blocking call that
 * long in flight (the DESIGN paragraph above). */
#define TP_HANG_FIRST_S 300.0

/* A thread has been inside one blocking call for "ns" or more at "now". */
static int tp_hang_blocked_for(uint64_t now, const struct tp_clock_map *m, double ns)
{
    for (unsigned i = 0; i < TP_INFLIGHT_SLOTS; i++) {
        struct tp_inflight_view v;
        if (tp_inflight_read(i, &v) && v.t0 && v.t0 <= now &&
            (double)tp_clock_ticks_to_ns(m, v.t0, now) >= ns)
            return 1;
    }
    return 0;
}

void tp_hang_idle(void)
{
    if (!tp_hang_on())
        return;
    uint64_t last = atomic_load_explicit(&tp_last_end, memory_order_acquire);
    if (last == tp_reported_end) {
        tp_hang_flight_dump();      /* owed while the step lock was busy */
        return;     /* this hang was reported; a step that ends starts the watch again */
    }
    tp_flight_due = 0;              /* a step ended: that hang is over */
    uint64_t now = tp_clock_now();
    struct tp_clock_map m = tp_clock_map_now();
    double quiet = (double)tp_clock_ticks_to_ns(&m, last, now);
    if (quiet < tp_hang_s * 1e9)
        return;
    if (atomic_load_explicit(&tp_last_steps, memory_order_relaxed) == 0 &&
        quiet < (tp_hang_s > TP_HANG_FIRST_S ? tp_hang_s : TP_HANG_FIRST_S) * 1e9 &&
        !tp_hang_blocked_for(now, &m, tp_hang_s * 1e9))
        return;
    tp_reported_end = last;
    if (tp_reports >= 1000) {
        if (!tp_warned++)
            TP_WARN("1000 hang reports written: no more for this process");
        return;
    }
    tp_hang_report(last, now, &m);
}
